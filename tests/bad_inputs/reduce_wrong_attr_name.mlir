func.func @f(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %y = graph.reduce_sum %x {axes = array<i64: 1>} : tensor<4x8xf32> -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
