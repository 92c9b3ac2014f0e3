// RUN: tinyopt %s -p 'fuse,tile{splitk=4 splitk_mode=atomic}' --split-input-file --verify-diagnostics | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{splitk=4}' --split-input-file | filecheck %s --check-prefix=AUTO

// Partial sums cannot go through relu one chunk at a time; nor through a cast to bf16.
// CHECK: tile: splitk_mode=atomic adds partial sums into the output, so kernel @mm_relu_0 must store its sum unchanged to an f32 output; its epilogue computes (arith.maximumf) (use splitk_mode=twopass)
// CHECK: tile: splitk_mode=atomic adds partial sums into the output, so kernel @mm_bf16_0 must store its sum unchanged to an f32 output; its epilogue computes (arith.truncf) (use splitk_mode=twopass)

// Left at auto, the same kernels take two passes.
// AUTO: tile.kernel @mm_relu_0_splitk
// AUTO: tile.kernel @mm_relu_0_reduce
// AUTO: tile.kernel @mm_bf16_0_splitk
// AUTO: tile.kernel @mm_bf16_0_reduce

func.func @mm_relu(%x: tensor<33x1000xf32>, %w: tensor<1000x40xf32>) -> tensor<33x40xf32> {
  %m = graph.matmul %x, %w : (tensor<33x1000xf32>, tensor<1000x40xf32>) -> tensor<33x40xf32>
  %r = graph.relu %m : tensor<33x40xf32>
  func.return %r : tensor<33x40xf32>
}

// -----

func.func @mm_bf16(%x: tensor<33x1000xbf16>, %w: tensor<1000x40xbf16>) -> tensor<33x40xbf16> {
  %m = graph.matmul %x, %w : (tensor<33x1000xbf16>, tensor<1000x40xbf16>) -> tensor<33x40xbf16>
  func.return %m : tensor<33x40xbf16>
}
