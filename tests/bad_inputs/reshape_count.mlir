func.func @f(%x: tensor<4x8xf32>) -> tensor<3x8xf32> {
  %y = graph.reshape %x : tensor<4x8xf32> -> tensor<3x8xf32>
  func.return %y : tensor<3x8xf32>
}
