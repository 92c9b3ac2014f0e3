// RUN: tinyopt %s -p fuse,tile | filecheck %s
// RUN: tinyopt %s -p fuse,tile,to-cuda | filecheck %s --check-prefix=CUDA

// A batch of 100000 small GEMMs: the contraction rule puts the batch in grid.z, past its limit
// 65535. The launch is re-gridded (passes/tile/limits.py): the grid folds into x and the batch
// index is blockIdx.x itself (x and y have one block each).

// CHECK:      tile.kernel @bmm_0 grid [100000, 1, 1] block [256, 1, 1]
// CHECK-NEXT:   %[[B:.*]] = tile.block_id x
// CHECK-NOT:    tile.block_id
// CHECK:        tile.vload %{{.*}}[%[[B]], %{{.*}}, %{{.*}}] : memref<100000x4x4xf32>
// CHECK-NOT:    tile.block_id

// CUDA:      // kernel @bmm_0 grid (100000, 1, 1) block (256, 1, 1)
// CUDA:      int {{v[0-9]+}} = (int)blockIdx.x;
// CUDA-NOT:  blockIdx

func.func @bmm(%a: tensor<100000x4x4xf32>, %b: tensor<100000x4x4xf32>) -> tensor<100000x4x4xf32> {
  %c = graph.matmul %a, %b : (tensor<100000x4x4xf32>, tensor<100000x4x4xf32>) -> tensor<100000x4x4xf32>
  func.return %c : tensor<100000x4x4xf32>
}
