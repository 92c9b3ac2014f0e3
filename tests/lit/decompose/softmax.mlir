// RUN: tinyopt %s -p decompose | filecheck %s

// softmax(x, dim) = e / broadcast(sum(e, dim)) with e = exp(x - broadcast(max(x, dim))).
// CHECK-LABEL: func.func @softmax(
// CHECK-NEXT: %[[REDUCE_MAX:.*]] = graph.reduce_max %x {dims = array<i64: 1>, keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[BROADCAST:.*]] = graph.broadcast %[[REDUCE_MAX]] : tensor<4x1xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[SUB:.*]] = graph.sub %x, %[[BROADCAST]] : tensor<4x8xf32>
// CHECK-NEXT: %[[EXP:.*]] = graph.exp %[[SUB]] : tensor<4x8xf32>
// CHECK-NEXT: %[[REDUCE_SUM:.*]] = graph.reduce_sum %[[EXP]] {dims = array<i64: 1>, keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[BROADCAST2:.*]] = graph.broadcast %[[REDUCE_SUM]] : tensor<4x1xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %y = graph.div %[[EXP]], %[[BROADCAST2]] : tensor<4x8xf32>
// CHECK-NEXT: func.return %y : tensor<4x8xf32>
func.func @softmax(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = graph.softmax %x {dim = 1 : i64} : tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// Other dims and dtypes decompose the same way, keeping the dtype.
// CHECK-LABEL: func.func @softmax_dim0_bf16(
// CHECK-NEXT: %[[REDUCE_MAX:.*]] = graph.reduce_max %x {dims = array<i64: 0>, keepdim = true} : tensor<4x8xbf16> -> tensor<1x8xbf16>
// CHECK-NEXT: %[[BROADCAST:.*]] = graph.broadcast %[[REDUCE_MAX]] : tensor<1x8xbf16> -> tensor<4x8xbf16>
// CHECK-NEXT: %[[SUB:.*]] = graph.sub %x, %[[BROADCAST]] : tensor<4x8xbf16>
// CHECK-NEXT: %[[EXP:.*]] = graph.exp %[[SUB]] : tensor<4x8xbf16>
// CHECK-NEXT: %[[REDUCE_SUM:.*]] = graph.reduce_sum %[[EXP]] {dims = array<i64: 0>, keepdim = true} : tensor<4x8xbf16> -> tensor<1x8xbf16>
// CHECK-NEXT: %[[BROADCAST2:.*]] = graph.broadcast %[[REDUCE_SUM]] : tensor<1x8xbf16> -> tensor<4x8xbf16>
// CHECK-NEXT: %y = graph.div %[[EXP]], %[[BROADCAST2]] : tensor<4x8xbf16>
// CHECK-NEXT: func.return %y : tensor<4x8xbf16>
func.func @softmax_dim0_bf16(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %y = graph.softmax %x {dim = 0 : i64} : tensor<4x8xbf16>
  func.return %y : tensor<4x8xbf16>
}
