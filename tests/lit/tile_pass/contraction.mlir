// RUN: tinyopt %s -p 'fuse,tile{bm=64 bn=64 bk=8 tm=4 tn=4}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{bm=64 bn=64 bk=8 tm=4 tn=4 stages=1}' | filecheck %s --check-prefix=STAGE

// relu(matmul(x + bias, w)), 256x64 @ 64x192, with the block tile and K step pinned by the knobs to
// 64x64 and a 4x4 register tile per thread: (64/4)*(64/4) = 256 threads, grid
// [192/64, 256/64, 1] = [3, 4, 1]. Each K step of 8 stages x + bias (the prologue add runs as
// the A side is loaded, vectorized along K) and w (vectorized along N) into two padded shared
// tiles [8][64+4]; the block then accumulates from them into registers after a barrier, and
// the relu epilogue runs on the registers and stores 4-wide vectors.

// CHECK:      tile.kernel @mm_0 grid [3, 4, 1] block [256, 1, 1] (%[[X:.*]]: memref<256x64xf32>, %[[BIAS:.*]]: memref<64xf32>, %[[W:.*]]: memref<64x192xf32>, %[[OUT:.*]]: memref<256x192xf32>)
// CHECK-DAG:    %[[AS:.*]] = tile.alloc : memref<{{([0-9]+x)?}}8x68xf32, 3 : i32>
// CHECK-DAG:    %[[BS:.*]] = tile.alloc : memref<{{([0-9]+x)?}}8x68xf32, 3 : i32>
// CHECK-DAG:    %[[ACC:.*]] = tile.alloc : memref<4x4xf32, 5 : i32>

// The A side: x and bias loaded as vectors, added lane by lane, zeros out of range.
// CHECK:        scf.if %{{.*}} -> (f32, f32, f32, f32) {
// CHECK-NEXT:     %[[X0:.*]], %[[X1:.*]], %[[X2:.*]], %[[X3:.*]] = tile.vload %[[X]][%{{.*}}, %{{.*}}] : memref<256x64xf32> -> f32, f32, f32, f32
// CHECK-NEXT:     %[[B0:.*]], %[[B1:.*]], %[[B2:.*]], %[[B3:.*]] = tile.vload %[[BIAS]][%{{.*}}] : memref<64xf32> -> f32, f32, f32, f32
// CHECK-NEXT:     %[[A0:.*]] = arith.addf %[[X0]], %[[B0]] : f32
// CHECK-NEXT:     %[[A1:.*]] = arith.addf %[[X1]], %[[B1]] : f32
// CHECK-NEXT:     %[[A2:.*]] = arith.addf %[[X2]], %[[B2]] : f32
// CHECK-NEXT:     %[[A3:.*]] = arith.addf %[[X3]], %[[B3]] : f32
// CHECK-NEXT:     scf.yield %[[A0]], %[[A1]], %[[A2]], %[[A3]] : f32, f32, f32, f32
// CHECK-NEXT:   } else {
// CHECK-NEXT:     scf.yield %[[Z:.*]], %[[Z]], %[[Z]], %[[Z]] : f32, f32, f32, f32
// CHECK-NEXT:   }

// The B side: w is contiguous along N, so it is copied with vector loads and a vector store.
// CHECK:          tile.vload %[[W]][%{{.*}}, %{{.*}}] : memref<64x192xf32> -> f32, f32, f32, f32
// CHECK:          tile.vstore(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : f32, f32, f32, f32), %[[BS]][{{.*}}] : memref<{{([0-9]+x)?}}8x68xf32, 3 : i32>
// CHECK:          tile.barrier

// Accumulate: fragments of both shared tiles, then multiply-adds into the register tile.
// CHECK:          tile.vload %[[AS]][{{.*}}] : memref<{{([0-9]+x)?}}8x68xf32, 3 : i32> -> f32, f32, f32, f32
// CHECK:          tile.vload %[[BS]][{{.*}}] : memref<{{([0-9]+x)?}}8x68xf32, 3 : i32> -> f32, f32, f32, f32
// CHECK-NEXT:     %[[OLD:.*]] = memref.load %[[ACC]][%{{.*}}, %{{.*}}] : memref<4x4xf32, 5 : i32>
// CHECK-NEXT:     %[[P:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:     %[[NEW:.*]] = arith.addf %[[OLD]], %[[P]] : f32
// CHECK-NEXT:     memref.store %[[NEW]], %[[ACC]][%{{.*}}, %{{.*}}] : memref<4x4xf32, 5 : i32>
// CHECK:          tile.barrier

// The epilogue: each register row is bounds-checked, relu'd and stored as one vector.
// CHECK-COUNT-4:  arith.maximumf %{{.*}}, %[[Z]] : f32
// CHECK-NEXT:     tile.vstore(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : f32, f32, f32, f32), %[[OUT]][%{{.*}}, %{{.*}}] : memref<256x192xf32>
// CHECK-COUNT-3:  tile.vstore(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : f32, f32, f32, f32), %[[OUT]][%{{.*}}, %{{.*}}] : memref<256x192xf32>
// CHECK-NOT:      tile.vstore
// CHECK:      func.func @mm

// With one shared-memory stage the whole staging, prologue add included, sits inside the K
// loop, between the loop head and the first barrier.
// STAGE:        tile.alloc : memref<4x4xf32, 5 : i32>
// STAGE:        } {tile.unroll}
// STAGE-NEXT:   } {tile.unroll}
// STAGE-NOT:    tile.vload
// STAGE:        scf.for
// STAGE-NOT:    tile.barrier
// STAGE:        tile.vload %{{.*}} : memref<256x64xf32> -> f32, f32, f32, f32
// STAGE-NEXT:   tile.vload %{{.*}} : memref<64xf32> -> f32, f32, f32, f32
// STAGE-NEXT:   arith.addf
// STAGE-NOT:    tile.barrier
// STAGE:        tile.vload %{{.*}} : memref<64x192xf32> -> f32, f32, f32, f32
// STAGE:        tile.barrier
// STAGE:        tile.barrier
// STAGE-NEXT: }
// STAGE-NOT:    tile.barrier
// STAGE:        arith.maximumf

func.func @mm(%x: tensor<256x64xf32>, %bias: tensor<64xf32>, %w: tensor<64x192xf32>) -> tensor<256x192xf32> {
  %bb = graph.broadcast %bias : tensor<64xf32> -> tensor<256x64xf32>
  %xb = graph.add %x, %bb : tensor<256x64xf32>
  %m = graph.matmul %xb, %w : (tensor<256x64xf32>, tensor<64x192xf32>) -> tensor<256x192xf32>
  %r = graph.relu %m : tensor<256x192xf32>
  func.return %r : tensor<256x192xf32>
}
