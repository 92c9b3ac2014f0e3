// Softmax over the last dimension of attention-shaped scores (batch 1, 28 heads, 2048 x 2048).
func.func @softmax(%x: tensor<1x28x2048x2048xf32>) -> tensor<1x28x2048x2048xf32> {
  %y = graph.softmax %x {dim = 3 : i64} : tensor<1x28x2048x2048xf32>
  func.return %y : tensor<1x28x2048x2048xf32>
}
