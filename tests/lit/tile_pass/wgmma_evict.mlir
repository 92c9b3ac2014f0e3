// RUN: tinyopt %s -p fuse,tile | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{evict=off}' | filecheck %s --check-prefix=OFF
// RUN: tinyopt %s -p 'fuse,tile{evict=ab}' | filecheck %s --check-prefix=BOTH
// RUN: tinyopt %s -p fuse,tile,to-cuda | filecheck %s --check-prefix=CUDA
// RUN: not tinyopt %s -p 'fuse,tile{evict=on}' 2>&1 | filecheck %s --check-prefix=BAD

// The wgmma rule's L2 evict-first hint (`evict`, wgmma_plan.py `evicted_operands`): `auto`
// hints the TMA loads of each operand whose tiles are read by blocks that run together and
// never again. B, where one group of block rows (group = 16) covers M: every B tile is read
// by the consecutive blocks of its column. A, where one column of blocks covers N.

// 64 rows: one row of blocks, each B tile read by one block: B hinted, A (read by every
// column) not.
// CHECK:      tile.kernel @decode64_0
// CHECK-SAME: evict = "b"
// CHECK:      tile.tma_load %0[{{.*}}] -> {{.*}} : memref<64x4096xbf16>
// CHECK:      tile.tma_load %1[{{.*}}] -> {{.*}} evict_first : memref<4096x4096xbf16>
// OFF:        tile.kernel @decode64_0
// OFF-SAME:   evict = "off"
// OFF-NOT:    evict_first
// OFF:        tile.kernel @rows1000_0
// BOTH:       tile.kernel @decode64_0
// BOTH-SAME:  evict = "ab"
// BOTH:       tile.tma_load %0[{{.*}}] -> {{.*}} evict_first : memref<64x4096xbf16>
// BOTH:       tile.tma_load %1[{{.*}}] -> {{.*}} evict_first : memref<4096x4096xbf16>
// CUDA:       createpolicy.fractional.L2::evict_first.b64
// CUDA:       mbarrier::complete_tx::bytes.L2::cache_hint
// CUDA:       extern "C" __global__ {{.*}} decode64_0(
// CUDA:       tinyopt_tma_load_2d(
// CUDA:       tinyopt_tma_load_2d_evict_first(
// BAD:        tile: evict must be one of ('auto', 'off', 'once', 'a', 'b', 'ab'), got 'on'
func.func @decode64(%x: tensor<64x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<64x4096xbf16> {
  %y = graph.linear %x, %w : (tensor<64x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<64x4096xbf16>
  func.return %y : tensor<64x4096xbf16>
}

// 1000 rows in 16 blocks of 64 rows: one group, B still hinted.
// CHECK:      tile.kernel @rows1000_0
// CHECK-SAME: bm = 64, {{.*}} group = 16, {{.*}} evict = "b"
func.func @rows1000(%x: tensor<1000x4096xbf16>, %w: tensor<1024x4096xbf16>) -> tensor<1000x1024xbf16> {
  %y = graph.linear %x, %w : (tensor<1000x4096xbf16>, tensor<1024x4096xbf16>) -> tensor<1000x1024xbf16>
  func.return %y : tensor<1000x1024xbf16>
}

// 4096 rows in 32 blocks of 128: the later groups read each B tile again, and every column
// reads each A tile: no hint.
// CHECK:      tile.kernel @square_0
// CHECK-SAME: evict = "off"
// CHECK-NOT:  evict_first
// CHECK:      tile.kernel @column_0
func.func @square(%x: tensor<4096x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<4096x4096xbf16> {
  %y = graph.linear %x, %w : (tensor<4096x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<4096x4096xbf16>
  func.return %y : tensor<4096x4096xbf16>
}

// 64 columns, one column of blocks: each A tile read by one block, A hinted.
// CHECK-SAME: evict = "a"
// CHECK:      tile.tma_load %0[{{.*}}] -> {{.*}} evict_first : memref<8192x4096xbf16>
// CHECK:      tile.tma_load %1[{{.*}}] -> {{.*}} : memref<64x4096xbf16>
func.func @column(%x: tensor<8192x4096xbf16>, %w: tensor<64x4096xbf16>) -> tensor<8192x64xbf16> {
  %y = graph.linear %x, %w : (tensor<8192x4096xbf16>, tensor<64x4096xbf16>) -> tensor<8192x64xbf16>
  func.return %y : tensor<8192x64xbf16>
}
