// RUN: tinyopt %s -p 'fuse,tile{mma=none}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{mma=none skinny=off}' | filecheck %s --check-prefix=TILES
// RUN: tinyopt %s -p fuse,tile | filecheck %s --check-prefix=SKINNY

// The FP32 contraction's block tile by waves on the H200's 132 SMs (passes/tile/gemm/
// contraction_plan.py, choose_tiles and blocks_per_sm), on CUDA cores (`mma=none`: `auto` runs
// the larger of these GEMMs as three TF32 products, wgmma_3xtf32.mlir).

// 256 tiles of 128x128 fill 97% of the 264 two-per-SM slots: 128x128, capped at two blocks
// per SM (128 registers a thread).
// CHECK:      tile.kernel @fill_0 grid [8, 32, 1] block [256, 1, 1]
// CHECK-SAME: tile.min_blocks = 2
func.func @fill(%x: tensor<4096x4096xf32>, %w: tensor<1024x4096xf32>) -> tensor<4096x1024xf32> {
  %y = graph.linear %x, %w : (tensor<4096x4096xf32>, tensor<1024x4096xf32>) -> tensor<4096x1024xf32>
  func.return %y : tensor<4096x1024xf32>
}

// 192 tiles (73%) over 256 K steps: 128x128 with stream-K sharing the steps over one wave of
// 264 blocks.
// CHECK:      tile.kernel @share_0_flags
// CHECK:      tile.kernel @share_0 grid [264, 1, 1] block [256, 1, 1]
// CHECK-SAME: tile.min_blocks = 2
func.func @share(%x: tensor<4096x4096xf32>, %w: tensor<768x4096xf32>) -> tensor<4096x768xf32> {
  %y = graph.linear %x, %w : (tensor<4096x4096xf32>, tensor<768x4096xf32>) -> tensor<4096x768xf32>
  func.return %y : tensor<4096x768xf32>
}

// The same 192 tiles over 16 K steps, too few for stream-K: the smaller 64x64 tile (768 blocks
// of 64 threads, up to eight per SM).
// CHECK:      tile.kernel @short_k_0 grid [12, 64, 1] block [64, 1, 1]
// CHECK-SAME: tile.min_blocks = 8
func.func @short_k(%x: tensor<4096x256xf32>, %w: tensor<768x256xf32>) -> tensor<4096x768xf32> {
  %y = graph.linear %x, %w : (tensor<4096x256xf32>, tensor<768x256xf32>) -> tensor<4096x768xf32>
  func.return %y : tensor<4096x768xf32>
}

// 128 tiles of 128x128 (0.97 a SM) over 256 K steps: stream-K shares each tile's steps over
// about two of the wave's 264 blocks, rather than 512 tiles of 64x64.
// CHECK:      tile.kernel @few_tiles_0_flags
// CHECK:      tile.kernel @few_tiles_0 grid [264, 1, 1] block [256, 1, 1]
// CHECK-SAME: tile.min_blocks = 2
func.func @few_tiles(%x: tensor<512x4096xf32>, %w: tensor<4096x4096xf32>) -> tensor<512x4096xf32> {
  %y = graph.linear %x, %w : (tensor<512x4096xf32>, tensor<4096x4096xf32>) -> tensor<512x4096xf32>
  func.return %y : tensor<512x4096xf32>
}

// As many 128-row tiles over 64 rows would be half padding: 32x64 tiles (128 threads).
// CHECK:      tile.kernel @half_padding_0_flags
// CHECK:      tile.kernel @half_padding_0 grid [528, 1, 1] block [128, 1, 1]
func.func @half_padding(%x: tensor<64x4096xf32>, %w: tensor<14336x4096xf32>) -> tensor<64x14336xf32> {
  %y = graph.linear %x, %w : (tensor<64x4096xf32>, tensor<14336x4096xf32>) -> tensor<64x14336xf32>
  func.return %y : tensor<64x14336xf32>
}

// 231 rows: 64 tiles of 128x128 (0.48 a SM, 90% of their rows held) over 256 K steps, 62 a
// block of the stream-K wave, rather than 512 tiles of 32x64 (4x4 register tiles).
// CHECK:      tile.kernel @few_held_tiles_0_flags
// CHECK:      tile.kernel @few_held_tiles_0 grid [264, 1, 1] block [256, 1, 1]
// CHECK-SAME: plan = #tile.plan<contraction, bm = 128, bn = 128, bk = 16, tm = 8, tn = 8,
func.func @few_held_tiles(%x: tensor<231x4096xf32>, %w: tensor<4096x4096xf32>) -> tensor<231x4096xf32> {
  %y = graph.linear %x, %w : (tensor<231x4096xf32>, tensor<4096x4096xf32>) -> tensor<231x4096xf32>
  func.return %y : tensor<231x4096xf32>
}

