func.func @f(%x: tensor<?x4xf32>) -> tensor<?x4xf32> {
  %y = graph.relu %x : tensor<?x4xf32>
  func.return %y : tensor<?x4xf32>
}
