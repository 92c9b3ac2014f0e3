// An in-place write whose cache another op also reads is refused: that read could run before
// or after the write kernel.
// RUN: not tinyopt %s -p fuse 2>&1 | filecheck %s

func.func @step(%k: tensor<1x2x1x8xf32>, %cache: tensor<1x2x16x8xf32>, %pos: tensor<i64>) -> (tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) {
  %new = graph.dynamic_update_slice %cache[%pos], %k {dim = 2 : i64} : (tensor<1x2x16x8xf32>, tensor<i64>, tensor<1x2x1x8xf32>) -> tensor<1x2x16x8xf32>
  %old = graph.exp %cache : tensor<1x2x16x8xf32>
  func.return %new, %old : tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>
}

// CHECK: error: fuse: graph.dynamic_update_slice in @step writes @step argument 1 (%cache) in place, which another op also reads: it would see the buffer before or after the write depending on the kernel order; read the update's result instead
