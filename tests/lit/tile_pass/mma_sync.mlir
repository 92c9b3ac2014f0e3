// RUN: tinyopt %s -p 'fuse,tile{mma=sync}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{mma=sync stages=1}' | filecheck %s --check-prefix=ONE
// RUN: tinyopt %s -p 'fuse,plan{mma=sync}' | sed 's/stages = 2,/stages = 9,/' | not tinyopt -p tile 2>&1 | filecheck %s --check-prefix=PLAN9
// RUN: tinyopt %s -p 'fuse,tile{mma=sync stages=4}' | filecheck %s --check-prefix=RING
// RUN: not tinyopt %s -p 'fuse,tile{mma=sync bk=8}' 2>&1 | filecheck %s --check-prefix=BK
// RUN: not tinyopt %s -p 'fuse,tile{mma=sync bm=256 bn=256 bk=64}' 2>&1 | filecheck %s --check-prefix=SMEM
// RUN: tinyopt %s -p 'fuse,tile{mma=sync store=smem}' | filecheck %s --check-prefix=STAGED

// relu(x @ w) in bf16 on tensor cores. 64x48 is a small grid, so the block tile is 64x64x32:
// 4 warps of 32x32, each 2x4 m16n8 fragments (registers 2x4x4 f32). x is contiguous along K:
// staged [64][32 + 8 pad] with 8-wide vectors and read by plain ldmatrix; w is contiguous
// along N: staged [32][64 + 8 pad] and read by ldmatrix.trans. The K loop is double-buffered
// through registers (stages=2): each thread holds 2 vectors of 8 of each side; the first
// step's are loaded before the loop, and each step stores them to shared memory, then loads
// the next step's before its mma steps. One K step of 32 is two mma steps of 16; each loads 2
// A and 2 B fragments and issues 2x4 mma.

// CHECK:      tile.kernel @mm_0 grid [1, 1, 1] block [128, 1, 1] (%[[X:.*]]: memref<64x32xbf16>, %[[W:.*]]: memref<32x48xbf16>, %[[OUT:.*]]: memref<64x48xbf16>) attributes {plan = #tile.plan<{{.*}}stages = 2, store = "direct">} {
// CHECK:        %[[AS:.*]] = tile.alloc : memref<64x40xbf16, 3 : i32>
// CHECK-NEXT:   %[[BS:.*]] = tile.alloc : memref<32x72xbf16, 3 : i32>
// CHECK:        %[[ACC:.*]] = tile.alloc : memref<2x4x4xf32, 5 : i32>
// CHECK:        %[[AR:.*]] = tile.alloc : memref<2x8xbf16, 5 : i32>
// CHECK-NEXT:   %[[BR:.*]] = tile.alloc : memref<2x8xbf16, 5 : i32>
// CHECK:        tile.vload %[[X]][%{{.*}}, %{{.*}}] : memref<64x32xbf16> -> bf16, bf16, bf16, bf16, bf16, bf16, bf16, bf16
// CHECK:        arith.constant 0.000000e+00 : bf16
// CHECK:        memref.store %{{.*}}, %[[AR]]
// CHECK:        } {tile.unroll}
// CHECK:        tile.vload %[[W]]
// CHECK:        memref.store %{{.*}}, %[[BR]]
// CHECK:        } {tile.unroll}
// CHECK-NEXT:   scf.for
// CHECK:        memref.load %[[AR]]
// CHECK:        tile.vstore(%{{.*}} : bf16, bf16, bf16, bf16, bf16, bf16, bf16, bf16), %[[AS]]
// CHECK:        memref.load %[[BR]]
// CHECK:        tile.vstore(%{{.*}}), %[[BS]]
// CHECK:        tile.barrier
// CHECK:        tile.vload %[[X]]
// CHECK:        memref.store %{{.*}}, %[[AR]]
// CHECK:        tile.vload %[[W]]
// CHECK:        memref.store %{{.*}}, %[[BR]]
// CHECK:        } {tile.unroll}
// CHECK-NEXT:   scf.for
// CHECK-COUNT-2: tile.ldmatrix %[[AS]][%{{.*}}, %{{.*}}] : memref<64x40xbf16, 3 : i32> -> i32, i32, i32, i32
// CHECK-COUNT-2: tile.ldmatrix %[[BS]][%{{.*}}, %{{.*}}] trans : memref<32x72xbf16, 3 : i32> -> i32, i32, i32, i32
// CHECK:        %[[C0:.*]] = memref.load %[[ACC]]
// CHECK:        %[[D0:.*]], %{{.*}}, %{{.*}}, %{{.*}} = tile.mma_sync a[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] b[%{{.*}}, %{{.*}}] c[%[[C0]], %{{.*}}, %{{.*}}, %{{.*}}] : bf16 -> f32, f32, f32, f32
// CHECK-NEXT:   memref.store %[[D0]], %[[ACC]]
// CHECK-COUNT-7: tile.mma_sync
// CHECK-NOT:    tile.mma_sync
// CHECK:        } {tile.unroll}
// CHECK-NEXT:   tile.barrier
// The epilogue stores column pairs 2*(lane%4), +1 of rows lane/4 and lane/4+8.
// CHECK:        arith.maximumf
// CHECK:        tile.vstore(%{{.*}}, %{{.*}} : bf16, bf16), %[[OUT]]

