// Causal attention, bf16: batch 2, 8 heads, 1024 positions, head dim 64.
// tinyopt examples/attention.mlir -p decompose,fuse,flash-attention,tile,to-cuda
func.func @attention(%q: tensor<2x8x1024x64xbf16>, %k: tensor<2x8x1024x64xbf16>, %v: tensor<2x8x1024x64xbf16>) -> tensor<2x8x1024x64xbf16> {
  %y = graph.attention %q, %k, %v {scale = 0.125 : f32, causal = true} : (tensor<2x8x1024x64xbf16>, tensor<2x8x1024x64xbf16>, tensor<2x8x1024x64xbf16>) -> tensor<2x8x1024x64xbf16>
  func.return %y : tensor<2x8x1024x64xbf16>
}
