// RUN: tinyopt %s -p 'fuse,plan{why=1 skinny_mma=off}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,plan{skinny=off skinny_mma=off}' | filecheck %s --check-prefix=OFF

// The skinny-GEMM rule (passes/tile/gemm/skinny.py) by shape: M <= 64 rows whose weights are
// the bytes, one row of [N, K] weights excepted (the row-reduction rule's GEMV); f16/bf16 up to
// M = 8, f32 up to 16 (past it the FMAs bind on CUDA cores: the GEMM rules take it). skinny=off gives the kernels back to the other rules (skinny_knobs.mlir: an
// explicit mma, skinny=on). skinny_mma=off here: under auto the tensor-core skinny rule, tried
// first, takes the f16/bf16 [N, K] kernels of 2 rows or more (skinny_mma_choice.mlir).

// A decode GEMV (torch layout): one block per output on the row-reduction rule.
// CHECK:      loop.kernel @gemv_0({{.*}}) attributes {plan = #tile.plan<row_reduction,
// CHECK-SAME: "skinny: one row of [N, K] weights: the row-reduction rule streams them as fast (skinny=on forces it)"
// OFF:        loop.kernel @gemv_0({{.*}}) attributes {plan = #tile.plan<row_reduction,
func.func @gemv(%x: tensor<1x4096xbf16>, %w: tensor<14336x4096xbf16>) -> tensor<1x14336xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<14336x4096xbf16> -> tensor<4096x14336xbf16>
  %y = graph.matmul %x, %wt : (tensor<1x4096xbf16>, tensor<4096x14336xbf16>) -> tensor<1x14336xbf16>
  func.return %y : tensor<1x14336xbf16>
}

// Two rows, 1024 columns (a k/v projection): 512 warps, fewer than 8 per SM, so K is cut in 4 chunks:
// a partial-sum kernel the rule runs, then a fold applying the epilogue (one thread per point).
// CHECK:      loop.kernel @kv_0_splitk({{.*}}) attributes {tinyopt.skinny_partial, plan = #tile.plan<skinny, threads = 256, vec = 8, rows = 2, cols = 2, unroll = 4, splits = 1, evict = "{{[a-z]+}}">
// CHECK:      loop.parallel ({{.*}}) in [4, 2, 1024]
// CHECK:      loop.kernel @kv_0_reduce({{.*}}) attributes {tinyopt.sequential, plan = #tile.plan<sequential,
func.func @kv(%x: tensor<2x4096xbf16>, %w: tensor<1024x4096xbf16>) -> tensor<2x1024xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<1024x4096xbf16> -> tensor<4096x1024xbf16>
  %y = graph.matmul %x, %wt : (tensor<2x4096xbf16>, tensor<4096x1024xbf16>) -> tensor<2x1024xbf16>
  func.return %y : tensor<2x1024xbf16>
}

// Eight rows of bf16: the rule (on wgmma, 32 blocks of 128x128 for 132 SMs).
// CHECK:      loop.kernel @rows8_0({{.*}}) attributes {plan = #tile.plan<skinny, threads = 256, vec = 8, rows = 8, cols = 2, unroll = 4, splits = 1, evict = "{{[a-z]+}}">
// OFF:        loop.kernel @rows8_0({{.*}}) attributes {plan = #tile.plan<wgmma,
func.func @rows8(%x: tensor<8x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<8x4096xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  %y = graph.matmul %x, %wt : (tensor<8x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<8x4096xbf16>
  func.return %y : tensor<8x4096xbf16>
}

// 64 rows of bf16: FMA-bound on CUDA cores, left to wgmma with the reason.
// CHECK:      loop.kernel @rows64_bf16_0({{.*}}) attributes {plan = #tile.plan<wgmma,
// CHECK-SAME: "skinny: M = 64 rows of 2-byte weights do 64 FLOPs per weight byte, more than the 8 the rule keeps up with: bound by FMAs, left to the other rules (skinny=on forces it)"
func.func @rows64_bf16(%x: tensor<64x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<64x4096xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  %y = graph.matmul %x, %wt : (tensor<64x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<64x4096xbf16>
  func.return %y : tensor<64x4096xbf16>
}

// 16 rows of f32 (x @ w, w [K, N]): the rule, 16 rows a thread; 128 blocks of 4 warps, so K is
// cut in 4 too.
// CHECK:      loop.kernel @rows16_f32_0_splitk({{.*}}) attributes {tinyopt.skinny_partial, plan = #tile.plan<skinny, threads = 128, vec = 4, rows = 16,
// OFF:        loop.kernel @rows16_f32_0({{.*}}) attributes {plan = #tile.plan<contraction,
func.func @rows16_f32(%x: tensor<16x4096xf32>, %w: tensor<4096x4096xf32>) -> tensor<16x4096xf32> {
  %y = graph.matmul %x, %w : (tensor<16x4096xf32>, tensor<4096x4096xf32>) -> tensor<16x4096xf32>
  func.return %y : tensor<16x4096xf32>
}

// 64 rows of f32: FMA-bound on CUDA cores, left to the FP32 contraction with the reason.
// CHECK:      loop.kernel @rows64_f32_0({{.*}}) attributes {plan = #tile.plan<contraction,
// CHECK-SAME: "skinny: M = 64 rows of 4-byte weights do 32 FLOPs per weight byte, more than the 8 the rule keeps up with: bound by FMAs, left to the other rules (skinny=on forces it)"
func.func @rows64_f32(%x: tensor<64x4096xf32>, %w: tensor<4096x4096xf32>) -> tensor<64x4096xf32> {
  %y = graph.matmul %x, %w : (tensor<64x4096xf32>, tensor<4096x4096xf32>) -> tensor<64x4096xf32>
  func.return %y : tensor<64x4096xf32>
}

// 65 rows: not a skinny GEMM.
// CHECK:      loop.kernel @rows65_0({{.*}}) attributes {plan = #tile.plan<contraction,
// CHECK-SAME: "skinny: M = 65 rows, more than the 64 of a skinny GEMM"
func.func @rows65(%x: tensor<65x4096xf32>, %w: tensor<4096x4096xf32>) -> tensor<65x4096xf32> {
  %y = graph.matmul %x, %w : (tensor<65x4096xf32>, tensor<4096x4096xf32>) -> tensor<65x4096xf32>
  func.return %y : tensor<65x4096xf32>
}
