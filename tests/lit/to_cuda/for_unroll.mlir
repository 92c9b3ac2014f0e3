// RUN: tinyopt %s -p to-cuda | filecheck %s
// scf.for with a carried value: the local is declared before the loop and assigned at the
// yield; `tile.unroll` asks for `#pragma unroll`. Register arrays are C arrays.

// CHECK:      float regs[4];
// CHECK:      float acc = 0.0f;
// CHECK-NEXT: #pragma unroll
// CHECK-NEXT: for (int i = 0; i < 4; i += 1) {
// CHECK-NEXT:   float v = x[t * 4 + i];
// CHECK-NEXT:   regs[i] = v;
// CHECK-NEXT:   float sum = acc + v;
// CHECK-NEXT:   acc = sum;
// CHECK-NEXT: }
// CHECK-NEXT: out[t] = acc;
builtin.module {
  tile.kernel @accumulate grid [1, 1, 1] block [32, 1, 1] (%x: memref<32x4xf32>, %out: memref<32xf32>) {
    %t = tile.thread_id x
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %zero = arith.constant 0.0 : f32
    %regs = tile.alloc : memref<4xf32, 5 : i32>
    %acc = scf.for %i = %c0 to %c4 step %c1 iter_args(%a = %zero) -> (f32) {
      %v = memref.load %x[%t, %i] : memref<32x4xf32>
      memref.store %v, %regs[%i] : memref<4xf32, 5 : i32>
      %sum = arith.addf %a, %v : f32
      scf.yield %sum : f32
    } {tile.unroll}
    memref.store %acc, %out[%t] : memref<32xf32>
  }
}
