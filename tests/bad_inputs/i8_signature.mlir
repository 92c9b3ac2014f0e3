func.func @f(%x: tensor<4xi8>) -> tensor<4xi8> {
  func.return %x : tensor<4xi8>
}
