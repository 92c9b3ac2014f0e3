// RUN: tinyopt %s -p 'fuse,tile{copy=tma ws=0 bm=64 bn=64 tm=4 tn=4}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{copy=tma bm=64 bn=64 tm=4 tn=4}' | filecheck %s --check-prefix=WS
// RUN: tinyopt %s -p 'fuse,tile{copy=tma bm=64 bn=64 tm=4 tn=4},to-cuda' | filecheck %s --check-prefix=CUDA
// RUN: not tinyopt %s -p 'fuse,tile{copy=tma stages=1}' 2>&1 | filecheck %s --check-prefix=STAGES

// copy=tma on relu(x @ w), 256x192x64: x [M, K] and w [K, N] are tensor maps (no swizzle)
// whose boxes, [64, 8] and [8, 64], TMA copies into dense rings of stages=3 slots in dynamic
// shared memory, x K-major. One mbarrier per slot completes when its 4096 bytes landed.

// ws=0: thread 0 arms and fills the first two slots; each K step opens with a barrier (every
// thread finished the step before, whose slot is refilled), thread 0 issues step + 2, and
// every thread waits on its slot's mbarrier before the FMA loop.
// CHECK:      tile.kernel @mm_0 grid [3, 4, 1] block [256, 1, 1]
// CHECK-SAME:   tile.tensor_maps = [{arg = 0 : i64, box = array<i64: 64, 8>, swizzle = 0 : i64}, {arg = 1 : i64, box = array<i64: 8, 64>, swizzle = 0 : i64}]
// CHECK:        %[[A:.*]] = tile.alloc dynamic : memref<3x64x8xf32, 3 : i32>
// CHECK-NEXT:   %[[B:.*]] = tile.alloc dynamic : memref<3x8x64xf32, 3 : i32>
// CHECK:        %[[FULL:.*]] = tile.alloc : memref<3xi64, 3 : i32>
// CHECK-COUNT-3: tile.mbarrier_init %[[FULL]][%{{.*}}] count 1
// CHECK:        tile.fence_proxy_async
// CHECK:        tile.barrier
// CHECK:        tile.mbarrier_arrive_expect_tx %[[FULL]][%{{.*}}] bytes 4096
// CHECK-NEXT:   tile.tma_load %0[%{{.*}}, %{{.*}}] -> %[[A]]
// CHECK-NEXT:   tile.tma_load %1[%{{.*}}, %{{.*}}] -> %[[B]]
// CHECK:        scf.for
// CHECK-NEXT:     tile.barrier
// CHECK:          tile.mbarrier_arrive_expect_tx
// CHECK:          tile.mbarrier_wait %[[FULL]]
// CHECK:          scf.for
// CHECK-COUNT-4:    tile.vload %[[A]]
// CHECK-NEXT:       tile.vload %[[B]]
// CHECK:          } {tile.unroll}
// CHECK-NOT:      tile.barrier
// CHECK:        tile.vstore

// ws=1: a producer warp (threads 256..287) of which one thread waits for each slot to be
// empty and fills it; the 256 consumer threads wait for a slot to be full, then release the
// slot of the step before (from step 1 on: the FMAs that read it are behind them), then read
// it. No block barrier in the loop.
// WS:      tile.kernel @mm_0 grid [3, 4, 1] block [288, 1, 1]
// WS:        %[[FULL:.*]] = tile.alloc : memref<3xi64, 3 : i32>
// WS-NEXT:   %[[EMPTY:.*]] = tile.alloc : memref<3xi64, 3 : i32>
// WS:        tile.mbarrier_init %[[EMPTY]][%{{.*}}] count 256
// WS:        tile.barrier
// WS:        %[[PRODUCER:.*]] = arith.cmpi sge, %{{.*}}, %{{.*}} : index
// WS-NEXT:   scf.if %[[PRODUCER]] {
// WS:            scf.for
// WS:              tile.mbarrier_wait %[[EMPTY]]
// WS-NEXT:         tile.mbarrier_arrive_expect_tx %[[FULL]]
// WS:              tile.tma_load
// WS-NEXT:         tile.tma_load
// WS:        } else {
// WS:          scf.for
// WS:            tile.mbarrier_wait %[[FULL]]
// WS-NEXT:       %[[LATER:.*]] = arith.cmpi ult, %{{.*}}, %[[STEP:.*]] : index
// WS-NEXT:       scf.if %[[LATER]] {
// WS-NEXT:         %[[AHEAD:.*]] = arith.addi %[[STEP]], %{{.*}} : index
// WS-NEXT:         %[[PREVIOUS:.*]] = arith.remui %[[AHEAD]], %{{.*}} : index
// WS-NEXT:         tile.mbarrier_arrive %[[EMPTY]][%[[PREVIOUS]]]
// WS-NEXT:       }
// WS-NOT:        tile.barrier
// WS:            tile.vload
// WS-NOT:        tile.mbarrier_arrive
// WS:          tile.vstore

// CUDA:      // kernel @mm_0 grid (3, 4, 1) block (288, 1, 1) smem 13312
// CUDA:      cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CUDA:      __launch_bounds__(288, 1) mm_0(const __grid_constant__ CUtensorMap {{.*}}, const __grid_constant__ CUtensorMap {{.*}}, float* __restrict__

// STAGES: error: tile: stages must be 0 (auto) or in [2, 6] with copy=tma, got 1

func.func @mm(%x: tensor<256x64xf32>, %w: tensor<64x192xf32>) -> tensor<256x192xf32> {
  %m = graph.matmul %x, %w : (tensor<256x64xf32>, tensor<64x192xf32>) -> tensor<256x192xf32>
  %r = graph.relu %m : tensor<256x192xf32>
  func.return %r : tensor<256x192xf32>
}
