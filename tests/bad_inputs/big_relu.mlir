func.func @big(%x: tensor<65536x32769xf16>) -> tensor<65536x32769xf16> {
  %y = graph.relu %x : tensor<65536x32769xf16>
  func.return %y : tensor<65536x32769xf16>
}
