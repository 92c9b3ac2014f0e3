func.func @bigsoft(%x: tensor<65536x32769xf16>) -> tensor<65536x32769xf16> {
  %y = graph.softmax %x {dim = 1 : i64} : tensor<65536x32769xf16>
  func.return %y : tensor<65536x32769xf16>
}
