func.func @f(%x: tensor<4x8xf32>, %y: tensor<4x8xf16>) -> tensor<4x8xf32> {
  %z = graph.add %x, %y : tensor<4x8xf32>
  func.return %z : tensor<4x8xf32>
}
