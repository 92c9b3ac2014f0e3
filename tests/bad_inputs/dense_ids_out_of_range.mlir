func.func @f(%table: tensor<10x4xf32>) -> tensor<2x4xf32> {
  %ids = graph.constant dense<[1, 4294967296]> : tensor<2xi32>
  %y = graph.gather %table, %ids : (tensor<10x4xf32>, tensor<2xi32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
