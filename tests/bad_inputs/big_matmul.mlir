func.func @bigmm(%x: tensor<65536x32768xbf16>, %w: tensor<32768x64xbf16>) -> tensor<65536x64xbf16> {
  %y = graph.matmul %x, %w : (tensor<65536x32768xbf16>, tensor<32768x64xbf16>) -> tensor<65536x64xbf16>
  func.return %y : tensor<65536x64xbf16>
}
