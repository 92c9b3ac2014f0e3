func.func @f(%x: tensor<1000000x1000000xf32>) -> tensor<1000000x1000000xf32> {
  %c = graph.constant dense<1.0> : tensor<1000000x1000000xf32>
  %y = graph.add %x, %c : tensor<1000000x1000000xf32>
  func.return %y : tensor<1000000x1000000xf32>
}
