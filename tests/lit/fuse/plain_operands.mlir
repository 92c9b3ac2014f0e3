// RUN: tinyopt %s -p 'fuse{debug=true}' 2>&1 | filecheck %s
// RUN: tinyopt %s -p 'fuse,plan' | filecheck %s --check-prefix=PLAN

// A matmul operand read through a division of its row index (a reshape merging dims into
// the rows, a convolution's windows) gets a buffer of its own: the GEMM rules read plain
// tiles, and would otherwise leave the matmul to a scalar rule. A division of K (heads and
// head dims) or of a batch index (GQA's groups) stays inlined.

func.func @merged_rows(%x: tensor<2x3x16xbf16>, %w: tensor<16x8xbf16>) -> tensor<6x8xbf16> {
  %x2 = graph.reshape %x : tensor<2x3x16xbf16> -> tensor<6x16xbf16>
  %y = graph.matmul %x2, %w : (tensor<6x16xbf16>, tensor<16x8xbf16>) -> tensor<6x8xbf16>
  func.return %y : tensor<6x8xbf16>
}
// CHECK: fuse: %x2 (graph.reshape) gets a buffer: a matmul operand that reads its input through a division of its row or column index, in the kernel of %y (graph.matmul)
// CHECK: fuse: @merged_rows_0 computes %x2 (graph.reshape)
// CHECK: fuse: @merged_rows_1 computes %y (graph.matmul)
// PLAN: loop.kernel @merged_rows_1({{.*}}) attributes {plan = #tile.plan<wgmma

func.func @split_k(%x: tensor<8x2x16xbf16>, %w: tensor<32x8xbf16>) -> tensor<8x8xbf16> {
  %xk = graph.reshape %x : tensor<8x2x16xbf16> -> tensor<8x32xbf16>
  %yk = graph.matmul %xk, %w : (tensor<8x32xbf16>, tensor<32x8xbf16>) -> tensor<8x8xbf16>
  func.return %yk : tensor<8x8xbf16>
}
// CHECK-NOT: in the kernel of %yk
// CHECK: fuse: @split_k_0 computes %yk (graph.matmul)

// A batched matmul operand whose index mixes a batch variable with another (v read as heads
// out of a [B, T, H*D] projection: [b, k, h*4 + n]) gets a buffer as the matmul reads it:
// planning can then merge the batch loops into the one batch dim the GEMM rules take, and the
// attention rules load its rows with cp.async.

func.func @heads(%p: tensor<2x2x8x8xf32>, %x: tensor<2x8x8xf32>) -> tensor<2x2x8x4xf32> {
  %s = graph.reshape %x : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %v = graph.transpose %s {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x2x4xf32> -> tensor<2x2x8x4xf32>
  %o = graph.matmul %p, %v : (tensor<2x2x8x8xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x8x4xf32>
  func.return %o : tensor<2x2x8x4xf32>
}
// CHECK: fuse: %v (graph.transpose) gets a buffer: a matmul operand whose index mixes a batch variable with another, in the kernel of %o (graph.matmul)
// PLAN: loop.kernel @heads_1({{.*}}) attributes {plan = #tile.plan<contraction
