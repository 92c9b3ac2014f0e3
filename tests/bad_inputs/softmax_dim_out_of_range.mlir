func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = graph.softmax %x {dim = 5 : i64} : tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
