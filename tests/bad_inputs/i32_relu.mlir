func.func @f(%x: tensor<4xi32>) -> tensor<4xi32> {
  %y = graph.relu %x : tensor<4xi32>
  func.return %y : tensor<4xi32>
}
