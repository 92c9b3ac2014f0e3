func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %c = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x17xf32>
  func.return %c : tensor<4x17xf32>
}
