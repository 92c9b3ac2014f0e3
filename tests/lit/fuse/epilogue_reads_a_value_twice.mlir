// RUN: tinyopt %s -p 'fuse{debug=true}' 2>&1 | filecheck %s

// An epilogue that reads a value twice computes it once: in `y * sigmoid(y)` with
// `y = x @ w + b`, the second read of y goes through a reshape that splits its columns and
// one that merges them back, which index the same element as the first read, so the kernel
// computes the bias add once (one `arith.addf` of the accumulator) and both the sigmoid and
// the product use it.

// CHECK:      fuse: @swish_0 computes %g (graph.mul), fusing %m (graph.matmul)
// CHECK:      loop.kernel @swish_0(%{{.*}}: memref<8x16xf32>, %{{.*}}: memref<16x12xf32>, %[[BIAS:.*]]: memref<12xf32>, %[[OUT:.*]]: memref<8x12xf32>) {
// CHECK:        %[[ACC:.*]] = loop.reduce
// CHECK:        } combine
// CHECK:        }
// CHECK-NEXT:   %[[B:.*]] = memref.load %[[BIAS]]
// CHECK-NEXT:   %[[Y:.*]] = arith.addf %[[ACC]], %[[B]] : f32
// CHECK-NEXT:   arith.negf %[[Y]] : f32
// CHECK-NOT:    %[[ACC]]
// CHECK:        %[[G:.*]] = arith.mulf %[[Y]], %{{.*}} : f32
// CHECK-NEXT:   memref.store %[[G]], %[[OUT]]
// CHECK-NOT:  loop.kernel

func.func @swish(%x: tensor<8x16xf32>, %w: tensor<16x12xf32>, %b: tensor<12xf32>) -> tensor<8x12xf32> {
  %m = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %bb = graph.broadcast %b : tensor<12xf32> -> tensor<8x12xf32>
  %y = graph.add %m, %bb : tensor<8x12xf32>
  %s = graph.sigmoid %y : tensor<8x12xf32>
  %y3 = graph.reshape %y : tensor<8x12xf32> -> tensor<8x3x4xf32>
  %y2 = graph.reshape %y3 : tensor<8x3x4xf32> -> tensor<8x12xf32>
  %g = graph.mul %y2, %s : tensor<8x12xf32>
  func.return %g : tensor<8x12xf32>
}
