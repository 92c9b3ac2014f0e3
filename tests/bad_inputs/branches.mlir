func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  cf.br ^bb1
^bb1:
  %z = graph.relu %x : tensor<4xf32>
  func.return %z : tensor<4xf32>
}
