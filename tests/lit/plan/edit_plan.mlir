// The plan is IR: `fuse,plan` prints each kernel's rule and every knob it reads, resolved;
// `tile` emits from the plan as written, so an edited knob is followed, and a bad edit is a
// diagnostic naming the knob. The plan is printed once (%t.plan) and edited by each `sed`.
//
// RUN: tinyopt %S/../../../examples/matmul_relu.mlir -p fuse,tile | filecheck %s --check-prefix=EXAMPLE
// RUN: tinyopt %s -p fuse,plan > %t.plan
// RUN: filecheck %s --check-prefix=PLAN < %t.plan
// RUN: tinyopt %s -p 'fuse,plan{why=1}' | filecheck %s --check-prefix=WHY
// RUN: tinyopt %s -p fuse,tile | filecheck %s --check-prefix=TILE
// RUN: sed 's/bm = 64,/bm = 128,/' %t.plan | tinyopt -p tile,to-cuda -t cuda | filecheck %s --check-prefix=EDITED
// RUN: sed 's/bm = 64,/bm = 48,/' %t.plan | not tinyopt -p tile,to-cuda 2>&1 | filecheck %s --check-prefix=DOMAIN
// RUN: sed 's/tm = 8,/tm = 8, tq = 2,/' %t.plan | not tinyopt -p tile,to-cuda 2>&1 | filecheck %s --check-prefix=UNKNOWN
// RUN: sed 's/tm = 8,/tm = 3,/' %t.plan | not tinyopt -p tile,to-cuda 2>&1 | filecheck %s --check-prefix=RULE
// RUN: sed 's/<contraction,/<elementwise,/' %t.plan | not tinyopt -p tile,to-cuda 2>&1 | filecheck %s --check-prefix=OTHER

func.func @matmul_relu(%x: tensor<1000x1000xf32>, %w: tensor<1000x1000xf32>) -> tensor<1000x1000xf32> {
  %y = graph.matmul %x, %w : (tensor<1000x1000xf32>, tensor<1000x1000xf32>) -> tensor<1000x1000xf32>
  %r = graph.relu %y : tensor<1000x1000xf32>
  func.return %r : tensor<1000x1000xf32>
}

// The shipped example (a fused bias: register staging) shows every knob of its plan.
// EXAMPLE: tile.kernel @matmul_relu_0 grid [16, 32, 1] block [128, 1, 1] ({{.*}}) attributes {plan = #tile.plan<contraction, bm = 32, bn = 64, bk = 16, tm = 4, tn = 4, pad = 4, split = 1, stages = 2, group = 8, copy = "ld", ws = 1, swizzle = 0, pairswap = 1, vec = 4, minblocks = 4, interleave = "off", prefetch = "off", streamk = "off">, tile.min_blocks = 4 : i64} {

// PLAN: loop.kernel @matmul_relu_0({{.*}}) attributes {plan = #tile.plan<contraction, bm = 64, bn = 64, bk = 32, tm = 8, tn = 4, pad = 4, split = 1, stages = 2, group = 8, copy = "tma", ws = 1, swizzle = 0, pairswap = 0, vec = 4, minblocks = 1, interleave = "off", prefetch = "off", streamk = "off">} {

// plan{why=1}: why each rule before the contraction rule refused the kernel.
// WHY: refusals = ["attention_decode: not a flash-attention kernel (the flash-attention rewrite's form)", "attention_wgmma: not a flash-attention kernel (the flash-attention rewrite's form)", "attention: not a flash-attention kernel (the flash-attention rewrite's form)", "attention_simt: not a flash-attention kernel (the flash-attention rewrite's form)", "skinny_mma: M = 1000 rows, more than the 64 of a skinny GEMM", "skinny: M = 1000 rows, more than the 64 of a skinny GEMM", "wgmma: not a sum of products of f16, bf16 or 8-bit float operands (one type)", "wgmma_staged: not a sum of products of f16 or bf16 operands (one type)", "wgmma_3xtf32: mma=3xtf32 is taken by mma=auto only for more than 64 rows and grids of at least one block per SM (1000 rows, 128 blocks of 64x128 on 132 SMs): 64x64 blocks, split K or not, ran 0.70-0.88x cuBLAS at 64 rows where the CUDA-core rules ran 0.85-0.98x (the 3xTF32 rate needs full waves of 128-row blocks), or for 33-64 rows the CUDA-core row block starves on with K split", "mma_sync: not a sum of products of f16 or bf16 operands (one type)", "tf32: the knobs select other rules (schedule=auto, mma=auto, attn=auto)"]

// TILE: tile.kernel @matmul_relu_0 grid [16, 16, 1] block [160, 1, 1] ({{.*}}) attributes {plan = #tile.plan<contraction, bm = 64, bn = 64, bk = 32, tm = 8, tn = 4, pad = 4, split = 1, stages = 2, group = 8, copy = "tma", ws = 1, swizzle = 0, pairswap = 0, vec = 4, minblocks = 1, interleave = "off", prefetch = "off", streamk = "off">, tile.min_blocks = 1 : i64, tile.tensor_maps = {{.*}}} {

// The small grid takes TMA with 64×64 tiles (copy=auto): 16×16 blocks of (64/8)·(64/4) = 128
// threads and a producer warp. Edited to 128-row tiles: half the block rows, 256 + 32 threads.
// EDITED: // kernel @matmul_relu_0 grid (16, 8, 1) block (288, 1, 1) smem 50176

// DOMAIN: error: tile: plan of kernel @matmul_relu_0: knob bm must be a power of two in [16, 256] (or 0 for auto), got 48
// UNKNOWN: error: tile: plan of kernel @matmul_relu_0: rule contraction has no knob tq (its knobs: bm, bn, bk, tm, tn, pad, split, stages, group, copy, ws, swizzle, pairswap, vec, minblocks, interleave, prefetch, streamk)
// RULE: error: tile: plan of kernel @matmul_relu_0: knob tm must be a power of two in [1, 16] (or 0 for auto), got 3
// OTHER: error: tile: kernel @matmul_relu_0: rule elementwise of its plan: not one parallel loop without nested loops
