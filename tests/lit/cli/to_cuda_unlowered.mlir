// RUN: not tinyopt %s -p to-cuda 2>&1 | filecheck %s
// to-cuda prints tile kernels; a loop.kernel that was never tiled is a diagnostic, not a crash.

// CHECK-NOT: Traceback
// CHECK: tinyopt: error: to-cuda: {{.*}}loop.kernel{{.*}}@copy
// CHECK-NOT: Traceback
builtin.module {
  loop.kernel @copy(%x: memref<64xf32>, %y: memref<64xf32>) {
    loop.parallel (%i) in [64] {
      %v = memref.load %x[%i] : memref<64xf32>
      memref.store %v, %y[%i] : memref<64xf32>
    }
  }
}
