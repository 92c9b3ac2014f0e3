// RUN: tinyopt %s -p 'fuse,plan{splitk_mode=cluster}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{splitk_mode=cluster}' | filecheck %s --check-prefix=TILE
// RUN: tinyopt %s -p 'fuse,tile{splitk_mode=cluster},to-cuda' -t cuda | filecheck %s --check-prefix=CUDA
// RUN: tinyopt %s -p 'fuse,plan' | filecheck %s --check-prefix=DEFAULT
// RUN: tinyopt %s -p 'fuse,plan{splitk_mode=twopass}' | filecheck %s --check-prefix=TWOPASS
// RUN: tinyopt %s -p 'fuse,plan{splitk=2 splitk_mode=cluster}' | filecheck %s --check-prefix=TWO
// RUN: not tinyopt %s -p 'fuse,plan{splitk=16 splitk_mode=cluster}' 2>&1 | filecheck %s --check-prefix=SIXTEEN
// RUN: not tinyopt %s -p 'fuse,plan{mma=none splitk=4 splitk_mode=cluster}' 2>&1 | filecheck %s --check-prefix=CORES

// A 64-row bf16 linear on 16 blocks of 64x64 (k/v of a Llama-3-8B decode step at batch 64):
// splitk=0 cuts K = 4096 in 8 chunks of 512 (split_k_plan.auto_wgmma_splits). With
// splitk_mode=cluster (opt-in) the 8 chunks run in one kernel
// (passes/tile/gemm/wgmma_cluster.py): each tile's 8 blocks are a cluster
// (grid z = 8, cluster [1, 1, 8]), block z walks chunk z % 8 of K, stages its f32 tile in its
// own shared memory and, after the cluster's barrier, sums its eighth of the tile (64 of the
// 512 groups of 8 columns) from the 8 blocks' shared memory in rank order, then stores it
// through the epilogue. No workspace, no fold kernel. A wave of one block an SM holds 15
// clusters of 8 (Target.cluster_slots), not 16, so the ring is not deepened past its 6 slots
// (wgmma_plan.deepened): no block has an SM of its own.
// CHECK:      loop.kernel @kv_0({{.*}}plan = #tile.plan<wgmma, bm = 64, bn = 64, stages = 6,{{.*}}store = "smem", persistent = 0,{{.*}}cluster = 8, multicast = "off", l2promo = 0, poverlap = "off", pturns = "off", pscales = "step", swap = "off">
// CHECK-NOT:  loop.kernel @kv_0_reduce
// TILE:       tile.kernel @kv_0 grid [16, 1, 8] block [256, 1, 1] cluster [1, 1, 8]
// TILE:       tile.cluster_sync
// TILE:       tile.cluster_sync
// TILE:       tile.cluster_vload %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] of %{{.*}}
// TILE:       tile.cluster_sync
// CUDA:       barrier.cluster.arrive.release
// CUDA:       mapa.shared::cluster.u32
// CUDA:       ld.shared::cluster.v4.f32
// CUDA:       __global__ void __cluster_dims__(1, 1, 8) __launch_bounds__(256, 1) kv_0(
// CUDA-COUNT-16: tinyopt_cluster_load_f32x4(
// CUDA-NOT:   tinyopt_cluster_load_f32x4(
// CUDA:       tinyopt_vec<__nv_bfloat16, 8>
// By default (splitk_mode=auto) the split runs over clusters where they fit one wave and the
// estimate says so (split_k_plan.cluster_split_estimate): here 16 clusters of 4 (30 fit), not
// two passes of 8 chunks; splitk_mode=twopass folds in a second kernel.
// DEFAULT:     loop.kernel @kv_0({{.*}}plan = #tile.plan<wgmma, {{.*}}cluster = 4, multicast = "off", l2promo = 0, poverlap = "off", pturns = "off", pscales = "step", swap = "off">
// DEFAULT-NOT: @kv_0_reduce
// TWOPASS:     loop.kernel @kv_0_splitk({{.*}}plan = #tile.plan<wgmma, {{.*}}cluster = 1, multicast = "off", l2promo = 0, poverlap = "off", pturns = "off", pscales = "step", swap = "off">
// TWOPASS:     loop.kernel @kv_0_reduce
// An explicit split of 2: clusters of 2 blocks, each chunk 32 K steps.
// TWO:        loop.kernel @kv_0({{.*}}plan = #tile.plan<wgmma, {{.*}}cluster = 2, multicast = "off", l2promo = 0, poverlap = "off", pturns = "off", pscales = "step", swap = "off">
// SIXTEEN:    is not planned so: mma=wgmma splits K over clusters of 2, 4 or 8 blocks (splitk_mode=cluster), got splitk=16
// CORES:      error: tile: splitk_mode=cluster splits K over a cluster of blocks of the wgmma GEMM (f16/bf16, mma=auto or wgmma), and kernel @kv_0 is not planned so:
func.func @kv(%x: tensor<64x4096xbf16>, %w: tensor<1024x4096xbf16>) -> tensor<64x1024xbf16> {
  %y = graph.linear %x, %w : (tensor<64x4096xbf16>, tensor<1024x4096xbf16>) -> tensor<64x1024xbf16>
  func.return %y : tensor<64x1024xbf16>
}
