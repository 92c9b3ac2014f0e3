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

// Rank-3 x goes through 2-D: reshape, matmul, bias, reshape back.
// CHECK-LABEL: func.func @linear_rank3(
// CHECK-NEXT: %[[RESHAPE:.*]] = graph.reshape %x : tensor<2x3x8xbf16> -> tensor<6x8xbf16>
// CHECK-NEXT: %[[TRANSPOSE:.*]] = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<16x8xbf16> -> tensor<8x16xbf16>
// CHECK-NEXT: %[[MATMUL:.*]] = graph.matmul %[[RESHAPE]], %[[TRANSPOSE]] : (tensor<6x8xbf16>, tensor<8x16xbf16>) -> tensor<6x16xbf16>
// CHECK-NEXT: %[[BROADCAST:.*]] = graph.broadcast %b : tensor<16xbf16> -> tensor<6x16xbf16>
// CHECK-NEXT: %[[ADD:.*]] = graph.add %[[MATMUL]], %[[BROADCAST]] : tensor<6x16xbf16>
// CHECK-NEXT: %y = graph.reshape %[[ADD]] : tensor<6x16xbf16> -> tensor<2x3x16xbf16>
// CHECK-NEXT: func.return %y : tensor<2x3x16xbf16>
func.func @linear_rank3(%x: tensor<2x3x8xbf16>, %w: tensor<16x8xbf16>, %b: tensor<16xbf16>) -> tensor<2x3x16xbf16> {
  %y = graph.linear %x, %w, %b : (tensor<2x3x8xbf16>, tensor<16x8xbf16>, tensor<16xbf16>) -> tensor<2x3x16xbf16>
  func.return %y : tensor<2x3x16xbf16>
}
