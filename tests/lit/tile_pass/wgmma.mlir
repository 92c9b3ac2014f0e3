// RUN: tinyopt %s -p 'fuse,tile{bm=128 bn=128 mma=wgmma stages=4}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{bm=128 bn=128 mma=wgmma ws=0 stages=2}' | filecheck %s --check-prefix=WS0
// RUN: not tinyopt %s -p 'fuse,tile{bm=128 mma=wgmma bk=32}' 2>&1 | filecheck %s --check-prefix=BK
// RUN: not tinyopt %s -p 'fuse,tile{bm=128 mma=wgmma bn=256 stages=6}' 2>&1 | filecheck %s --check-prefix=SMEM
// RUN: not tinyopt %s -p 'fuse,tile{bm=128 mma=wgmma stages=17}' 2>&1 | filecheck %s --check-prefix=STAGES

// relu(x @ w) in bf16 on Hopper with the block tile set to 128x128 (two
// consumer warpgroups of 64x128) after a producer warpgroup (384 threads). x and w are kernel
// arguments passed as tensor maps with 128-byte swizzle: x's box is 128 rows x 64 of K, w
// ([K, N], N-major for wgmma) is copied as two 64x64 boxes per K step of 64. Each of the
// 4 ring slots has a `full` mbarrier (1 arrival + the TMA bytes) and an `empty` one (the 256
// consumer threads).

// CHECK:      tile.kernel @mm_0 grid [4, 2, 1] block [384, 1, 1]
// CHECK-SAME: attributes {plan = #tile.plan<{{[^>]*}}>, tile.min_blocks = 1 : i64, tile.tensor_maps = [{arg = 0 : i64, box = array<i64: 128, 64>, swizzle = 128 : i64}, {arg = 1 : i64, box = array<i64: 64, 64>, swizzle = 128 : i64}]}
// CHECK:        %[[A:.*]] = tile.alloc dynamic : memref<4x128x64xbf16, 3 : i32>
// CHECK-NEXT:   %[[B:.*]] = tile.alloc dynamic : memref<4x2x64x64xbf16, 3 : i32>
// CHECK-NEXT:   %[[FULL:.*]] = tile.alloc : memref<4xi64, 3 : i32>
// CHECK-NEXT:   %[[EMPTY:.*]] = tile.alloc : memref<4xi64, 3 : i32>
// CHECK:        tile.mbarrier_init %[[FULL]][%{{.*}}] count 1
// CHECK-NEXT:   tile.mbarrier_init %[[EMPTY]][%{{.*}}] count 256
// CHECK:        tile.fence_proxy_async
// CHECK:        tile.barrier
// CHECK:        tile.setmaxnreg 40
// CHECK:        tile.mbarrier_wait %[[EMPTY]]
// CHECK-NEXT:   tile.mbarrier_arrive_expect_tx %[[FULL]][%{{.*}}] bytes 32768
// CHECK:        tile.tma_load %{{.*}} -> %[[A]][%{{.*}}, %{{.*}}, %{{.*}}], %[[FULL]]
// CHECK-COUNT-2: tile.tma_load %{{.*}} -> %[[B]]
// CHECK:        tile.setmaxnreg inc 232
// CHECK:        %[[ACC:.*]] = tile.alloc : memref<64xf32, 5 : i32>
// CHECK:        tile.mbarrier_wait %[[FULL]]
// CHECK-NEXT:   tile.wgmma_fence
// CHECK-NEXT:   tile.wgmma %[[ACC]], %[[A]][{{.*}}], %[[B]][{{.*}}] mn_major {n = 128 : i64, a_sbo = 1024 : i64, b_lbo = 8192 : i64, b_sbo = 1024 : i64}
// CHECK-COUNT-3: tile.wgmma
// CHECK-NEXT:   tile.wgmma_commit
// CHECK-NEXT:   tile.wgmma_wait 1
// CHECK:        tile.mbarrier_arrive %[[EMPTY]]
// CHECK:        tile.wgmma_wait 0
// CHECK:        tile.vstore

// Without warp specialization the two consumer warpgroups are the block; thread 0 issues the
// first stage ahead, then one more behind each released slot.
// WS0:        tile.kernel @mm_0 grid [4, 2, 1] block [256, 1, 1]
// WS0-NOT:    tile.setmaxnreg
// WS0:        tile.tma_load
// WS0:        tile.wgmma_wait 1
// WS0:        tile.mbarrier_arrive
// WS0:        tile.tma_load

// BK: tile: mma=wgmma stages K in steps of 64 (one 128-byte swizzle row), got bk=32
// SMEM: tile: mma=wgmma with bm=128 bn=256 stages=6 needs 296032 bytes of shared memory, more than the 232448 a block may use
// STAGES: tile: stages must be 0 (auto) or in [2, 16] with mma=wgmma, got 17

func.func @mm(%x: tensor<256x128xbf16>, %w: tensor<128x512xbf16>) -> tensor<256x512xbf16> {
  %m = graph.matmul %x, %w : (tensor<256x128xbf16>, tensor<128x512xbf16>) -> tensor<256x512xbf16>
  %r = graph.relu %m : tensor<256x512xbf16>
  func.return %r : tensor<256x512xbf16>
}
