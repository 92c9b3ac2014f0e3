builtin.module {
  loop.kernel @f_0(%0: memref<64xf32>, %1: memref<64xf32>) attributes {plan = 5 : i64} {
    loop.parallel (%2) in [64] {
      %3 = memref.load %0[%2] : memref<64xf32>
      %4 = arith.constant 0.000000e+00 : f32
      %5 = arith.maximumf %3, %4 : f32
      memref.store %5, %1[%2] : memref<64xf32>
    }
  }
  func.func @f(%0: memref<64xf32>) -> memref<64xf32> {
    %1 = memref.alloc() : memref<64xf32>
    loop.launch @f_0(%0, %1) : memref<64xf32>, memref<64xf32>
    func.return %1 : memref<64xf32>
  }
}
