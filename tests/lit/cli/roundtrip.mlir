// RUN: tinyopt %s | filecheck %s
// RUN: tinyopt %s --print-op-generic | tinyopt | filecheck %s
// An empty pipeline prints the IR back; the generic form reads back to the same custom form.

// CHECK:      loop.kernel @scale(%x: memref<64xf32>, %y: memref<64xf32>) {
// CHECK-NEXT:   loop.parallel (%i) in [64] {
// CHECK:        func.func @scale_host
// CHECK-NEXT:     %o = memref.alloc() : memref<64xf32>
// CHECK-NEXT:     loop.launch @scale(%x, %o) : memref<64xf32>, memref<64xf32>
builtin.module {
  loop.kernel @scale(%x: memref<64xf32>, %y: memref<64xf32>) {
    loop.parallel (%i) in [64] {
      %v = memref.load %x[%i] : memref<64xf32>
      %s = arith.addf %v, %v : f32
      memref.store %s, %y[%i] : memref<64xf32>
    }
  }
  func.func @scale_host(%x: memref<64xf32>) -> memref<64xf32> {
    %o = memref.alloc() : memref<64xf32>
    loop.launch @scale(%x, %o) : memref<64xf32>, memref<64xf32>
    func.return %o : memref<64xf32>
  }
}
