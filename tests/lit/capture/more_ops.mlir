// RUN: tinyopt capture %S/more_ops.py:model > %t.mlir
// RUN: filecheck %s < %t.mlir

// How max over a dim, einsum, norms without affine terms, glu, prelu, softshrink, logsigmoid
// and cosine similarity are captured (tests/lit/capture/more_ops.py; frontends/torch_fx.py).

// max(x, -1): the first index of the maximum (graph.argmax) and the maximum.
// CHECK:      graph.argmax %x {dim = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x4xi64>
// CHECK-NEXT: graph.reduce_max %x {dims = array<i64: 2>} : tensor<2x4x8xf32> -> tensor<2x4xf32>

// einsum bij,bkj->bik: j is contracted, b a batch dim: one batched matmul.
// CHECK-NEXT: %[[YT:.*]] = graph.transpose %y {perm = array<i64: 0, 2, 1>}
// CHECK-NEXT: %einsum = graph.matmul %x, %[[YT]] : (tensor<2x4x8xf32>, tensor<2x8x4xf32>) -> tensor<2x4x4xf32>

// layer_norm over the last two dims, no weight or bias: merged into one dim of 32, weight 1
// and bias 0.
// CHECK:      graph.layer_norm %{{.*}} : (tensor<2x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<2x32xf32>

// instance norm: each sample's channel over its own elements (a group per channel).
// CHECK:      graph.reduce_mean %y {dims = array<i64: 2>, keepdim = true}
// CHECK:      %instance_norm = graph.mul

// glu: the first half times the sigmoid of the second.
// CHECK:      %[[A:.*]] = graph.slice %x {dim = 2 : i64, start = 0 : i64, step = 1 : i64}
// CHECK-NEXT: %[[B:.*]] = graph.slice %x {dim = 2 : i64, start = 4 : i64, step = 1 : i64}
// CHECK-NEXT: %[[S:.*]] = graph.sigmoid %[[B]]
// CHECK-NEXT: %glu = graph.mul %[[A]], %[[S]]

// prelu: x > 0 selects x, else the channel's weight times x.
// CHECK:      graph.reshape %p_prelu_weight : tensor<4xf32> -> tensor<1x4x1xf32>
// CHECK:      %prelu = graph.select

// softshrink: x > l ? x - l : x < -l ? x + l : x * 0.
// CHECK:      %softshrink = graph.select

// logsigmoid: min(x, 0) - log1p(exp(-|x|)).
// CHECK:      %[[ABS:.*]] = graph.abs %x
// CHECK-NEXT: %[[NEG:.*]] = graph.neg %[[ABS]]
// CHECK-NEXT: %[[EXP:.*]] = graph.exp %[[NEG]]
// CHECK-NEXT: %[[TAIL:.*]] = graph.log1p %[[EXP]]
// CHECK:      %log_sigmoid = graph.sub %{{.*}}, %[[TAIL]]

// cosine similarity: each vector divided by max(its norm, eps), the products summed.
// CHECK:      graph.sqrt
// CHECK:      %[[UNIT:.*]] = graph.div %x,
// CHECK:      %cosine_similarity = graph.reduce_sum %{{.*}} {dims = array<i64: 2>} : tensor<2x4x8xf32> -> tensor<2x4xf32>
