// PIPELINE: fuse,flash-attention,welford,tile{minblocks=2 stages=2},to-cuda
// A bf16 softmax of x² − Σx² (H200 fuzz seed 1 case 1238 of run_gpu.py -n 2000, 2026-12-03,
// reduced on the GPU): Σx² ≈ 455, where bf16's step is 2, so the differences the softmax
// depends on are lost in bf16; the reference rounded at each op is 0.44 from float64, and the
// kernel (which keeps Σx² in f32) was 5.7e-2 from the nearer of the two, past bf16's 2e-2. Not
// a miscompile: an ill-conditioned program, now judged against twice its rounded reference's
// own error (generate.allowed_error).
builtin.module {
  func.func @fuzz(%a0: tensor<33x16xbf16>) -> tensor<33x16xbf16> {
    %v4 = graph.mul %a0, %a0 : tensor<33x16xbf16>
    %v6 = graph.reduce_sum %v4 {dims = array<i64: 0, 1>, keepdim = true} : tensor<33x16xbf16> -> tensor<1x1xbf16>
    %v7 = graph.broadcast %v6 : tensor<1x1xbf16> -> tensor<33x16xbf16>
    %v8 = graph.sub %v4, %v7 : tensor<33x16xbf16>
    %v9 = graph.iota {dim = 1 : i64} : tensor<33x16xbf16>
    %v10 = graph.constant dense<0.000000e+00> : tensor<1xbf16>
    %v11 = graph.broadcast %v10 : tensor<1xbf16> -> tensor<33x16xbf16>
    %v12 = graph.compare %v9, %v11 {predicate = "eq"} : tensor<33x16xbf16> -> tensor<33x16xi1>
    %v13 = graph.iota {dim = 1 : i64} : tensor<33x16xbf16>
    %v16 = graph.constant dense<0.000000e+00> : tensor<1x1xbf16>
    %v17 = graph.broadcast %v16 : tensor<1x1xbf16> -> tensor<33x16xbf16>
    %v18 = graph.compare %v13, %v17 {predicate = "gt"} : tensor<33x16xbf16> -> tensor<33x16xi1>
    %v19 = graph.cast %v18 : tensor<33x16xi1> -> tensor<33x16xbf16>
    %v20 = graph.cast %v12 : tensor<33x16xi1> -> tensor<33x16xbf16>
    %v21 = graph.max %v19, %v20 : tensor<33x16xbf16>
    %v22 = graph.cast %v21 : tensor<33x16xbf16> -> tensor<33x16xi1>
    %v23 = graph.constant dense<-9.984000e+03> : tensor<1x1xbf16>
    %v24 = graph.broadcast %v23 : tensor<1x1xbf16> -> tensor<33x16xbf16>
    %v25 = graph.select %v22, %v8, %v24 : tensor<33x16xi1>, tensor<33x16xbf16>
    %v26 = graph.softmax %v25 {dim = 1 : i64} : tensor<33x16xbf16>
    func.return %v26 : tensor<33x16xbf16>
  }
}
