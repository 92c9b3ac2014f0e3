// RUN: tinyopt %s -p 'fuse{debug=true}' 2>&1 | filecheck %s

// A cache write whose update is computed from a matmul (a projection's keys, transposed to
// [B, KV, S, D] and rotated: a concat of negated and plain slices) reads the matmul's buffer:
// the GEMM kernel, then one write kernel doing the rotation as it stores into the cache at
// %pos, never a third kernel holding the rotated keys in between.

// CHECK:      fuse: %kt (graph.matmul) gets a buffer: the update of an in-place write reads it
// CHECK:      fuse: @step_0 computes %kt (graph.matmul)
// CHECK-NEXT: fuse: @step_1 computes %new (graph.dynamic_update_slice), inlining {{[0-9]+}} elementwise or index ops
// CHECK-NOT:  fuse: @step_2
// CHECK:      loop.kernel @step_1(%{{.*}}: memref<1x8xf32>, %pos: i64, %{{.*}}: memref<1x2x16x4xf32>)
// CHECK-NOT:  loop.reduce
// CHECK:      func.func @step
// CHECK-NEXT:   %{{.*}} = memref.alloc() : memref<1x8xf32>
// CHECK-NEXT:   loop.launch @step_0
// CHECK-NEXT:   loop.launch @step_1
// CHECK-NEXT:   func.return

func.func @step(%x: tensor<1x16xf32>, %w: tensor<16x8xf32>, %cache: tensor<1x2x16x4xf32>, %pos: tensor<i64>) -> tensor<1x2x16x4xf32> {
  %kt = graph.matmul %x, %w : (tensor<1x16xf32>, tensor<16x8xf32>) -> tensor<1x8xf32>
  %k4 = graph.reshape %kt : tensor<1x8xf32> -> tensor<1x1x2x4xf32>
  %k = graph.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : tensor<1x1x2x4xf32> -> tensor<1x2x1x4xf32>
  %lo = graph.slice %k {dim = 3 : i64, start = 0 : i64, step = 1 : i64} : tensor<1x2x1x4xf32> -> tensor<1x2x1x2xf32>
  %hi = graph.slice %k {dim = 3 : i64, start = 2 : i64, step = 1 : i64} : tensor<1x2x1x4xf32> -> tensor<1x2x1x2xf32>
  %nhi = graph.neg %hi : tensor<1x2x1x2xf32>
  %rot = graph.concat %nhi, %lo {dim = 3 : i64} : (tensor<1x2x1x2xf32>, tensor<1x2x1x2xf32>) -> tensor<1x2x1x4xf32>
  %new = graph.dynamic_update_slice %cache[%pos], %rot {dim = 2 : i64} : (tensor<1x2x16x4xf32>, tensor<i64>, tensor<1x2x1x4xf32>) -> tensor<1x2x16x4xf32>
  func.return %new : tensor<1x2x16x4xf32>
}
