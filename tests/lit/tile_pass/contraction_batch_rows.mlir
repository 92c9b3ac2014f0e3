// RUN: tinyopt %s -p 'fuse,plan' | filecheck %s

// Planning merges a contraction's batch loop into its rows when B is shared by the batch,
// even where the epilogue reads the batch variable alone (a per-sequence bias, ViT's
// residual recomputed at a shifted row): one GEMM of B·M rows, `b` read back as `row / M`.
// Two batch loops always merge (BERT's scores with a [B, S] key mask), and a unit dim that
// every access indexes at 0 is dropped first.

// CHECK: loop.kernel @shared_b_0(%{{.*}}: memref<10x8xf32>, %{{.*}}: memref<8x4xf32>, %{{.*}}: memref<2x4xf32>, %{{.*}}: memref<10x4xf32>) attributes {plan = #tile.plan<contraction
// CHECK: arith.divui %{{.*}}, %{{.*}} : index
func.func @shared_b(%x: tensor<2x5x8xf32>, %w: tensor<8x4xf32>, %bias: tensor<2x1x4xf32>) -> tensor<2x5x4xf32> {
  %wb = graph.broadcast %w : tensor<8x4xf32> -> tensor<2x8x4xf32>
  %y = graph.matmul %x, %wb : (tensor<2x5x8xf32>, tensor<2x8x4xf32>) -> tensor<2x5x4xf32>
  %bb = graph.broadcast %bias : tensor<2x1x4xf32> -> tensor<2x5x4xf32>
  %r = graph.add %y, %bb : tensor<2x5x4xf32>
  func.return %r : tensor<2x5x4xf32>
}

// B indexed by the batch: a batched GEMM stays batched.
// CHECK: loop.kernel @batched_0(%{{.*}}: memref<2x5x8xf32>, %{{.*}}: memref<2x8x4xf32>, %{{.*}}: memref<2x4xf32>, %{{.*}}: memref<2x5x4xf32>) attributes {plan = #tile.plan<contraction
func.func @batched(%x: tensor<2x5x8xf32>, %w: tensor<2x8x4xf32>, %bias: tensor<2x1x4xf32>) -> tensor<2x5x4xf32> {
  %y = graph.matmul %x, %w : (tensor<2x5x8xf32>, tensor<2x8x4xf32>) -> tensor<2x5x4xf32>
  %bb = graph.broadcast %bias : tensor<2x1x4xf32> -> tensor<2x5x4xf32>
  %r = graph.add %y, %bb : tensor<2x5x4xf32>
  func.return %r : tensor<2x5x4xf32>
}

// GQA keys read at a batch index divided down to the KV head: the index arithmetic moves
// into the K loop, so the GEMM rules take the kernel (not merged with the rows: the keys vary
// with the batch).
// CHECK: loop.kernel @gqa_0(%{{.*}}: memref<12x40x16xf32>, %{{.*}}: memref<2x2x40x16xf32>, %{{.*}}: memref<12x40x40xf32>) attributes {plan = #tile.plan<contraction
// CHECK: loop.reduce
// CHECK-NEXT: arith.constant 3 : index
// CHECK-NEXT: arith.divui
func.func @gqa(%q: tensor<12x40x16xf32>, %k: tensor<2x2x40x16xf32>) -> tensor<12x40x40xf32> {
  %k5 = graph.reshape %k : tensor<2x2x40x16xf32> -> tensor<2x2x1x40x16xf32>
  %kb = graph.broadcast %k5 : tensor<2x2x1x40x16xf32> -> tensor<2x2x3x40x16xf32>
  %kr = graph.reshape %kb : tensor<2x2x3x40x16xf32> -> tensor<12x40x16xf32>
  %kt = graph.transpose %kr {perm = array<i64: 0, 2, 1>} : tensor<12x40x16xf32> -> tensor<12x16x40xf32>
  %s = graph.matmul %q, %kt : (tensor<12x40x16xf32>, tensor<12x16x40xf32>) -> tensor<12x40x40xf32>
  func.return %s : tensor<12x40x40xf32>
}