// stages=1: each step loads its tiles and stores them to shared memory before its mma steps.
// ONE:        attributes {plan = #tile.plan<{{.*}}stages = 1, store = "direct">}
// ONE:        %[[AR:.*]] = tile.alloc : memref<2x8xbf16, 5 : i32>
// ONE-NOT:    tile.vload
// ONE:        scf.for
// ONE:        tile.vload
// ONE:        memref.store %{{.*}}, %[[AR]]
// ONE:        tile.vstore
// ONE:        tile.barrier
// ONE-NOT:    tile.vload
// ONE:        tile.mma_sync

// An f32 contraction with mma=sync is an error: contraction_mma_f32.mlir.

// A plan edited to a ninth stage is refused (a ring of at most 7 steps ahead), not emitted.
// PLAN9: mma=sync takes stages 1 to 8, got 9

// stages=4: the next 3 K steps in a ring of registers, filled before the K loop (3 slots of
// each side's 2 × 8 elements), whose iteration runs a group of 3 steps (96 of K).
// RING:      plan = #tile.plan<mma_sync, {{.*}}stages = 4, store = "direct">
// RING-COUNT-6: tile.alloc : memref<2x8xbf16, 5 : i32>
// RING:      %[[GROUP:.*]] = arith.constant 96 : index
// RING-NEXT: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[GROUP]] {

// BK: tile: mma=sync needs bk to be a multiple of 16 (the mma K step), got bk=8
// SMEM: tile: mma=sync with bm=256 bn=256 bk=64 needs 73728 bytes of shared memory, more than the 49152 a block may declare statically

func.func @mm(%x: tensor<64x32xbf16>, %w: tensor<32x48xbf16>) -> tensor<64x48xbf16> {
  %m = graph.matmul %x, %w : (tensor<64x32xbf16>, tensor<32x48xbf16>) -> tensor<64x48xbf16>
  %r = graph.relu %m : tensor<64x48xbf16>
  func.return %r : tensor<64x48xbf16>
}

// store=smem: each warp passes its 32x32 tile through a 16 x 33 f32 tile of its own, 16 rows
// at a time (written from the fragments, a __syncwarp, read back a row's 32 columns over the
// lanes, stored, a __syncwarp before the next 16 rows overwrite it).
// STAGED:      plan = #tile.plan<mma_sync, {{.*}}store = "smem">
// STAGED:      tile.alloc : memref<4x16x33xf32, 3 : i32>
// STAGED:      tile.warp_barrier
// STAGED:      tile.warp_barrier
// STAGED:      tile.warp_barrier
