func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = graph.exp %x : tensor<4x