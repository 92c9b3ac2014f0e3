// RUN: tinyopt %s -p 'fuse,plan{why=1 skinny_mma=on}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,plan{why=1}' | filecheck %s --check-prefix=AUTO
// RUN: tinyopt %s -p 'fuse,plan{skinny_mma=off}' | filecheck %s --check-prefix=OFF

// The tensor-core skinny rule (passes/tile/gemm/skinny_mma.py, knob skinny_mma) by shape:
// f16/bf16 [N, K] weights, 2 <= M <= 64 rows, N >= 4·M. Each warp owns 16-row weight strips
// (two where M fits two 8-row tiles, with 4 K chunks in flight; else one, with 8), and K is
// cut over blocks where the weight bytes in flight per SM outweigh the partial sums' traffic
// (the partial kernel's first loop runs over splits × batch). skinny_mma=off
// gives the kernels back to the CUDA-core skinny rule (M <= 8) and to wgmma.

// Eight rows of q/o (4096 x 4096): two strips a warp, 32 blocks of 4 warps, K cut in 4.
// CHECK:      loop.kernel @rows8_0_splitk({{.*}}) attributes {tinyopt.skinny_partial, plan = #tile.plan<skinny_mma, threads = 128, vec = 8, strips = 2, unroll = 4, splits = 1, kwarps = 1, stages = 1>
// CHECK:      loop.parallel ({{.*}}) in [4, 8, 4096]
// CHECK:      loop.kernel @rows8_0_reduce({{.*}}) attributes {tinyopt.sequential, plan = #tile.plan<sequential,
// AUTO:       loop.kernel @rows8_0({{.*}}) attributes {plan = #tile.plan<skinny, threads = 256, vec = 8, rows = 8,
// AUTO-SAME:  "skinny_mma: measured slower than the skinny and wgmma rules on the H200 (0.10-0.78x cuBLAS): opt in with skinny_mma=on"
// OFF:        loop.kernel @rows8_0({{.*}}) attributes {plan = #tile.plan<skinny, threads = 256, vec = 8, rows = 8,
func.func @rows8(%x: tensor<8x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<8x4096xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  %y = graph.matmul %x, %wt : (tensor<8x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<8x4096xbf16>
  func.return %y : tensor<8x4096xbf16>
}

// Sixteen rows: two 8-row tiles, still two strips a warp.
// CHECK:      loop.kernel @rows16_0_splitk({{.*}}) attributes {tinyopt.skinny_partial, plan = #tile.plan<skinny_mma, threads = 128, vec = 8, strips = 2, unroll = 4, splits = 1, kwarps = 1, stages = 1>
// CHECK:      loop.parallel ({{.*}}) in [4, 16, 4096]
// OFF:        loop.kernel @rows16_0({{.*}}) attributes {plan = #tile.plan<wgmma,
func.func @rows16(%x: tensor<16x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<16x4096xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  %y = graph.matmul %x, %wt : (tensor<16x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<16x4096xbf16>
  func.return %y : tensor<16x4096xbf16>
}

// 64 rows: eight tiles, one strip a warp; the partial sums (2 MiB a chunk) hold the split
// to 2.
// CHECK:      loop.kernel @rows64_0_splitk({{.*}}) attributes {tinyopt.skinny_partial, plan = #tile.plan<skinny_mma, threads = 128, vec = 8, strips = 1, unroll = 8, splits = 1, kwarps = 1, stages = 1>
// CHECK:      loop.parallel ({{.*}}) in [2, 64, 4096]
// OFF:        loop.kernel @rows64_0({{.*}}) attributes {plan = #tile.plan<wgmma,
func.func @rows64(%x: tensor<64x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<64x4096xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  %y = graph.matmul %x, %wt : (tensor<64x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<64x4096xbf16>
  func.return %y : tensor<64x4096xbf16>
}

// One row: the GEMV rules' (here the row-reduction rule), with the reason.
func.func @gemv(%x: tensor<1x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<1x4096xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  %y = graph.matmul %x, %wt : (tensor<1x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<1x4096xbf16>
  func.return %y : tensor<1x4096xbf16>
}

// N < 4·M: a small GEMM, not a weight stream.
func.func @narrow(%x: tensor<16x4096xbf16>, %w: tensor<48x4096xbf16>) -> tensor<16x48xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<48x4096xbf16> -> tensor<4096x48xbf16>
  %y = graph.matmul %x, %wt : (tensor<16x4096xbf16>, tensor<4096x48xbf16>) -> tensor<16x48xbf16>
  func.return %y : tensor<16x48xbf16>
}

// [K, N] weights (x @ w) and f32 are not its kind.
// CHECK:      loop.kernel @kn_0({{.*}}) attributes {plan = #tile.plan<
// CHECK-SAME: "skinny_mma: [K, N] weights: its 16-byte weight loads need K contiguous ([N, K])"
func.func @kn(%x: tensor<16x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<16x4096xbf16> {
  %y = graph.matmul %x, %w : (tensor<16x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<16x4096xbf16>
  func.return %y : tensor<16x4096xbf16>
}

// CHECK:      loop.kernel @f32_0({{.*}}) attributes {plan = #tile.plan<skinny,
// CHECK-SAME: "skinny_mma: not a product of f16 or bf16 operands (one type)"
func.func @f32(%x: tensor<16x4096xf32>, %w: tensor<4096x4096xf32>) -> tensor<16x4096xf32> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4096x4096xf32> -> tensor<4096x4096xf32>
  %y = graph.matmul %x, %wt : (tensor<16x4096xf32>, tensor<4096x4096xf32>) -> tensor<16x4096xf32>
  func.return %y : tensor<16x4096xf32>
}
