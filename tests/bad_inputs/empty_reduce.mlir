func.func @f(%x: tensor<4x0xf32>) -> tensor<4xf32> {
  %y = graph.reduce_sum %x {dims = array<i64: 1>} : tensor<4x0xf32> -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
