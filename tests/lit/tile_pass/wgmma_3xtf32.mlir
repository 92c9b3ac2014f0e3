// RUN: tinyopt %s -p 'fuse,plan{swap=off}' | filecheck %s
// RUN: tinyopt %s -p fuse,plan | filecheck %s --check-prefix=SWAP
// RUN: tinyopt %s -p 'fuse,tile{mma=3xtf32 swap=off},to-cuda' -t cuda | filecheck %s --check-prefix=CUDA
// RUN: not tinyopt %s -p 'fuse,tile{mma=3xtf32 bn=256}' 2>&1 | filecheck %s --check-prefix=WIDE

// f32 GEMMs on tensor cores as three TF32 products (passes/tile/gemm/wgmma_3xtf32.py).
// By default (swap=auto) a torch-layout linear of 17 rows or more with a full 128-row block of
// weights runs with its sides swapped (wgmma_swapped.py): the weights' rows are wgmma's A.
// SWAP: loop.kernel @big_0{{.*}}plan = #tile.plan<wgmma_3xtf32, bm = 128, bn = 128,{{.*}}swap = "on">
// The small grid (16 blocks) splits K in 4 (split_k_plan.swap_splits).
// SWAP: loop.kernel @small_0_splitk{{.*}}plan = #tile.plan<wgmma_3xtf32, bm = 128, bn = 128,{{.*}}swap = "on">
// With swap=off `auto` takes a torch-layout linear of more than 64 rows whose grid has a block per SM:
// 4096x1024 in 128x128 blocks is 256 blocks on 132 SMs.
// CHECK: loop.kernel @big_0{{.*}}plan = #tile.plan<wgmma_3xtf32, bm = 128, bn = 128, stages = 3
// A grid of 8x8 = 64 blocks stays on the CUDA cores.
// CHECK: loop.kernel @small_0{{.*}}plan = #tile.plan<contraction,
// Each K step: the split of the TMA tiles into TF32 pairs, the consumers' reduced infinity
// check, 3 products per 8 of K (the first overwriting the step's registers), then the sum
// added to the f32 accumulators once the products are done.
// CUDA-LABEL: void __launch_bounds__(384, 1) big_0(
// CUDA: cvt.rna.tf32.f32
// CUDA: bar.red.or.pred
// CUDA: tinyopt_wgmma_m64n128k8_tf32_k_set(
// CUDA-NEXT: tinyopt_wgmma_m64n128k8_tf32_k(
// CUDA-NEXT: tinyopt_wgmma_m64n128k8_tf32_k(
// CUDA: wgmma.wait_group.sync.aligned 0;
// WIDE: error: tile: mma=3xtf32 takes bn up to 128 (a thread holds bn/2 accumulators and bn/2 products), got bn=256
func.func @big(%x: tensor<4096x1024xf32>, %w: tensor<1024x1024xf32>) -> tensor<4096x1024xf32> {
  %y = graph.linear %x, %w : (tensor<4096x1024xf32>, tensor<1024x1024xf32>) -> tensor<4096x1024xf32>
  func.return %y : tensor<4096x1024xf32>
}

func.func @small(%x: tensor<512x512xf32>, %w: tensor<512x512xf32>) -> tensor<512x512xf32> {
  %y = graph.linear %x, %w : (tensor<512x512xf32>, tensor<512x512xf32>) -> tensor<512x512xf32>
  func.return %y : tensor<512x512xf32>
}