// 160 rows, where 128-row tiles would be 62% held: 192 tiles of 64x64 (83% held, 64 threads,
// eight blocks an SM) with stream-K giving each of its 1056 blocks 46 K steps.
// CHECK:      tile.kernel @held_64_rows_0_flags
// CHECK:      tile.kernel @held_64_rows_0 grid [1056, 1, 1] block [64, 1, 1]
// CHECK-SAME: plan = #tile.plan<contraction, bm = 64, bn = 64, bk = 16, tm = 8, tn = 8,
func.func @held_64_rows(%x: tensor<160x4096xf32>, %w: tensor<4096x4096xf32>) -> tensor<160x4096xf32> {
  %y = graph.linear %x, %w : (tensor<160x4096xf32>, tensor<4096x4096xf32>) -> tensor<160x4096xf32>
  func.return %y : tensor<160x4096xf32>
}

// 48 rows, 64 tiles of one 64x64 block (8x4 register tiles, 128 threads) read each weight
// once, with stream-K giving each of its 528 blocks 31 K steps of a 64x64 tile (row_block);
// at 1024 columns that would be 8 steps a block: 32x64 tiles (under mma=auto, K split over
// 3xTF32 blocks: wgmma_3xtf32.mlir); at 14336 columns, 108 steps a block, 64x128 blocks of
// 8x8 register tiles, whose steps are twice the work.
// CHECK:      tile.kernel @rows_0_flags
// CHECK:      tile.kernel @rows_0 grid [528, 1, 1] block [128, 1, 1]
// CHECK-SAME: plan = #tile.plan<contraction, bm = 64, bn = 64, bk = 16, tm = 8, tn = 4,
// CHECK-SAME: minblocks = 4, interleave = "off", prefetch = "off", streamk = "on">
func.func @rows(%x: tensor<48x4096xf32>, %w: tensor<4096x4096xf32>) -> tensor<48x4096xf32> {
  %y = graph.linear %x, %w : (tensor<48x4096xf32>, tensor<4096x4096xf32>) -> tensor<48x4096xf32>
  func.return %y : tensor<48x4096xf32>
}
// CHECK:      tile.kernel @wide_rows_0 grid [528, 1, 1] block [128, 1, 1]
// CHECK-SAME: plan = #tile.plan<contraction, bm = 64, bn = 128, bk = 16, tm = 8, tn = 8,
// CHECK-SAME: streamk = "on">
func.func @wide_rows(%x: tensor<48x4096xf32>, %w: tensor<14336x4096xf32>) -> tensor<48x14336xf32> {
  %y = graph.linear %x, %w : (tensor<48x4096xf32>, tensor<14336x4096xf32>) -> tensor<48x14336xf32>
  func.return %y : tensor<48x14336xf32>
}
// CHECK:      tile.kernel @few_steps_0 grid [528, 1, 1] block [128, 1, 1]
// CHECK-SAME: plan = #tile.plan<contraction, bm = 32, bn = 64,
func.func @few_steps(%x: tensor<48x4096xf32>, %w: tensor<1024x4096xf32>) -> tensor<48x1024xf32> {
  %y = graph.linear %x, %w : (tensor<48x4096xf32>, tensor<1024x4096xf32>) -> tensor<48x1024xf32>
  func.return %y : tensor<48x1024xf32>
}

// 16 rows: the skinny rule streams the weights (passes/tile/gemm/skinny.py); with it off, 64
// tiles of 32x64 (128 threads) shared by a stream-K wave of four blocks per SM.
// SKINNY:      tile.kernel @skinny_0 grid [512, 1, 1] block [256, 1, 1]
// SKINNY-SAME: plan = #tile.plan<skinny,
// TILES:      tile.kernel @skinny_0_flags
// TILES:      tile.kernel @skinny_0 grid [528, 1, 1] block [128, 1, 1]
// TILES-SAME: tile.min_blocks = 4
func.func @skinny(%x: tensor<16x4096xf32>, %w: tensor<4096x4096xf32>) -> tensor<16x4096xf32> {
  %y = graph.linear %x, %w : (tensor<16x4096xf32>, tensor<4096x4096xf32>) -> tensor<16x4096xf32>
  func.return %y : tensor<16x4096xf32>
}
