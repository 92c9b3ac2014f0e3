// RUN: tinyopt %s -p fuse,tile | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{multicast=b}' | filecheck %s --check-prefix=ON
// RUN: tinyopt %s -p 'fuse,tile{multicast=b persistent=1}' | filecheck %s --check-prefix=PERSISTENT
// RUN: not tinyopt %s -p 'fuse,tile{mma=wgmma multicast=b bm=128 bn=128}' 2>&1 | filecheck %s --check-prefix=ONE-ROW
// RUN: tinyopt %s -p 'fuse,tile{multicast=a}' | filecheck %s --check-prefix=A
// RUN: tinyopt %s -p 'fuse,tile{multicast=b4}' | filecheck %s --check-prefix=B4

// B tiles multicast to clusters of two blocks (wgmma_multicast.py). multicast=auto takes it
// where B's rows start off 32-byte sectors (K = 4392: 8784 bytes), the rows of tiles are even,
// the grid is at most two waves and K at least 24 steps of 64: a cluster [1, 2, 1] of two
// rows of tiles, each block copying half of B's 128 rows (a 64-row box) into both blocks'
// slot, and one thread of each consumer warpgroup releasing the slot on each block's mbarrier.
// CHECK:      tile.kernel @off_sectors_0 grid [16, 8, 1] block [384, 1, 1] cluster [1, 2, 1]
// CHECK-SAME: multicast = "b"
// CHECK-SAME: tensor_maps = [{arg = 0 : i64, box = array<i64: 128, 64>, {{.*}}}, {arg = 1 : i64, box = array<i64: 64, 64>,
// CHECK:      tile.fence_mbarrier_init
// CHECK:      tile.cluster_sync
// CHECK:      tile.tma_load %1[{{.*}}] {{.*}} multicast 3
// CHECK:      tile.mbarrier_arrive_cluster
// PERSISTENT: tile.kernel @off_sectors_0 grid [128, 1, 1] block [384, 1, 1] cluster [2, 1, 1]
// With multicast=a the pair is two columns of tiles: each block copies 64 of the A tile's 128
// rows into both, and its own B tile.
// A:          tile.kernel @off_sectors_0 grid [16, 8, 1] block [384, 1, 1] cluster [2, 1, 1]
// A-SAME:     multicast = "a"
// A-SAME:     tensor_maps = [{arg = 0 : i64, box = array<i64: 64, 64>, {{.*}}}, {arg = 1 : i64, box = array<i64: 128, 64>,
// A:          tile.tma_load %0[{{.*}}] {{.*}} multicast 3
// With multicast=b4 four rows of tiles share each B tile: a cluster [1, 4, 1], each block
// copying 32 of its 128 rows into all four (multicast 15).
// B4:         tile.kernel @off_sectors_0 grid [16, 8, 1] block [384, 1, 1] cluster [1, 4, 1]
// B4-SAME:    multicast = "b4"
// B4-SAME:    tensor_maps = [{arg = 0 : i64, box = array<i64: 128, 64>, {{.*}}}, {arg = 1 : i64, box = array<i64: 32, 64>,
// B4:         tile.tma_load %1[{{.*}}] {{.*}} multicast 15
func.func @off_sectors(%x: tensor<1000x4392xbf16>, %w: tensor<2048x4392xbf16>) -> tensor<1000x2048xbf16> {
  %y = graph.linear %x, %w : (tensor<1000x4392xbf16>, tensor<2048x4392xbf16>) -> tensor<1000x2048xbf16>
  func.return %y : tensor<1000x2048xbf16>
}

// B's rows on sectors (K = 4096): each block its own B tile, no cluster (measured 0.95-0.99x
// as fast with multicast on the Llama-3 linears); multicast=b pairs them anyway.
// CHECK:      tile.kernel @on_sectors_0 grid [16, 8, 1] block [384, 1, 1] (
// CHECK-SAME: multicast = "off"
// ON:         tile.kernel @on_sectors_0 grid [16, 8, 1] block [384, 1, 1] cluster [1, 2, 1]
func.func @on_sectors(%x: tensor<1000x4096xbf16>, %w: tensor<2048x4096xbf16>) -> tensor<1000x2048xbf16> {
  %y = graph.linear %x, %w : (tensor<1000x4096xbf16>, tensor<2048x4096xbf16>) -> tensor<1000x2048xbf16>
  func.return %y : tensor<1000x2048xbf16>
}

