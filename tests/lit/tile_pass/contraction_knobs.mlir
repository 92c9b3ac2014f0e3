// RUN: tinyopt %s -p 'fuse,tile{bm=64 bn=32 bk=16 tm=4 tn=2}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{bm=64 bn=32 bk=16 tm=8 tn=2}' | filecheck %s --check-prefix=TM8

// The contraction knobs set the launch shape: a block computes a bm x bn = 64x32 tile of the
// 256x192 output, so the grid is [192/32, 256/64, 1] = [6, 4, 1]; each thread holds a
// tm x tn register tile, so a block has (64/4)*(32/2) = 256 threads (with tm=8: 8*16 = 128).
// The shared tiles are [bk][bm+4] and [bk][bn+4]; the epilogue stores tn = 2 wide vectors.

// CHECK:      tile.kernel @mm_0 grid [6, 4, 1] block [256, 1, 1]
// CHECK-DAG:    tile.alloc : memref<{{([0-9]+x)?}}16x68xf32, 3 : i32>
// CHECK-DAG:    tile.alloc : memref<{{([0-9]+x)?}}16x36xf32, 3 : i32>
// CHECK-DAG:    tile.alloc : memref<4x2xf32, 5 : i32>
// CHECK:        tile.barrier
// CHECK-COUNT-4: tile.vstore(%{{.*}}, %{{.*}} : f32, f32), %{{.*}}[%{{.*}}, %{{.*}}] : memref<256x192xf32>
// CHECK-NOT:    tile.vstore
// CHECK:      func.func @mm

// TM8:        tile.kernel @mm_0 grid [6, 4, 1] block [128, 1, 1]
// TM8:          tile.alloc : memref<8x2xf32, 5 : i32>
// TM8-COUNT-8:  tile.vstore(%{{.*}}, %{{.*}} : f32, f32), %{{.*}}[%{{.*}}, %{{.*}}] : memref<256x192xf32>
// TM8-NOT:      tile.vstore

func.func @mm(%x: tensor<256x64xf32>, %w: tensor<64x192xf32>) -> tensor<256x192xf32> {
  %m = graph.matmul %x, %w : (tensor<256x64xf32>, tensor<64x192xf32>) -> tensor<256x192xf32>
  func.return %m : tensor<256x192xf32>
}
