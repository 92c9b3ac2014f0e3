// RUN: tinyopt %s -p 'fuse,tile' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{prefetch=off}' | filecheck %s --check-prefix=OFF
// RUN: tinyopt %s -p 'fuse,tile{prefetch=on}' | filecheck %s --check-prefix=ON
// RUN: not tinyopt %s -p 'fuse,tile{prefetch=on copy=cp_async}' 2>&1 | filecheck %s --check-prefix=ENGINE
// RUN: not tinyopt %s -p 'fuse,tile{prefetch=on streamk=on}' 2>&1 | filecheck %s --check-prefix=STREAMK
// RUN: not tinyopt %s -p 'fuse,tile{prefetch=sometimes}' 2>&1 | filecheck %s --check-prefix=DOMAIN

// prefetch=auto on the batched 64 × 512³ (1024 blocks, 264 resident): the first iteration of
// the K loop's last (step 30 of 32) asks L2 for the first two K steps of the tile launched 264
// blocks later, where one exists: its batch, row and column from the launch order, one line of
// A's rows (x, %0) and four of B's rows (w, %1) per thread.
// CHECK:      tile.kernel @bmm_0 grid [4, 4, 64]
// CHECK:        tile.barrier
// CHECK:        scf.for %[[STEP:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK-NEXT:     %[[LAST:.*]] = arith.constant 30 : index
// CHECK-NEXT:     %[[IS_LAST:.*]] = arith.cmpi eq, %[[STEP]], %[[LAST]] : index
// CHECK-NEXT:     scf.if %[[IS_LAST]] {
// CHECK:            arith.constant 264 : index
// CHECK:            arith.constant 1024 : index
// CHECK:            tile.prefetch_l2 %0[%{{.*}}, %{{.*}}, %{{.*}}] : memref<64x512x512xf32>
// CHECK:            tile.prefetch_l2 %1[%{{.*}}, %{{.*}}, %{{.*}}] : memref<64x512x512xf32>
// CHECK:          tile.vload %0

// Unbatched, auto leaves it off (not measured faster there).
// CHECK:      tile.kernel @mm_0
// CHECK-NOT:    tile.prefetch_l2
// CHECK:      func.func @mm

// OFF:        tile.kernel @bmm_0
// OFF-NOT:      tile.prefetch_l2
// OFF:        func.func @bmm

// ON:         tile.kernel @mm_0
// ON:           tile.prefetch_l2 %0
// ON:           tile.prefetch_l2 %1

// ENGINE: tile: prefetch=on needs the register-staged double-buffered K loop with one block per tile (copy=ld, stages=2, no stream-K); kernel @bmm_0 has copy=cp_async, stages=3
// STREAMK: tile: prefetch=on needs the register-staged double-buffered K loop with one block per tile (copy=ld, stages=2, no stream-K); kernel @bmm_0 has copy=ld, stages=2, stream-K
// DOMAIN: tile: prefetch must be one of ('auto', 'on', 'off'), got 'sometimes'

func.func @bmm(%x: tensor<64x512x512xf32>, %w: tensor<64x512x512xf32>) -> tensor<64x512x512xf32> {
  %y = graph.matmul %x, %w : (tensor<64x512x512xf32>, tensor<64x512x512xf32>) -> tensor<64x512x512xf32>
  func.return %y : tensor<64x512x512xf32>
}

func.func @mm(%x: tensor<4096x4096xf32>, %w: tensor<4096x4096xf32>) -> tensor<4096x4096xf32> {
  %y = graph.matmul %x, %w : (tensor<4096x4096xf32>, tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  func.return %y : tensor<4096x4096xf32>
}
