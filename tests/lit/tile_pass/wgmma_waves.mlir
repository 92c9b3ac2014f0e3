// RUN: tinyopt %s -p fuse,tile | filecheck %s

// The wgmma rule's block by waves of one block per SM (132 SMs; wgmma_plan.py,
// _wave_cheapest_block, each block shape at its measured efficiency): 128x256 wherever its grid
// takes as few waves (or a narrower block is estimated less than 5% cheaper), 128x192,
// 128x128 or 64x128 where 256 would leave SMs idle, 192x192 where its waves cost no more,
// 64x64 where 128x128 blocks would be fewer than a quarter of the SMs.

// 4000x1024: 128 blocks of 128x256 in one wave, not 256 of 128x128 in two.
// CHECK:      tile.kernel @wide_0 grid [4, 32, 1] block [384, 1, 1]
func.func @wide(%x: tensor<4000x4096xbf16>, %w: tensor<1024x4096xbf16>) -> tensor<4000x1024xbf16> {
  %y = graph.linear %x, %w : (tensor<4000x4096xbf16>, tensor<1024x4096xbf16>) -> tensor<4000x1024xbf16>
  func.return %y : tensor<4000x1024xbf16>
}

// 512x768: 12 blocks of 128x256 would leave 120 SMs idle, 24 of 128x128 too (fewer than
// 132 / 4): 96 blocks of 64x64, one consumer warpgroup each.
// CHECK:      tile.kernel @narrow_0 grid [12, 8, 1] block [256, 1, 1]
// CHECK-SAME: bm = 64, bn = 64
func.func @narrow(%x: tensor<512x4096xbf16>, %w: tensor<768x4096xbf16>) -> tensor<512x768xbf16> {
  %y = graph.linear %x, %w : (tensor<512x4096xbf16>, tensor<768x4096xbf16>) -> tensor<512x768xbf16>
  func.return %y : tensor<512x768xbf16>
}

// 1000x1000: 32 blocks of 128x256 or 64 of 128x128 fill half the SMs or less; 128 blocks of
// 64x128 fill one wave.
// CHECK:      tile.kernel @square_1000_0 grid [8, 16, 1] block [256, 1, 1]
// CHECK-SAME: bm = 64, bn = 128
func.func @square_1000(%x: tensor<1000x1000xbf16>, %w: tensor<1000x1000xbf16>) -> tensor<1000x1000xbf16> {
  %y = graph.linear %x, %w : (tensor<1000x1000xbf16>, tensor<1000x1000xbf16>) -> tensor<1000x1000xbf16>
  func.return %y : tensor<1000x1000xbf16>
}

// 3000x3000: 256 tiles of 192x192 (three consumer warpgroups) in 2 waves (1.9 of work), the
// cost of 384 of 128x192 in 3 (2.9) with a fifth fewer operand bytes per FLOP; not 288 of
// 128x256 in 3 (2.2) nor 576 of 128x128 in 5 (4.4). More tiles than SMs: 132 persistent blocks
// walk them, storing each tile with TMA (`store=auto` on a persistent grid).
// CHECK:      tile.kernel @square_3000_0 grid [132, 1, 1] block [512, 1, 1]
// CHECK-SAME: bm = 192, bn = 192, stages = 3, ws = 1, store = "tma", persistent = 1
func.func @square_3000(%x: tensor<3000x3000xbf16>, %w: tensor<3000x3000xbf16>) -> tensor<3000x3000xbf16> {
  %y = graph.linear %x, %w : (tensor<3000x3000xbf16>, tensor<3000x3000xbf16>) -> tensor<3000x3000xbf16>
  func.return %y : tensor<3000x3000xbf16>
}

