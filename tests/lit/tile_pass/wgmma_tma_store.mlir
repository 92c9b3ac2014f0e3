// RUN: tinyopt %s -p 'fuse,tile{store=tma}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{store=tma},to-cuda' | filecheck %s --check-prefix=CUDA
// RUN: not tinyopt %s -p 'fuse,tile{mma=wgmma store=tma bn=208}' 2>&1 | filecheck %s --check-prefix=RAGGED

// The TMA-store epilogue (`store=tma`, passes/tile/gemm/wgmma_tma_store.py): the output is a
// tensor map (boxes of 64 rows and 64 columns, 128-byte swizzle), each consumer warpgroup
// writes its 64 rows of 16-bit results to its own shared tile, and one thread copies each
// 64-column box with a TMA store, after waiting until the last stores have read the tile.

// CHECK:      tile.kernel @linear_0
// CHECK-SAME: store = "tma"
// CHECK-SAME: {arg = 3 : i64, box = array<i64: 64, 64>, swizzle = 128 : i64}
// CHECK:      %[[TILE:.*]] = tile.alloc dynamic : memref<3x3x64x64xbf16, 3 : i32>
// CHECK:      tile.bulk_wait read
// CHECK:      tile.fence_proxy_async
// CHECK:      tile.tma_store %[[TILE]][{{.*}}] -> %3[{{.*}}] : memref<3x3x64x64xbf16, 3 : i32> -> memref<1000x4104xbf16>
// CHECK:      tile.bulk_commit
// CHECK:      tile.bulk_wait
// CHECK-NOT:  read
// CUDA:       void tinyopt_tma_store_2d(const CUtensorMap* map, const void* src, int c0, int c1)
// CUDA:       cp.async.bulk.tensor.2d.global.shared::cta.bulk_group
// CUDA:       const __grid_constant__ CUtensorMap v3
// CUDA:       cp.async.bulk.wait_group.read 0;
// CUDA:       tinyopt_tma_store_2d(&v3,
// CUDA:       cp.async.bulk.commit_group;
// CUDA:       cp.async.bulk.wait_group 0;
// RAGGED:     tinyopt: error: tile: mma=wgmma store=tma stores whole boxes of 64 columns, from no cluster split: got bn=208 cluster=1
func.func @linear(%x: tensor<1000x4096xbf16>, %w: tensor<4104x4096xbf16>, %b: tensor<4104xbf16>) -> tensor<1000x4104xbf16> {
  %y = graph.linear %x, %w, %b : (tensor<1000x4096xbf16>, tensor<4104x4096xbf16>, tensor<4104xbf16>) -> tensor<1000x4104xbf16>
  func.return %y : tensor<1000x4104xbf16>
}
