// RUN: tinyopt %s -p 'fuse,tile' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{bk=16}' | filecheck %s --check-prefix=PINNED

// copy=auto (the default) on FP32 contractions: TMA with a producer warp and a 64x64x32 tile,
// 8x4 per thread, 2 stages, where 128x128 tiles would give fewer than two blocks per SM (of
// 132), 64x64 tiles at least 64 blocks, and TMA can copy both operands; register staging
// (`ld`) elsewhere.

// 1024x1024: 64 blocks of 128x128, 256 of 64x64 with 128 + 32 threads.
// CHECK:      tile.kernel @small_0 grid [16, 16, 1] block [160, 1, 1]
// CHECK-SAME:   tile.tensor_maps = [{arg = 0 : i64, box = array<i64: 64, 32>, swizzle = 0 : i64}, {arg = 1 : i64, box = array<i64: 32, 64>, swizzle = 0 : i64}]
// CHECK:        tile.alloc dynamic : memref<2x64x32xf32, 3 : i32>
// CHECK:        tile.mbarrier_wait

// A unit batch dimension (loads at [0, m, k]) is dropped by `fuse` (a collapse_shape view):
// the kernel reads 2-D buffers through 2-D tensor maps.
// CHECK:      tile.kernel @unit_batch_0 grid [16, 16, 1] block [160, 1, 1] (%{{.*}}: memref<1024x64xf32>, %{{.*}}: memref<64x1024xf32>, %{{.*}}: memref<1024x1024xf32>)
// CHECK-SAME:   tile.tensor_maps = [{arg = 0 : i64, box = array<i64: 64, 32>, swizzle = 0 : i64}, {arg = 1 : i64, box = array<i64: 32, 64>, swizzle = 0 : i64}]

// Rows of 66 floats are not 16-byte multiples (a tensor map's strides must be): falls back to
// register staging, no tensor maps.
// CHECK:      tile.kernel @odd_rows_0 grid
// CHECK-NOT:    tile.tensor_maps
// CHECK-NOT:    tile.mbarrier_wait
// CHECK:        tile.barrier

// A fused prologue (relu of x) is not a plain load: register staging evaluates it.
// CHECK:      tile.kernel @prologue_0 grid
// CHECK-NOT:    tile.tensor_maps
// CHECK:        arith.maximumf

// Too small for 64 blocks of 64x64 (12): register staging's smaller tiles.
// CHECK:      tile.kernel @tiny_0 grid
// CHECK-NOT:    tile.tensor_maps
// CHECK:        tile.barrier

// A large grid (1024 blocks of 128x128): register staging with its 256-thread tiles.
// CHECK:      tile.kernel @large_0 grid [32, 32, 1] block [256, 1, 1]
// CHECK-NOT:    tile.tensor_maps
// CHECK:        tile.barrier

// A tile knob given (here bk) leaves the tile to the user: register staging.
// PINNED:     tile.kernel @small_0
// PINNED-NOT:   tile.tensor_maps
// PINNED:       tile.barrier

func.func @small(%x: tensor<1024x64xf32>, %w: tensor<64x1024xf32>) -> tensor<1024x1024xf32> {
  %m = graph.matmul %x, %w : (tensor<1024x64xf32>, tensor<64x1024xf32>) -> tensor<1024x1024xf32>
  func.return %m : tensor<1024x1024xf32>
}

func.func @unit_batch(%x: tensor<1x1024x64xf32>, %w: tensor<1x64x1024xf32>) -> tensor<1x1024x1024xf32> {
  %m = graph.matmul %x, %w : (tensor<1x1024x64xf32>, tensor<1x64x1024xf32>) -> tensor<1x1024x1024xf32>
  func.return %m : tensor<1x1024x1024xf32>
}

func.func @odd_rows(%x: tensor<1024x66xf32>, %w: tensor<66x1024xf32>) -> tensor<1024x1024xf32> {
  %m = graph.matmul %x, %w : (tensor<1024x66xf32>, tensor<66x1024xf32>) -> tensor<1024x1024xf32>
  func.return %m : tensor<1024x1024xf32>
}

func.func @prologue(%x: tensor<1024x64xf32>, %w: tensor<64x1024xf32>) -> tensor<1024x1024xf32> {
  %r = graph.relu %x : tensor<1024x64xf32>
  %m = graph.matmul %r, %w : (tensor<1024x64xf32>, tensor<64x1024xf32>) -> tensor<1024x1024xf32>
  func.return %m : tensor<1024x1024xf32>
}

func.func @tiny(%x: tensor<256x64xf32>, %w: tensor<64x192xf32>) -> tensor<256x192xf32> {
  %m = graph.matmul %x, %w : (tensor<256x64xf32>, tensor<64x192xf32>) -> tensor<256x192xf32>
  func.return %m : tensor<256x192xf32>
}

func.func @large(%x: tensor<4096x64xf32>, %w: tensor<64x4096xf32>) -> tensor<4096x4096xf32> {
  %m = graph.matmul %x, %w : (tensor<4096x64xf32>, tensor<64x4096xf32>) -> tensor<4096x4096xf32>
  func.return %m : tensor<4096x4096xf32>
}