// 8192x8192: 2048 tiles of 128x256 in 16 waves (15.5 of work); 128x192 would take 21 (20.8),
// an estimated 1.5% less, inside the efficiencies' spread: the wider block stays.
// CHECK:      tile.kernel @square_8192_0 grid [132, 1, 1] block [384, 1, 1]
// CHECK-SAME: bm = 128, bn = 256, stages = 3
func.func @square_8192(%x: tensor<8192x1024xbf16>, %w: tensor<8192x1024xbf16>) -> tensor<8192x8192xbf16> {
  %y = graph.linear %x, %w : (tensor<8192x1024xbf16>, tensor<8192x1024xbf16>) -> tensor<8192x8192xbf16>
  func.return %y : tensor<8192x8192xbf16>
}

// 5000x5000: 128x192 blocks (1080 tiles, 9 waves) are estimated 3.5% cheaper than 128x256
// (800 tiles, 7 waves), under the 5% margin (measured 0.9x as fast); 192x192 (729 tiles, 6
// waves) 8% cheaper: it is taken.
// CHECK:      tile.kernel @square_5000_0 grid [132, 1, 1] block [512, 1, 1]
// CHECK-SAME: bm = 192, bn = 192, stages = 3
func.func @square_5000(%x: tensor<5000x1024xbf16>, %w: tensor<5000x1024xbf16>) -> tensor<5000x5000xbf16> {
  %y = graph.linear %x, %w : (tensor<5000x1024xbf16>, tensor<5000x1024xbf16>) -> tensor<5000x5000xbf16>
  func.return %y : tensor<5000x5000xbf16>
}

// 2048x1024: 64 blocks of 128x256 split in two would still fit a wave, so 128x192 is not
// considered (96 blocks of it ran 0.75x cuBLAS): 128 blocks of 128x128.
// CHECK:      tile.kernel @under_a_wave_0 grid [8, 16, 1] block [384, 1, 1]
// CHECK-SAME: bm = 128, bn = 128
func.func @under_a_wave(%x: tensor<2048x4096xbf16>, %w: tensor<1024x4096xbf16>) -> tensor<2048x1024xbf16> {
  %y = graph.linear %x, %w : (tensor<2048x4096xbf16>, tensor<1024x4096xbf16>) -> tensor<2048x1024xbf16>
  func.return %y : tensor<2048x1024xbf16>
}

// 1000x2544: 80 blocks of 128x256 fill more than half a wave, too many to split in two within
// one; 112 blocks of 128x192 fill more of it (0.71 -> 0.90x cuBLAS on an H100).
// CHECK:      tile.kernel @past_half_a_wave_0 grid [14, 8, 1] block [384, 1, 1]
// CHECK-SAME: bm = 128, bn = 192, stages = 4, ws = 1, store = "smem", persistent = 0
func.func @past_half_a_wave(%x: tensor<1000x6032xbf16>, %w: tensor<2544x6032xbf16>) -> tensor<1000x2544xbf16> {
  %y = graph.linear %x, %w : (tensor<1000x6032xbf16>, tensor<2544x6032xbf16>) -> tensor<1000x2544xbf16>
  func.return %y : tensor<1000x2544xbf16>
}

// A dual GEMM's block holds bn/2 columns of each product, 128 or 256 in all, never 192: a
// SwiGLU at 3000x3000 takes 128x256 (128 columns of each) where a single GEMM takes 128x192.
// CHECK:      tile.kernel @swiglu_3000_0 grid [132, 1, 1] block [384, 1, 1]
// CHECK-SAME: bm = 128, bn = 256, {{.*}}dual = "on"
func.func @swiglu_3000(%x: tensor<3000x1024xbf16>, %wg: tensor<3000x1024xbf16>, %wu: tensor<3000x1024xbf16>) -> tensor<3000x3000xbf16> {
  %g = graph.linear %x, %wg : (tensor<3000x1024xbf16>, tensor<3000x1024xbf16>) -> tensor<3000x3000xbf16>
  %u = graph.linear %x, %wu : (tensor<3000x1024xbf16>, tensor<3000x1024xbf16>) -> tensor<3000x3000xbf16>
  %s = graph.silu %g : tensor<3000x3000xbf16>
  %y = graph.mul %s, %u : tensor<3000x3000xbf16>
  func.return %y : tensor<3000x3000xbf16>
}
