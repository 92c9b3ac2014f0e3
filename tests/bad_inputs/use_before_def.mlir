func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = graph.add %b, %x : tensor<4x8xf32>
  %b = graph.relu %a : tensor<4x8xf32>
  func.return %b : tensor<4x8xf32>
}
