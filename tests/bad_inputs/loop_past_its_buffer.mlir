builtin.module {
  loop.kernel @f_0(%x: memref<4x8xf32>, %y: memref<4x8xf32>) {
    loop.parallel (%i, %j) in [4, 9] {
      %v = memref.load %x[%i, %j] : memref<4x8xf32>
      memref.store %v, %y[%i, %j] : memref<4x8xf32>
    }
  }
  func.func @f(%x: memref<4x8xf32>) -> memref<4x8xf32> {
    %y = memref.alloc() : memref<4x8xf32>
    loop.launch @f_0(%x, %y) : memref<4x8xf32>, memref<4x8xf32>
    func.return %y : memref<4x8xf32>
  }
}
