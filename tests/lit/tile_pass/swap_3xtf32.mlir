// RUN: tinyopt %s -p 'fuse,plan' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile,to-cuda' -t cuda | filecheck %s --check-prefix=CUDA
// RUN: tinyopt %s -p 'fuse,plan{swap=off}' | filecheck %s --check-prefix=OFF
// RUN: not tinyopt %s -p 'fuse,plan{mma=3xtf32 swap=on bn=16}' 2>&1 | filecheck %s --check-prefix=NARROW

// f32 linears of 17 rows or more with a [N, K] weight (past 128 rows, of 128 weight rows or
// more): swap=auto puts the weight's rows on wgmma's
// A side, 128 a block, and the rows of x on its N side, 64 a block (passes/tile/gemm/
// wgmma_swapped.py). 14336 weight rows are 112 blocks: one wave, not split.
// CHECK:      loop.kernel @up_0({{.*}}plan = #tile.plan<wgmma_3xtf32, bm = 128, bn = 64, stages = 4,{{.*}}swap = "on">
// 9352 weight rows are 74 blocks on 132 SMs: K is cut in 7 chunks, four waves nearly whole
// (split_k_plan.swap_splits).
// CHECK:      loop.kernel @odd_0_splitk({{.*}}tinyopt.split_k_partial, plan = #tile.plan<wgmma_3xtf32, bm = 128, bn = 64,{{.*}}swap = "on">
// CHECK-NEXT:   loop.parallel ({{.*}}) in [7, 45, 9352]
// CHECK:      loop.kernel @odd_0_reduce
// OFF:        loop.kernel @up_0({{.*}}plan = #tile.plan<contraction,
// Each K step: the producer splits x's tile into big and small tiles of its own and records
// whether it holds an infinity; each consumer reads its weight fragments in two 16-byte loads a
// row, splits them in registers, agrees with its own warpgroup (bar.red.or on its own barrier)
// and issues three products per 8 of K with A in registers, the first overwriting the step's.
// CUDA-LABEL: up_0(
// CUDA:       bar.red.or.pred
// CUDA:       tinyopt_wgmma_ra_m64n64k8_tf32_k_set(
// CUDA-NEXT:  tinyopt_wgmma_ra_m64n64k8_tf32_k(
// CUDA-NEXT:  tinyopt_wgmma_ra_m64n64k8_tf32_k(
// CUDA:       wgmma.wait_group.sync.aligned 0;
// NARROW: error: tile: mma=3xtf32 with swap takes bm = 64 or 128 rows of B and bn = 32, 64, 128 rows of A, got bm=128 bn=16
func.func @up(%x: tensor<64x4096xf32>, %w: tensor<14336x4096xf32>) -> tensor<64x14336xf32> {
  %y = graph.linear %x, %w : (tensor<64x4096xf32>, tensor<14336x4096xf32>) -> tensor<64x14336xf32>
  func.return %y : tensor<64x14336xf32>
}

func.func @odd(%x: tensor<45x15072xf32>, %w: tensor<9352x15072xf32>) -> tensor<45x9352xf32> {
  %y = graph.linear %x, %w : (tensor<45x15072xf32>, tensor<9352x15072xf32>) -> tensor<45x9352xf32>
  func.return %y : tensor<45x9352xf32>
}
