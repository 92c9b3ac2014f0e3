// RUN: tinyopt %s -p 'fuse,tile' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{interleave=off}' | filecheck %s --check-prefix=OFF
// RUN: tinyopt %s -p 'fuse,tile{prefetch=off}' | filecheck %s --check-prefix=NOPREFETCH
// RUN: not tinyopt %s -p 'fuse,tile{interleave=on copy=cp_async}' 2>&1 | filecheck %s --check-prefix=REFUSED

// interleave=auto at 4096x4096x4096 (unbatched, 128x128x16 tiles dividing M, N and K): each
// K step of the double-buffered loop loads A's next slice (two 16-byte loads of the x buffer
// %0), runs the first 8 of its 16 K values, stores that slice into the other shared buffer,
// then loads B's (the w buffer %1), runs the last 8 and stores B's slice before the barrier.
// CHECK:      tile.kernel @mm_0 grid [32, 32, 1]
// CHECK:        tile.barrier
// CHECK:        scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:          tile.vload %0
// CHECK:          tile.vload %0
// CHECK-NOT:      tile.vload %1
// CHECK:          scf.for %{{.*}} = %{{.*}} to %[[HALF:.*]] step
// CHECK:          } {tile.unroll}
// CHECK-NOT:      tile.vload
// CHECK:          memref.store %{{.*}}, %[[A:.*]][%{{.*}}, %{{.*}}, %{{.*}}] : memref<2x16x132xf32, 3 : i32>
// CHECK:          tile.vload %1
// CHECK:          scf.for %{{.*}} = %[[HALF]] to
// CHECK:          } {tile.unroll}
// CHECK-NOT:      memref.store {{.*}}, %[[A]]
// CHECK:          tile.vstore({{.*}}), %{{.*}}[%{{.*}}] : memref<2x16x132xf32, 3 : i32>
// CHECK:          tile.barrier

// A batch of more than a wave of blocks prefetches the next tile (`prefetch`) and
// interleaves too: with the prefetch ptxas's register assignment keeps its FFMAs reading one
// bank twice at 21% (contraction.interleaves).
// CHECK:      tile.kernel @bmm_0
// CHECK:        tile.barrier
// CHECK:        scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:          tile.prefetch_l2
// CHECK:          tile.vload %0[
// CHECK:          tile.vload %0[
// CHECK-NOT:      tile.vload %1[
// CHECK:          } {tile.unroll}
// CHECK:          tile.vload %1[

// Without the prefetch a batch (and a stream-K kernel, or tiles that do not divide the
// shape) keeps both loads at the step's start: interleaved, ptxas's register assignment for
// those conflicted in more FFMAs.
// NOPREFETCH:      tile.kernel @bmm_0
// NOPREFETCH:        tile.barrier
// NOPREFETCH:        scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// NOPREFETCH:          tile.vload %0[
// NOPREFETCH:          tile.vload %0[
// NOPREFETCH-NOT:      scf.for
// NOPREFETCH:          tile.vload %1[
// NOPREFETCH:          tile.vload %1[
// NOPREFETCH:          scf.for

// OFF:        tile.kernel @mm_0 grid [32, 32, 1]
// OFF:          tile.barrier
// OFF:          scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} {
// OFF:            tile.vload %0
// OFF:            tile.vload %0
// OFF:            tile.vload %1
// OFF:            tile.vload %1
// OFF:            scf.for

// REFUSED: tile: interleave=on applies to the register-staged double-buffered K loop (copy=ld, stages=2; here copy=cp_async, stages=3)

func.func @mm(%x: tensor<4096x4096xf32>, %w: tensor<4096x4096xf32>) -> tensor<4096x4096xf32> {
  %y = graph.matmul %x, %w : (tensor<4096x4096xf32>, tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  func.return %y : tensor<4096x4096xf32>
}

func.func @bmm(%x: tensor<64x512x512xf32>, %w: tensor<64x512x512xf32>) -> tensor<64x512x512xf32> {
  %y = graph.matmul %x, %w : (tensor<64x512x512xf32>, tensor<64x512x512xf32>) -> tensor<64x512x512xf32>
  func.return %y : tensor<64x512x512xf32>
}
