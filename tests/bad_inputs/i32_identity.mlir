func.func @f(%x: tensor<4xi32>) -> tensor<4xi32> {
  func.return %x : tensor<4xi32>
}
