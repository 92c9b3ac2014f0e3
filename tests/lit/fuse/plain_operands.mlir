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

// Keys transposed for `q @ kᵀ` (GPT-2's `k.transpose(-2, -1)` after the head split) get a
// buffer below the last swap of the two innermost dims: `[B, H, S, D]`, rows of D contiguous,
// which the GEMM and attention rules read either way; stored as read (`[B, H, D, S]`) the
// attention rules loaded the keys one element at a time.

func.func @keys(%q: tensor<2x2x8x4xf32>, %x: tensor<2x8x8xf32>) -> tensor<2x2x8x8xf32> {
  %s = graph.reshape %x : tensor<2x8x8xf32> -> tensor<2x8x2x4xf32>
  %kh = graph.transpose %s {perm = array<i64: 0, 2, 1, 3>} : tensor<2x8x2x4xf32> -> tensor<2x2x8x4xf32>
  %kt = graph.transpose %kh {perm = array<i64: 0, 1, 3, 2>} : tensor<2x2x8x4xf32> -> tensor<2x2x4x8xf32>
  %a = graph.matmul %q, %kt : (tensor<2x2x8x4xf32>, tensor<2x2x4x8xf32>) -> tensor<2x2x8x8xf32>
  func.return %a : tensor<2x2x8x8xf32>
}
// CHECK: fuse: %kh (graph.transpose) gets a buffer: a matmul operand whose index mixes a batch variable with another, in the kernel of %a (graph.matmul)
// CHECK: fuse: @keys_0 computes %kh (graph.transpose)
// PLAN: loop.kernel @keys_1({{.*}}) attributes {plan = #tile.plan<contraction

// Scores with a `[B, S]` key mask (BERT's padding mask): the epilogue reads the batch
// variable alone, so planning merges the two batch loops into one and reads b back as
// `z / H`; the GEMM rules take the kernel (it went to the row-reduction rule before).

func.func @masked(%q: tensor<2x3x8x4xf32>, %k: tensor<2x3x8x4xf32>, %mask: tensor<2x8xf32>) -> tensor<2x3x8x8xf32> {
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<2x3x8x4xf32> -> tensor<2x3x4x8xf32>
  %m = graph.matmul %q, %kt : (tensor<2x3x8x4xf32>, tensor<2x3x4x8xf32>) -> tensor<2x3x8x8xf32>
  %r = graph.reshape %mask : tensor<2x8xf32> -> tensor<2x1x1x8xf32>
  %b = graph.broadcast %r : tensor<2x1x1x8xf32> -> tensor<2x3x8x8xf32>
  %y = graph.add %m, %b : tensor<2x3x8x8xf32>
  func.return %y : tensor<2x3x8x8xf32>
}
// PLAN: loop.kernel @masked_0(%{{.*}}: memref<6x8x4xf32>, %{{.*}}: memref<6x8x4xf32>, %{{.*}}: memref<2x8xf32>, %{{.*}}: memref<6x8x8xf32>) attributes {plan = #tile.plan<contraction
