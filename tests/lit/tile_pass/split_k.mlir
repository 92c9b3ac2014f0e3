// RUN: tinyopt %s -p 'fuse,tile{splitk=4}' | filecheck %s

// Split-K, two-pass: the 33x40x1000 contraction becomes a partial-sum contraction over
// (4 splits, 33, 40) writing a workspace, tiled by the contraction rule (3-D grid: z = splits),
// and a fold kernel that sums the 4 partials and runs the relu epilogue. The host function
// allocates the workspace and launches both.

// CHECK:      tile.kernel @matmul_relu_0_splitk grid [{{[0-9]+}}, {{[0-9]+}}, 4]
// CHECK:        tile.barrier
// CHECK:        tile.vstore({{.*}}), %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<4x33x40xf32>
// CHECK:      tile.kernel @matmul_relu_0_reduce
// CHECK:        scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (f32) {
// CHECK:          memref.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<4x33x40xf32>
// CHECK:          arith.addf
// CHECK:        arith.maximumf
// CHECK:        memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<33x40xf32>
// CHECK:      func.func @matmul_relu
// CHECK:        %[[OUT:.*]] = memref.alloc() : memref<33x40xf32>
// CHECK-NEXT:   %[[WS:.*]] = memref.alloc() : memref<4x33x40xf32>
// CHECK-NEXT:   loop.launch @matmul_relu_0_splitk(%{{.*}}, %{{.*}}, %{{.*}}, %[[OUT]], %[[WS]])
// CHECK-NEXT:   loop.launch @matmul_relu_0_reduce(%{{.*}}, %{{.*}}, %{{.*}}, %[[OUT]], %[[WS]])

func.func @matmul_relu(%x: tensor<33x1000xf32>, %bias: tensor<1000xf32>, %w: tensor<1000x40xf32>) -> tensor<33x40xf32> {
  %bb = graph.broadcast %bias : tensor<1000xf32> -> tensor<33x1000xf32>
  %a = graph.add %x, %bb : tensor<33x1000xf32>
  %m = graph.matmul %a, %w : (tensor<33x1000xf32>, tensor<1000x40xf32>) -> tensor<33x40xf32>
  %r = graph.relu %m : tensor<33x40xf32>
  func.return %r : tensor<33x40xf32>
}
