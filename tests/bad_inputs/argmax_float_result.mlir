func.func @f(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %i = graph.argmax %x {dim = 1 : i64} : tensor<4x8xf32> -> tensor<4xf32>
  func.return %i : tensor<4xf32>
}
