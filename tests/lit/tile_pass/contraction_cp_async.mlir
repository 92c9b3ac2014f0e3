// RUN: tinyopt %s -p 'fuse,tile{copy=cp_async bm=64 bn=64 tm=4 tn=4}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{copy=cp_async bm=64 bn=64 tm=4 tn=4},to-cuda' | filecheck %s --check-prefix=CUDA
// RUN: not tinyopt %s -p 'fuse,tile{copy=cp_async stages=1}' 2>&1 | filecheck %s --check-prefix=STAGES

// copy=cp_async on relu(x @ w), 256x192x64: x [M, K] is copied K-major into a ring of
// stages=3 slots [64][8 + 4 pad], w [K, N] as it lies into [8][64 + 4 pad], by 16-byte
// cp.async (no registers in between). Two K steps are in flight before the loop; each step
// waits for its own group (wait_group 1 = stages - 2), a barrier, issues step + 2 into the
// slot of step - 1 and commits. The FMA loop walks K by 4: one 16-byte read per A row
// gives 4 K values; B gives 16-byte vectors along N for each K.

// CHECK:      tile.kernel @mm_0 grid [3, 4, 1] block [256, 1, 1]
// CHECK:        %[[A:.*]] = tile.alloc : memref<3x64x12xf32, 3 : i32>
// CHECK-NEXT:   %[[B:.*]] = tile.alloc : memref<3x8x68xf32, 3 : i32>
// CHECK:        tile.cp_async %{{.*}} -> %[[A]][%{{.*}}] {width = 4 : i64}
// CHECK:        tile.cp_async %{{.*}} -> %[[B]][%{{.*}}] {width = 4 : i64}
// CHECK-NEXT:   }
// CHECK-NEXT:   tile.cp_async_commit
// CHECK:        tile.cp_async_commit
// CHECK-NEXT:   scf.for
// CHECK-NEXT:     tile.cp_async_wait 1
// CHECK-NEXT:     tile.barrier
// CHECK:            tile.cp_async %{{.*}} -> %[[A]]
// CHECK:            tile.cp_async %{{.*}} -> %[[B]]
// CHECK:          tile.cp_async_commit
// CHECK:          scf.for
// CHECK-COUNT-4:    tile.vload %[[A]]
// CHECK-NEXT:       tile.vload %[[B]]
// CHECK:          } {tile.unroll}
// CHECK-NOT:      tile.barrier
// CHECK:        tile.vstore

// CUDA:      tinyopt_cp_async_16(void* dst, const void* src, bool valid)
// CUDA:      cp.async.cg.shared.global [%0], [%1], 16, %2;
// CUDA:      mm_0(const float* __restrict__ {{.*}}, const float* __restrict__
// CUDA:      __shared__ alignas(16) float {{.*}}[3][64][12];
// CUDA:      cp.async.wait_group 1;

// STAGES: error: tile: stages must be 0 (auto) or in [2, 4] with copy=cp_async, got 1

func.func @mm(%x: tensor<256x64xf32>, %w: tensor<64x192xf32>) -> tensor<256x192xf32> {
  %m = graph.matmul %x, %w : (tensor<256x64xf32>, tensor<64x192xf32>) -> tensor<256x192xf32>
  %r = graph.relu %m : tensor<256x192xf32>
  func.return %r : tensor<256x192xf32>
}

