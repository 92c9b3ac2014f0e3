func.func @f(%x: tensor<4x8xbf16>) -> tensor<4x8xi64> {
  %i = graph.argmax %x {dim = 1 : i64} : tensor<4x8xbf16> -> tensor<4x8xi64>
  func.return %i : tensor<4x8xi64>
}