// 9 rows of tiles: a pair would add a block of zeros past M (multicast=b does: 10 rows).
// CHECK:      tile.kernel @odd_rows_0 grid [11, 9, 1] block [384, 1, 1] (
// CHECK-SAME: multicast = "off"
// ON:         tile.kernel @odd_rows_0 grid [11, 10, 1] block [384, 1, 1] cluster [1, 2, 1]
// B4:         tile.kernel @odd_rows_0 grid [11, 12, 1] block [384, 1, 1] cluster [1, 4, 1]
func.func @odd_rows(%x: tensor<1100x4392xbf16>, %w: tensor<2048x4392xbf16>) -> tensor<1100x2048xbf16> {
  %y = graph.linear %x, %w : (tensor<1100x4392xbf16>, tensor<2048x4392xbf16>) -> tensor<1100x2048xbf16>
  func.return %y : tensor<1100x2048xbf16>
}

// 17 K steps: too short a loop for the pair's barriers to pay.
// CHECK:      tile.kernel @short_k_0
// CHECK-SAME: multicast = "off"
func.func @short_k(%x: tensor<1000x1064xbf16>, %w: tensor<2048x1064xbf16>) -> tensor<1000x2048xbf16> {
  %y = graph.linear %x, %w : (tensor<1000x1064xbf16>, tensor<2048x1064xbf16>) -> tensor<1000x2048xbf16>
  func.return %y : tensor<1000x2048xbf16>
}

// One row of tiles has no second block to share B with: multicast=b is refused by name. The
// split-K partial kernel's 32 columns of 64x64 tiles pair for A.
// A:          tile.kernel @one_row_0_splitk grid [32, 1, 4] block [256, 1, 1] cluster [2, 1, 1]
// ONE-ROW: tile: mma=wgmma multicasts B (multicast=b) to two blocks' plain GEMMs {{.*}}; not with one row of tiles (M=64, bm=128)
func.func @one_row(%x: tensor<64x4392xbf16>, %w: tensor<2048x4392xbf16>) -> tensor<64x2048xbf16> {
  %y = graph.linear %x, %w : (tensor<64x4392xbf16>, tensor<2048x4392xbf16>) -> tensor<64x2048xbf16>
  func.return %y : tensor<64x2048xbf16>
}

// An N-major B (a matmul's [K, N] weight) whose rows start off sectors (N = 1000: 2000 bytes)
// pairs from 8 K steps on, at any number of waves: each block of the pair copies one of the
// B tile's two 64-column chunks into both blocks' slot.
// CHECK:      tile.kernel @n_major_0 grid [8, 16, 1] block [256, 1, 1] cluster [1, 2, 1]
// CHECK-SAME: multicast = "b"
// CHECK-SAME: tensor_maps = [{arg = 0 : i64, box = array<i64: 64, 64>, {{.*}}}, {arg = 1 : i64, box = array<i64: 64, 64>,
func.func @n_major(%x: tensor<1000x1000xbf16>, %w: tensor<1000x1000xbf16>) -> tensor<1000x1000xbf16> {
  %m = graph.matmul %x, %w : (tensor<1000x1000xbf16>, tensor<1000x1000xbf16>) -> tensor<1000x1000xbf16>
  func.return %m : tensor<1000x1000xbf16>
}

// 7 K steps of an N-major B: too short a loop.
// CHECK:      tile.kernel @n_major_short_k_0 grid [8, 16, 1] block [256, 1, 1] (
// CHECK-SAME: multicast = "off"
func.func @n_major_short_k(%x: tensor<1000x448xbf16>, %w: tensor<448x1000xbf16>) -> tensor<1000x1000xbf16> {
  %m = graph.matmul %x, %w : (tensor<1000x448xbf16>, tensor<448x1000xbf16>) -> tensor<1000x1000xbf16>
  func.return %m : tensor<1000x1000xbf16>
}
