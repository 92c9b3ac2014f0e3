// PIPELINE: fuse,flash-attention,tile,to-cuda
// Attention followed by where(mask, attention, 0.0) (CPU sweep of the fuzzer's new attention
// step): the P·V sum's init constant, 0.0, is the one the select reads, and flash-attention
// dropped it, leaving the fused kernel's epilogue reading a value from the old kernel
// (verifier error, or a KeyError in the CUDA printer).
func.func @fuzz(%a1: tensor<1x4x2x4xbf16>, %a2: tensor<1x2x2x4xbf16>, %a3: tensor<1x2x2x4xbf16>, %a5: tensor<1x4x2x4xi1>) -> tensor<1x4x2x4xbf16> {
    %v1 = graph.attention %a1, %a2, %a3 {scale = 3.500000e-01 : f32, causal = true} : (tensor<1x4x2x4xbf16>, tensor<1x2x2x4xbf16>, tensor<1x2x2x4xbf16>) -> tensor<1x4x2x4xbf16>
    %v6 = graph.constant dense<0.000000e+00> : tensor<1x1x1x1xbf16>
    %v7 = graph.broadcast %v6 : tensor<1x1x1x1xbf16> -> tensor<1x4x2x4xbf16>
    %v8 = graph.select %a5, %v1, %v7 : tensor<1x4x2x4xi1>, tensor<1x4x2x4xbf16>
    func.return %v8 : tensor<1x4x2x4xbf16>
}
