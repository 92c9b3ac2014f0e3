// RUN: tinyopt %s -p fuse,tile | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{evict=off}' | filecheck %s --check-prefix=OFF
// RUN: tinyopt %s -p 'fuse,tile{evict=ab}' | filecheck %s --check-prefix=BOTH
// RUN: tinyopt %s -p fuse,tile,to-cuda | filecheck %s --check-prefix=CUDA

// The L2 evict-first hint (`evict`) on the 128-bit loads of the GEMV rules: the weights, which
// one block reads once, give way in L2 before the activations every block reads.

// M = 1 (row_reduction): the weights are the only load of their buffer, indexed by the row
// and the reduction, beside x, which every row reads: the weights' loads are hinted.
// CHECK:      tile.kernel @gemv_0
// CHECK-SAME: row_reduction, {{.*}} evict = "once"
// CHECK:      tile.vload %0[{{.*}}] : memref<1x4096xbf16>
// CHECK:      tile.vload %1[{{.*}}] evict_first : memref<4096x4096xbf16>
// OFF:        tile.kernel @gemv_0
// OFF-SAME:   evict = "off"
// OFF-NOT:    evict_first
// OFF:        tile.kernel @rows8_0
// OFF-SAME:   evict = "off"
// OFF-NOT:    evict_first
// CUDA:       ld.global.L2::cache_hint.v4.u32
// CUDA:       extern "C" __global__ {{.*}} gemv_0(
// CUDA:       tinyopt_ld_16_evict_first(
func.func @gemv(%x: tensor<1x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<1x4096xbf16> {
  %y = graph.linear %x, %w : (tensor<1x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<1x4096xbf16>
  func.return %y : tensor<1x4096xbf16>
}

// M = 8 (skinny_mma): one block holds all 8 rows of its columns, so it alone reads their
// weights: auto hints the weights (side b), not the activations; ab hints both.
// CHECK:      tile.kernel @rows8_0
// CHECK-SAME: skinny_mma, {{.*}} evict = "b"
// CHECK:      tile.vload %1[{{.*}}] evict_first : memref<4096x4096xbf16>
// CHECK:      tile.vload %0[{{.*}}] : memref<8x4096xbf16>
// BOTH:       tile.kernel @rows8_0
// BOTH-SAME:  evict = "ab"
// BOTH:       tile.vload %1[{{.*}}] evict_first : memref<4096x4096xbf16>
// BOTH:       tile.vload %0[{{.*}}] evict_first : memref<8x4096xbf16>
func.func @rows8(%x: tensor<8x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<8x4096xbf16> {
  %y = graph.linear %x, %w : (tensor<8x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<8x4096xbf16>
  func.return %y : tensor<8x4096xbf16>
}

// A row sum reads its rows once but nothing every row shares: no hint (a later kernel may
// read the rows again, and this one gains nothing).
// CHECK:      tile.kernel @row_sum_0
// CHECK-NOT:  evict_first
// CHECK:      tile.vload %0[{{.*}}] : memref<64x1000xf32>
// CHECK-NOT:  evict_first
// CHECK:      tile.yield
func.func @row_sum(%x: tensor<64x1000xf32>) -> tensor<64xf32> {
  %y = graph.reduce_sum %x {dims = array<i64: 1>} : tensor<64x1000xf32> -> tensor<64xf32>
  func.return %y : tensor<64xf32>
}
