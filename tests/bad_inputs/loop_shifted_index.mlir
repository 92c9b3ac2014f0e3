builtin.module {
  loop.kernel @f_0(%x: memref<16xf32>, %y: memref<16xf32>) {
    loop.parallel (%i) in [16] {
      %c1 = arith.constant 1 : index
      %c15 = arith.constant 15 : index
      %prev = arith.subi %i, %c1 : index
      %clamped = arith.minsi %prev, %c15 : index
      %v = memref.load %x[%clamped] : memref<16xf32>
      memref.store %v, %y[%i] : memref<16xf32>
    }
  }
  func.func @f(%x: memref<16xf32>) -> memref<16xf32> {
    %y = memref.alloc() : memref<16xf32>
    loop.launch @f_0(%x, %y) : memref<16xf32>, memref<16xf32>
    func.return %y : memref<16xf32>
  }
}
