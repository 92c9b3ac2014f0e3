// A bias add broadcast over rows, then GELU: one elementwise kernel.
func.func @bias_gelu(%x: tensor<4096x3072xf32>, %bias: tensor<3072xf32>) -> tensor<4096x3072xf32> {
  %b = graph.broadcast %bias : tensor<3072xf32> -> tensor<4096x3072xf32>
  %s = graph.add %x, %b : tensor<4096x3072xf32>
  %y = graph.gelu %s : tensor<4096x3072xf32>
  func.return %y : tensor<4096x3072xf32>
}
