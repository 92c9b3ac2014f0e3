// RUN: tinyopt %s -p 'fuse,plan{why=1 skinny_mma=on}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,plan{why=1}' | filecheck %s --check-prefix=AUTO
// RUN: tinyopt %s -p 'fuse,plan{skinny_mma=off}' | filecheck %s --check-prefix=OFF

// The tensor-core skinny rule (passes/tile/gemm/skinny_mma.py, knob skinny_mma) by shape:
// f16/bf16 [N, K] weights; `auto` takes 2 <= M <= 16 rows with N >= 4·M, `on` up to 64. Each
// warp owns 16-row weight strips (two where M fits two 8-row tiles); up to two row tiles a
// block has 16 warps, as many along K (kwarps) as keep the grid within one block per SM, and
// each K iteration loads the next one's registers first (stages=2); past two row tiles, 4
// warps and stages=1. skinny_mma=off gives the kernels back to the CUDA-core skinny rule
// (M <= 8) and to wgmma.

// Eight rows of q/o (4096 x 4096): 128 blocks of 32 columns, K cut over 16 warps.
// CHECK:      loop.kernel @rows8_0({{.*}}) attributes {plan = #tile.plan<skinny_mma, threads = 512, vec = 8, strips = 2, unroll = 2, splits = 1, kwarps = 16, stages = 2, evict = "{{[a-z]+}}">
// AUTO:       loop.kernel @rows8_0({{.*}}) attributes {plan = #tile.plan<skinny_mma, threads = 512, vec = 8, strips = 2, unroll = 2, splits = 1, kwarps = 16, stages = 2, evict = "{{[a-z]+}}">
// OFF:        loop.kernel @rows8_0({{.*}}) attributes {plan = #tile.plan<skinny, threads = 256, vec = 8, rows = 8,
func.func @rows8(%x: tensor<8x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<8x4096xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  %y = graph.matmul %x, %wt : (tensor<8x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<8x4096xbf16>
  func.return %y : tensor<8x4096xbf16>
}

// Sixteen rows: two 8-row tiles, still two strips a warp.
// CHECK:      loop.kernel @rows16_0({{.*}}) attributes {plan = #tile.plan<skinny_mma, threads = 512, vec = 8, strips = 2, unroll = 2, splits = 1, kwarps = 16, stages = 2, evict = "{{[a-z]+}}">
// AUTO:       loop.kernel @rows16_0({{.*}}) attributes {plan = #tile.plan<skinny_mma, threads = 512, vec = 8, strips = 2, unroll = 2, splits = 1, kwarps = 16, stages = 2, evict = "{{[a-z]+}}">
// OFF:        loop.kernel @rows16_0({{.*}}) attributes {plan = #tile.plan<wgmma,
func.func @rows16(%x: tensor<16x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<16x4096xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  %y = graph.matmul %x, %wt : (tensor<16x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<16x4096xbf16>
  func.return %y : tensor<16x4096xbf16>
}

// 64 rows: eight tiles, one strip a warp, 4 warps (2 along K), stages=1 under `on`; auto
// leaves it to wgmma, with the reason.
// CHECK:      loop.kernel @rows64_0({{.*}}) attributes {plan = #tile.plan<skinny_mma, threads = 128, vec = 8, strips = 1, unroll = 8, splits = 1, kwarps = 2, stages = 1, evict = "{{[a-z]+}}">
// AUTO:       loop.kernel @rows64_0({{.*}}) attributes {plan = #tile.plan<wgmma,
// AUTO-SAME:  "skinny_mma: M = 64 > 16: left to wgmma (measured at M <= 16 only)"
// OFF:        loop.kernel @rows64_0({{.*}}) attributes {plan = #tile.plan<wgmma,
func.func @rows64(%x: tensor<64x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<64x4096xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  %y = graph.matmul %x, %wt : (tensor<64x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<64x4096xbf16>
  func.return %y : tensor<64x4096xbf16>
}

// One row: the GEMV rules' (here the row-reduction rule), with the reason.
// AUTO:       loop.kernel @gemv_0({{.*}}) attributes {plan = #tile.plan<row_reduction,
// AUTO-SAME:  "skinny_mma: one row: the GEMV rules' (row reduction, skinny)"
func.func @gemv(%x: tensor<1x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<1x4096xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  %y = graph.matmul %x, %wt : (tensor<1x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<1x4096xbf16>
  func.return %y : tensor<1x4096xbf16>
}

// N < 4·M: a small GEMM, not a weight stream (on wgmma, K split over a cluster of 8 blocks).
// AUTO:       loop.kernel @narrow_0({{.*}}) attributes {plan = #tile.plan<wgmma, {{.*}}cluster = 8,
// AUTO-SAME:  "skinny_mma: N = 48 columns for M = 16 rows: the weights are not 4x the rows' bytes (skinny_mma=on forces it)"
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

// gate/up's 14336 columns at 8 rows: 16 K warps would make 448 blocks (3.4 waves of one block
// per SM); 4 make 112 blocks of 4 × 32 columns, within one.
// AUTO:       loop.kernel @wide8_0({{.*}}) attributes {plan = #tile.plan<skinny_mma, threads = 512, vec = 8, strips = 2, unroll = 2, splits = 1, kwarps = 4, stages = 2, evict = "{{[a-z]+}}">
func.func @wide8(%x: tensor<8x4096xbf16>, %w: tensor<14336x4096xbf16>) -> tensor<8x14336xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<14336x4096xbf16> -> tensor<4096x14336xbf16>
  %y = graph.matmul %x, %wt : (tensor<8x4096xbf16>, tensor<4096x14336xbf16>) -> tensor<8x14336xbf16>
  func.return %y : tensor<8x14336xbf16>
}

// k/v's 1024 columns at 16 rows: 32 blocks of 16 K warps leave three quarters of the SMs
// idle, so K is cut in 4 over blocks (128: one wave), a partial-sum kernel and a fold.
// AUTO:       loop.kernel @narrow16_0_splitk({{.*}}) attributes {tinyopt.skinny_partial, plan = #tile.plan<skinny_mma, threads = 512, vec = 8, strips = 2, unroll = 2, splits = 1, kwarps = 16, stages = 2, evict = "{{[a-z]+}}">
// AUTO:       loop.parallel ({{.*}}) in [4, 16, 1024]
// AUTO:       loop.kernel @narrow16_0_reduce(
func.func @narrow16(%x: tensor<16x4096xbf16>, %w: tensor<1024x4096xbf16>) -> tensor<16x1024xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<1024x4096xbf16> -> tensor<4096x1024xbf16>
  %y = graph.matmul %x, %wt : (tensor<16x4096xbf16>, tensor<4096x1024xbf16>) -> tensor<16x1024xbf16>
  func.return %y : tensor<16x1024xbf16>
}
