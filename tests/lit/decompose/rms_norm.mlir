// RUN: tinyopt %s -p decompose | filecheck %s

// rms_norm(x, w) = x * broadcast(rsqrt(mean(x * x, -1) + eps)) * broadcast(w).
// CHECK-LABEL: func.func @rms_norm(
// CHECK-NEXT: %[[MUL:.*]] = graph.mul %x, %x : tensor<2x3x8xf16>
// CHECK-NEXT: %[[REDUCE_MEAN:.*]] = graph.reduce_mean %[[MUL]] {dims = array<i64: 2>, keepdim = true} : tensor<2x3x8xf16> -> tensor<2x3x1xf16>
// CHECK-NEXT: %[[CONSTANT:.*]] = graph.constant dense<9.765620e-04> : tensor<1x1x1xf16>
// CHECK-NEXT: %[[EPS:.*]] = graph.broadcast %[[CONSTANT]] : tensor<1x1x1xf16> -> tensor<2x3x1xf16>
// CHECK-NEXT: %[[ADD:.*]] = graph.add %[[REDUCE_MEAN]], %[[EPS]] : tensor<2x3x1xf16>
// CHECK-NEXT: %[[RSQRT:.*]] = graph.rsqrt %[[ADD]] : tensor<2x3x1xf16>
// CHECK-NEXT: %[[BROADCAST:.*]] = graph.broadcast %[[RSQRT]] : tensor<2x3x1xf16> -> tensor<2x3x8xf16>
// CHECK-NEXT: %[[MUL2:.*]] = graph.mul %x, %[[BROADCAST]] : tensor<2x3x8xf16>
// CHECK-NEXT: %[[BROADCAST2:.*]] = graph.broadcast %w : tensor<8xf16> -> tensor<2x3x8xf16>
// CHECK-NEXT: %y = graph.mul %[[MUL2]], %[[BROADCAST2]] : tensor<2x3x8xf16>
// CHECK-NEXT: func.return %y : tensor<2x3x8xf16>
func.func @rms_norm(%x: tensor<2x3x8xf16>, %w: tensor<8xf16>) -> tensor<2x3x8xf16> {
  %y = graph.rms_norm %x, %w {eps = 0.0009765625 : f32} : (tensor<2x3x8xf16>, tensor<8xf16>) -> tensor<2x3x8xf16>
  func.return %y : tensor<2x3x8xf16>
}

// An eps below f16's smallest normal number (2^-14), which f16 would hold as 1.01328e-06: the
// norm is computed in f32, as torch computes it, and its result rounded once to f16.
// CHECK-LABEL: func.func @rms_norm_small_eps(
// CHECK-NEXT: %[[X:.*]] = graph.cast %x : tensor<2x3x8xf16> -> tensor<2x3x8xf32>
// CHECK-NEXT: %[[W:.*]] = graph.cast %w : tensor<8xf16> -> tensor<8xf32>
// CHECK-NEXT: %[[MUL:.*]] = graph.mul %[[X]], %[[X]] : tensor<2x3x8xf32>
// CHECK-NEXT: %[[REDUCE_MEAN:.*]] = graph.reduce_mean %[[MUL]] {dims = array<i64: 2>, keepdim = true} : tensor<2x3x8xf32> -> tensor<2x3x1xf32>
// CHECK-NEXT: %[[CONSTANT:.*]] = graph.constant dense<1.000000e-06> : tensor<1x1x1xf32>
// CHECK-NEXT: %[[EPS:.*]] = graph.broadcast %[[CONSTANT]] : tensor<1x1x1xf32> -> tensor<2x3x1xf32>
// CHECK-NEXT: %[[ADD:.*]] = graph.add %[[REDUCE_MEAN]], %[[EPS]] : tensor<2x3x1xf32>
// CHECK-NEXT: %[[RSQRT:.*]] = graph.rsqrt %[[ADD]] : tensor<2x3x1xf32>
// CHECK-NEXT: %[[BROADCAST:.*]] = graph.broadcast %[[RSQRT]] : tensor<2x3x1xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT: %[[MUL2:.*]] = graph.mul %[[X]], %[[BROADCAST]] : tensor<2x3x8xf32>
// CHECK-NEXT: %[[BROADCAST2:.*]] = graph.broadcast %[[W]] : tensor<8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT: %[[Y:.*]] = graph.mul %[[MUL2]], %[[BROADCAST2]] : tensor<2x3x8xf32>
// CHECK-NEXT: %y = graph.cast %[[Y]] : tensor<2x3x8xf32> -> tensor<2x3x8xf16>
// CHECK-NEXT: func.return %y : tensor<2x3x8xf16>
func.func @rms_norm_small_eps(%x: tensor<2x3x8xf16>, %w: tensor<8xf16>) -> tensor<2x3x8xf16> {
  %y = graph.rms_norm %x, %w {eps = 1.0e-06 : f32} : (tensor<2x3x8xf16>, tensor<8xf16>) -> tensor<2x3x8xf16>
  func.return %y : tensor<2x3x8xf16>
}
