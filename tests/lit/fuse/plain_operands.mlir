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
  %x2 = graph.reshape %x : tensor<8x2x16xbf16> -> tensor<8x32xbf16>
  %y = graph.matmul %x2, %w : (tensor<8x32xbf16>, tensor<32x8xbf16>) -> tensor<8x8xbf16>
  func.return %y : tensor<8x8xbf16>
}
// CHECK: fuse: @split_k_0 computes %y (graph.matmul)
// CHECK-NOT: gets a buffer
