// RUN: tinyopt %s -p 'decompose,fuse,flash-attention' | filecheck %s --check-prefix=FUSED
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention{f32=false}' | filecheck %s --check-prefix=KEPT
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention{f32=false},plan' | filecheck %s --check-prefix=PLAN

// `flash-attention{f32=false}` keeps f32 attention's scores GEMM,
// row softmax and PV GEMM, which the FP32 contraction and row-reduction rules take; fused, it
// runs on the SIMT attention rule (attn=simt, tests/lit/tile_pass/attention_simt.mlir).

func.func @attention(%q: tensor<1x4x64x32xf32>, %k: tensor<1x4x64x32xf32>, %v: tensor<1x4x64x32xf32>) -> tensor<1x4x64x32xf32> {
  %o = graph.attention %q, %k, %v {causal = false, scale = 0.176776695 : f32} : (tensor<1x4x64x32xf32>, tensor<1x4x64x32xf32>, tensor<1x4x64x32xf32>) -> tensor<1x4x64x32xf32>
  func.return %o : tensor<1x4x64x32xf32>
}
// FUSED:     attributes {tinyopt.flash_attention}
// FUSED-NOT: loop.kernel @attention_1
// KEPT-NOT:  tinyopt.flash_attention
// KEPT:      loop.kernel @attention_2
// PLAN:      loop.kernel @attention_0({{.*}}) attributes {plan = #tile.plan<contraction
// PLAN:      loop.kernel @attention_1({{.*}}) attributes {plan = #tile.plan<row_reduction
// PLAN:      loop.kernel @attention_2({{.*}}) attributes {plan = #tile.plan<contraction
