// RUN: tinyopt %s -p 'fuse,tile{bm=128 bn=128 mma=wgmma store=smem}' | filecheck %s
// RUN: not tinyopt %s -p 'fuse,tile{bm=128 mma=wgmma bn=256 stages=5 store=smem}' 2>&1 | filecheck %s --check-prefix=SMEM

// store=smem on a gated GEMM, silu(x @ wg^T) * up with `up` an input: after the K loop each
// consumer warpgroup first issues the 16-byte loads of `up` for its first 64 columns into a register
// array (the epilogue's loads that do not need the accumulators, so they fly while the tile is
// staged), then writes its f32 accumulators, 64 columns at a time, as 8-byte pairs into its own
// 64x64 tile of dynamic shared memory (its 16-byte chunks swizzled by the row), issues the next
// 64 columns' loads of `up`, meets at its named barrier 1 + group (128 threads), then reads 8
// consecutive columns per thread (two 16-byte loads) and runs the epilogue on them with `up`
// read back from the registers: one 16-byte store. The next chunk waits at the barrier again
// before it overwrites the tile.

// CHECK-LABEL: tile.kernel @gated_0 grid [3, 1, 1] block [384, 1, 1]
// CHECK:        %[[STAGE:.*]] = tile.alloc dynamic : memref<2x64x64xf32, 3 : i32>
// CHECK:        tile.setmaxnreg inc 232
// CHECK:        %[[GROUP:.*]] = arith.subi
// CHECK:        tile.wgmma_wait 0
// CHECK:        %[[BAR:.*]] = arith.addi %[[GROUP]], %{{.*}} : index
// CHECK:        %[[UP:.*]] = tile.alloc : memref<64xbf16, 5 : i32>
// CHECK:        scf.if
// CHECK-NEXT:     tile.vload %{{.*}}[%{{.*}}, %{{.*}}] : memref<100x264xbf16> -> bf16, bf16, bf16, bf16, bf16, bf16, bf16, bf16
// CHECK-NEXT:     memref.store %{{.*}}, %[[UP]][%{{.*}}] : memref<64xbf16, 5 : i32>
// CHECK-COUNT-3: tile.vload %{{.*}} : memref<100x264xbf16>
// CHECK:        arith.xori
// CHECK:        tile.vstore(%{{.*}}, %{{.*}} : f32, f32), %[[STAGE]][%[[GROUP]], %{{.*}}, %{{.*}}] : memref<2x64x64xf32, 3 : i32>
// CHECK-COUNT-15: tile.vstore({{.*}} : f32, f32), %[[STAGE]]
// CHECK-COUNT-4: tile.vload %{{.*}} : memref<100x264xbf16>
// CHECK:        tile.named_barrier %[[BAR]], 128
// CHECK:        tile.vload %[[STAGE]][%[[GROUP]], %{{.*}}, %{{.*}}] : memref<2x64x64xf32, 3 : i32> -> f32, f32, f32, f32
// CHECK:        tile.vload %[[STAGE]]
// CHECK:        scf.if
// CHECK-NOT:      tile.vload
// CHECK:          memref.load %[[UP]]
// CHECK:        tile.vstore(%{{.*}} : bf16, bf16, bf16, bf16, bf16, bf16, bf16, bf16), %{{.*}}[%{{.*}}, %{{.*}}] : memref<100x264xbf16>
// The second chunk: the barrier before its writes, then the barrier after them.
// CHECK:        tile.named_barrier %[[BAR]], 128
// CHECK-NEXT:   memref.load %{{.*}}[%{{.*}}] : memref<64xf32, 5 : i32>
// CHECK:        tile.vstore({{.*}} : f32, f32), %[[STAGE]]
// CHECK:        tile.named_barrier %[[BAR]], 128
// CHECK-NOT:    tile.named_barrier

// The shared-memory check counts the staging tiles (2 x 16 KiB) with the ring (5 x 48 KiB).
// SMEM: tile: mma=wgmma with bm=128 bn=256 stages=5 store=smem (32768 of them staging) needs 279632 bytes of shared memory, more than the 232448 a block may use

func.func @gated(%x: tensor<100x136xbf16>, %wg: tensor<264x136xbf16>, %u: tensor<100x264xbf16>) -> tensor<100x264xbf16> {
  %g = graph.linear %x, %wg : (tensor<100x136xbf16>, tensor<264x136xbf16>) -> tensor<100x264xbf16>
  %s = graph.silu %g : tensor<100x264xbf16>
  %y = graph.mul %s, %u : tensor<100x264xbf16>
  func.return %y : tensor<100x264xbf16>
}
