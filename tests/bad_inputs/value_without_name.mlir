func.func @f(% : tensor<4xf32>) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
