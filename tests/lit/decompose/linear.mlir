// RUN: tinyopt %s -p decompose | filecheck %s

// linear(x, w, b) = matmul(x, transpose(w)) + broadcast(b).
// CHECK-LABEL: func.func @linear(
// CHECK-NEXT: %[[TRANSPOSE:.*]] = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %[[MATMUL:.*]] = graph.matmul %x, %[[TRANSPOSE]] : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: %[[BROADCAST:.*]] = graph.broadcast %b : tensor<16xf32> -> tensor<4x16xf32>
// CHECK-NEXT: %y = graph.add %[[MATMUL]], %[[BROADCAST]] : tensor<4x16xf32>
// CHECK-NEXT: func.return %y : tensor<4x16xf32>
func.func @linear(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %y = graph.linear %x, %w, %b : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  func.return %y : tensor<4x16xf32>
}

// Without bias there is no add.
// CHECK-LABEL: func.func @linear_no_bias(
// CHECK-NEXT: %[[TRANSPOSE:.*]] = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
// CHECK-NEXT: %y = graph.matmul %x, %[[TRANSPOSE]] : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: func.return %y : tensor<4x16xf32>
func.func @linear_no_bias(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %y = graph.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  func.return %y : tensor<4x16xf32>
}

// Rank-3 x is a batched matmul against the weight broadcast over the batch (no reshape):
// `fuse` collapses it into one GEMM over all rows (tests/lit/fuse/batched_linear.mlir).
// CHECK-LABEL: func.func @linear_rank3(
// CHECK-NEXT: %[[TRANSPOSE:.*]] = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<16x8xbf16> -> tensor<8x16xbf16>
// CHECK-NEXT: %[[WB:.*]] = graph.broadcast %[[TRANSPOSE]] : tensor<8x16xbf16> -> tensor<2x8x16xbf16>
// CHECK-NEXT: %[[MATMUL:.*]] = graph.matmul %x, %[[WB]] : (tensor<2x3x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x3x16xbf16>
// CHECK-NEXT: %[[BROADCAST:.*]] = graph.broadcast %b : tensor<16xbf16> -> tensor<2x3x16xbf16>
// CHECK-NEXT: %y = graph.add %[[MATMUL]], %[[BROADCAST]] : tensor<2x3x16xbf16>
// CHECK-NEXT: func.return %y : tensor<2x3x16xbf16>
func.func @linear_rank3(%x: tensor<2x3x8xbf16>, %w: tensor<16x8xbf16>, %b: tensor<16xbf16>) -> tensor<2x3x16xbf16> {
  %y = graph.linear %x, %w, %b : (tensor<2x3x8xbf16>, tensor<16x8xbf16>, tensor<16xbf16>) -> tensor<2x3x16xbf16>
  func.return %y : tensor<2x3x16xbf16>
}
