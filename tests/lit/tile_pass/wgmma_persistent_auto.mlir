// RUN: tinyopt %s -p fuse,tile | filecheck %s

// persistent=auto: the wgmma rule launches 132 persistent blocks where a GEMM has more tiles
// than SMs (16384x768: 128 x 3 = 384 tiles of 128x256), its bias loaded once for all of a
// thread's rows; but one block per tile where the epilogue prefetches a load per row (a
// residual), which the persistent consumers would spill (wgmma_plan.py, choose_wgmma_tiles).

// CHECK:      tile.kernel @bias_0 grid [132, 1, 1] block [384, 1, 1]
// CHECK-SAME: bm = 128, bn = 256, {{.*}}persistent = 1
func.func @bias(%x: tensor<16384x768xbf16>, %w: tensor<768x768xbf16>, %b: tensor<768xbf16>) -> tensor<16384x768xbf16> {
  %y = graph.linear %x, %w, %b : (tensor<16384x768xbf16>, tensor<768x768xbf16>, tensor<768xbf16>) -> tensor<16384x768xbf16>
  func.return %y : tensor<16384x768xbf16>
}

// CHECK:      tile.kernel @residual_0 grid [3, 128, 1] block [384, 1, 1]
// CHECK-SAME: bm = 128, bn = 256, {{.*}}persistent = 0
func.func @residual(%x: tensor<16384x768xbf16>, %w: tensor<768x768xbf16>, %b: tensor<768xbf16>, %r: tensor<16384x768xbf16>) -> tensor<16384x768xbf16> {
  %y = graph.linear %x, %w, %b : (tensor<16384x768xbf16>, tensor<768x768xbf16>, tensor<768xbf16>) -> tensor<16384x768xbf16>
  %z = graph.add %y, %r : tensor<16384x768xbf16>
  func.return %z : tensor<16384x768xbf16>
}

// Fewer tiles than SMs (1000x1000: 128 tiles of 64x128): a block per tile.
// CHECK:      tile.kernel @few_0 grid [8, 16, 1] block [256, 1, 1]
// CHECK-SAME: persistent = 0
func.func @few(%x: tensor<1000x1000xbf16>, %w: tensor<1000x1000xbf16>) -> tensor<1000x1000xbf16> {
  %y = graph.linear %x, %w : (tensor<1000x1000xbf16>, tensor<1000x1000xbf16>) -> tensor<1000x1000xbf16>
  func.return %y : tensor<1000x1000xbf16>
}
