// RUN: tinyopt %s -p decompose | filecheck %s

// layer_norm(x, w, b) = c * broadcast(rsqrt(mean(c * c, -1) + eps)) * w + b, c = x - mean(x).
// CHECK-LABEL: func.func @layer_norm(
// CHECK-NEXT: %[[REDUCE_MEAN:.*]] = graph.reduce_mean %x {dims = array<i64: 1>, keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[BROADCAST:.*]] = graph.broadcast %[[REDUCE_MEAN]] : tensor<4x1xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[SUB:.*]] = graph.sub %x, %[[BROADCAST]] : tensor<4x8xf32>
// CHECK-NEXT: %[[MUL:.*]] = graph.mul %[[SUB]], %[[SUB]] : tensor<4x8xf32>
// CHECK-NEXT: %[[REDUCE_MEAN2:.*]] = graph.reduce_mean %[[MUL]] {dims = array<i64: 1>, keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[CONSTANT:.*]] = graph.constant dense<1.000000e-05> : tensor<1x1xf32>
// CHECK-NEXT: %[[EPS:.*]] = graph.broadcast %[[CONSTANT]] : tensor<1x1xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[ADD:.*]] = graph.add %[[REDUCE_MEAN2]], %[[EPS]] : tensor<4x1xf32>
// CHECK-NEXT: %[[RSQRT:.*]] = graph.rsqrt %[[ADD]] : tensor<4x1xf32>
// CHECK-NEXT: %[[BROADCAST2:.*]] = graph.broadcast %[[RSQRT]] : tensor<4x1xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[MUL2:.*]] = graph.mul %[[SUB]], %[[BROADCAST2]] : tensor<4x8xf32>
// CHECK-NEXT: %[[BROADCAST3:.*]] = graph.broadcast %w : tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[MUL3:.*]] = graph.mul %[[MUL2]], %[[BROADCAST3]] : tensor<4x8xf32>
// CHECK-NEXT: %[[BROADCAST4:.*]] = graph.broadcast %b : tensor<8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %y = graph.add %[[MUL3]], %[[BROADCAST4]] : tensor<4x8xf32>
// CHECK-NEXT: func.return %y : tensor<4x8xf32>
func.func @layer_norm(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %y = graph.layer_norm %x, %w, %b {eps = 1.0e-05 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
