// RUN: tinyopt %s -p decompose | filecheck %s

// attention(q, k, v) = softmax(q k^T * scale + mask) v as batched matmuls over B*H.
// CHECK-LABEL: func.func @attention(
// CHECK-NEXT: %[[RESHAPE:.*]] = graph.reshape %q : tensor<1x2x4x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[RESHAPE2:.*]] = graph.reshape %k : tensor<1x2x4x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[RESHAPE3:.*]] = graph.reshape %v : tensor<1x2x4x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[TRANSPOSE:.*]] = graph.transpose %[[RESHAPE2]] {perm = array<i64: 0, 2, 1>} : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
// CHECK-NEXT: %[[MATMUL:.*]] = graph.matmul %[[RESHAPE]], %[[TRANSPOSE]] : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[CONSTANT:.*]] = graph.constant dense<1.250000e-01> : tensor<1x1x1xf32>
// CHECK-NEXT: %[[SCALE:.*]] = graph.broadcast %[[CONSTANT]] : tensor<1x1x1xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[MUL:.*]] = graph.mul %[[MATMUL]], %[[SCALE]] : tensor<2x4x4xf32>
// CHECK-NEXT: %[[REDUCE_MAX:.*]] = graph.reduce_max %[[MUL]] {dims = array<i64: 2>, keepdim = true} : tensor<2x4x4xf32> -> tensor<2x4x1xf32>
// CHECK-NEXT: %[[BROADCAST:.*]] = graph.broadcast %[[REDUCE_MAX]] : tensor<2x4x1xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[SUB:.*]] = graph.sub %[[MUL]], %[[BROADCAST]] : tensor<2x4x4xf32>
// CHECK-NEXT: %[[EXP:.*]] = graph.exp %[[SUB]] : tensor<2x4x4xf32>
// CHECK-NEXT: %[[REDUCE_SUM:.*]] = graph.reduce_sum %[[EXP]] {dims = array<i64: 2>, keepdim = true} : tensor<2x4x4xf32> -> tensor<2x4x1xf32>
// CHECK-NEXT: %[[BROADCAST2:.*]] = graph.broadcast %[[REDUCE_SUM]] : tensor<2x4x1xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[DIV:.*]] = graph.div %[[EXP]], %[[BROADCAST2]] : tensor<2x4x4xf32>
// CHECK-NEXT: %[[MATMUL2:.*]] = graph.matmul %[[DIV]], %[[RESHAPE3]] : (tensor<2x4x4xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %o = graph.reshape %[[MATMUL2]] : tensor<2x4x8xf32> -> tensor<1x2x4x8xf32>
// CHECK-NEXT: func.return %o : tensor<1x2x4x8xf32>
func.func @attention(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>, %v: tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32> {
  %o = graph.attention %q, %k, %v {scale = 0.125 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
  func.return %o : tensor<1x2x4x8xf32>
}

// The causal mask is the dtype's lowest finite value above the diagonal, built from two
// one-element constants by index maps (row a is the window q[3-a : 7-a] of
// q = [0]*4 ++ [lowest]*4): no constant has the sequence's length.
// CHECK-LABEL: func.func @causal_attention(
// CHECK-NEXT: %[[RESHAPE:.*]] = graph.reshape %q : tensor<1x2x4x8xf16> -> tensor<2x4x8xf16>
// CHECK-NEXT: %[[RESHAPE2:.*]] = graph.reshape %k : tensor<1x2x4x8xf16> -> tensor<2x4x8xf16>
// CHECK-NEXT: %[[RESHAPE3:.*]] = graph.reshape %v : tensor<1x2x4x8xf16> -> tensor<2x4x8xf16>
// CHECK-NEXT: %[[TRANSPOSE:.*]] = graph.transpose %[[RESHAPE2]] {perm = array<i64: 0, 2, 1>} : tensor<2x4x8xf16> -> tensor<2x8x4xf16>
// CHECK-NEXT: %[[MATMUL:.*]] = graph.matmul %[[RESHAPE]], %[[TRANSPOSE]] : (tensor<2x4x8xf16>, tensor<2x8x4xf16>) -> tensor<2x4x4xf16>
// CHECK-NEXT: %[[CONSTANT:.*]] = graph.constant dense<1.250000e-01> : tensor<1x1x1xf16>
// CHECK-NEXT: %[[SCALE:.*]] = graph.broadcast %[[CONSTANT]] : tensor<1x1x1xf16> -> tensor<2x4x4xf16>
// CHECK-NEXT: %[[MUL:.*]] = graph.mul %[[MATMUL]], %[[SCALE]] : tensor<2x4x4xf16>
// CHECK-NEXT: %[[ZERO:.*]] = graph.constant dense<0.000000e+00> : tensor<1xf16>
// CHECK-NEXT: %[[ZEROS:.*]] = graph.broadcast %[[ZERO]] : tensor<1xf16> -> tensor<4xf16>
// CHECK-NEXT: %[[LOW:.*]] = graph.constant dense<-6.550400e+04> : tensor<1xf16>
// CHECK-NEXT: %[[LOWEST:.*]] = graph.broadcast %[[LOW]] : tensor<1xf16> -> tensor<4xf16>
// CHECK-NEXT: %[[Q:.*]] = graph.concat %[[ZEROS]], %[[LOWEST]] {dim = 0 : i64} : (tensor<4xf16>, tensor<4xf16>) -> tensor<8xf16>
// CHECK-NEXT: %[[ROWS:.*]] = graph.broadcast %[[Q]] : tensor<8xf16> -> tensor<4x8xf16>
// CHECK-NEXT: %[[FLAT:.*]] = graph.reshape %[[ROWS]] : tensor<4x8xf16> -> tensor<32xf16>
// CHECK-NEXT: %[[SHIFTED:.*]] = graph.slice %[[FLAT]] {dim = 0 : i64, start = 0 : i64, step = 1 : i64} : tensor<32xf16> -> tensor<28xf16>
// CHECK-NEXT: %[[WINDOWS:.*]] = graph.reshape %[[SHIFTED]] : tensor<28xf16> -> tensor<4x7xf16>
// CHECK-NEXT: %[[MASK:.*]] = graph.slice %[[WINDOWS]] {dim = 1 : i64, start = 3 : i64, step = 1 : i64} : tensor<4x7xf16> -> tensor<4x4xf16>
// CHECK-NEXT: %[[BROADCAST:.*]] = graph.broadcast %[[MASK]] : tensor<4x4xf16> -> tensor<2x4x4xf16>
// CHECK-NEXT: %[[ADD:.*]] = graph.add %[[MUL]], %[[BROADCAST]] : tensor<2x4x4xf16>
// CHECK-NEXT: %[[REDUCE_MAX:.*]] = graph.reduce_max %[[ADD]] {dims = array<i64: 2>, keepdim = true} : tensor<2x4x4xf16> -> tensor<2x4x1xf16>
// CHECK-NEXT: %[[BROADCAST2:.*]] = graph.broadcast %[[REDUCE_MAX]] : tensor<2x4x1xf16> -> tensor<2x4x4xf16>
// CHECK-NEXT: %[[SUB:.*]] = graph.sub %[[ADD]], %[[BROADCAST2]] : tensor<2x4x4xf16>
// CHECK-NEXT: %[[EXP:.*]] = graph.exp %[[SUB]] : tensor<2x4x4xf16>
// CHECK-NEXT: %[[REDUCE_SUM:.*]] = graph.reduce_sum %[[EXP]] {dims = array<i64: 2>, keepdim = true} : tensor<2x4x4xf16> -> tensor<2x4x1xf16>
// CHECK-NEXT: %[[BROADCAST3:.*]] = graph.broadcast %[[REDUCE_SUM]] : tensor<2x4x1xf16> -> tensor<2x4x4xf16>
// CHECK-NEXT: %[[DIV:.*]] = graph.div %[[EXP]], %[[BROADCAST3]] : tensor<2x4x4xf16>
// CHECK-NEXT: %[[MATMUL2:.*]] = graph.matmul %[[DIV]], %[[RESHAPE3]] : (tensor<2x4x4xf16>, tensor<2x4x8xf16>) -> tensor<2x4x8xf16>
// CHECK-NEXT: %o = graph.reshape %[[MATMUL2]] : tensor<2x4x8xf16> -> tensor<1x2x4x8xf16>
// CHECK-NEXT: func.return %o : tensor<1x2x4x8xf16>
func.func @causal_attention(%q: tensor<1x2x4x8xf16>, %k: tensor<1x2x4x8xf16>, %v: tensor<1x2x4x8xf16>) -> tensor<1x2x4x8xf16> {
  %o = graph.attention %q, %k, %v {causal = true, scale = 0.125 : f32} : (tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>, tensor<1x2x4x8xf16>) -> tensor<1x2x4x8xf16>
  func.return %o : tensor<1x2x4x8xf16>
}
