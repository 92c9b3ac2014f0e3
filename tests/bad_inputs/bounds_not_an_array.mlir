func.func @f(%x: tensor<16x4xf32>, %o: tensor<i64> {tinyopt.bounds = 5 : i64}) -> tensor<2x4xf32> {
  %z = graph.dynamic_slice %x[%o] {dim = 0 : i64} : (tensor<16x4xf32>, tensor<i64>) -> tensor<2x4xf32>
  func.return %z : tensor<2x4xf32>
}
