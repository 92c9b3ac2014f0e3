// RUN: tinyopt capture %S/math_ops.py:model > %t.mlir
// RUN: filecheck %s < %t.mlir

// How atan2, fmod, remainder, copysign, rounding, other log bases, threshold, hardshrink, vector norms,
// a 3-D convolution, outer and logit are captured (tests/lit/capture/math_ops.py;
// frontends/torch_fx.py).

// atan2, fmod and % are graph ops of their own (C's fmod; remainder with the divisor's sign).
// CHECK:      %atan2 = graph.atan2 %x, %y : tensor<2x8xf32>
// CHECK:      %fmod = graph.fmod %x, %{{.*}} : tensor<2x8xf32>
// CHECK:      %remainder = graph.remainder %x, %{{.*}} : tensor<2x8xf32>

// round (halves to even) and floor, graph ops too; log2 is log times 1 / ln 2, exp2 exp of
// x times ln 2.
// CHECK:      %round = graph.round %x
// CHECK-NEXT: %floor = graph.floor %y
// CHECK:      %[[LOG:.*]] = graph.log %add_3
// CHECK-NEXT: %log2 = graph.mul %[[LOG]],
// CHECK:      %exp2 = graph.exp

// threshold: x <= 0.1 selects 2.0; hardshrink: -l <= y <= l selects 0.
// CHECK:      %[[LOW:.*]] = graph.compare %x, %{{.*}} {predicate = "le"}
// CHECK:      %threshold = graph.select %[[LOW]], %{{.*}}, %x
// CHECK:      %hardshrink = graph.select

// vector norms of order 1 and inf: sums and maxima of |x|.
// CHECK:      %[[ABS:.*]] = graph.abs %x
// CHECK-NEXT: %linalg_vector_norm = graph.reduce_sum %[[ABS]] {dims = array<i64: 1>}
// CHECK:      %linalg_vector_norm_1 = graph.reduce_max %{{.*}} {dims = array<i64: 1>}

// Conv3d with a (1, 2, 2) window: the four window offsets' slices over three spatial dims,
// then one matmul with the flattened weight.
// CHECK:      graph.concat %{{.*}} {dim = 2 : i64} : ({{.*}}) -> tensor<1x2x4x2x1x1xf32>
// CHECK:      graph.matmul %{{.*}} : (tensor<1x1x2x8xf32>, tensor<1x1x8x2xf32>) -> tensor<1x1x2x2xf32>
// CHECK:      %conv3d = graph.add

// outer: a column times a row, broadcast; logit: log(z / (1 - z)).
// CHECK:      %outer = graph.mul %{{.*}} : tensor<8x8xf32>
// CHECK:      %[[ODDS:.*]] = graph.div %sigmoid,
// CHECK-NEXT: %logit = graph.log %[[ODDS]]

// isinf: |x| compared with infinity; isfinite: x - x compared with 0 (NaN for ±inf and NaN);
// mv: a matmul by the vector made a column.
// CHECK:      %[[ABS:.*]] = graph.abs %x
// CHECK:      graph.constant dense<0x7f800000>
// CHECK:      %isinf = graph.compare %[[ABS]], %{{.*}} {predicate = "eq"}
// CHECK:      %[[D:.*]] = graph.sub %y, %y
// CHECK:      %isfinite = graph.compare %[[D]], %{{.*}} {predicate = "eq"}
// CHECK:      %[[COL:.*]] = graph.matmul %x, %{{.*}} : (tensor<2x8xf32>, tensor<8x1xf32>) -> tensor<2x1xf32>
// CHECK-NEXT: %mv = graph.reshape %[[COL]] : tensor<2x1xf32> -> tensor<2xf32>

// weight norm: v · g / ‖v‖, the norm over every dim but dim 0 (the output rows).
// CHECK:      %[[SQ:.*]] = graph.mul %[[V:p_normed_parametrizations_weight_original1]], %[[V]]
// CHECK-NEXT: %[[SUM:.*]] = graph.reduce_sum %[[SQ]] {dims = array<i64: 1>, keepdim = true}
// CHECK-NEXT: %[[NORM:.*]] = graph.sqrt %[[SUM]]
// CHECK:      %_weight_norm = graph.mul %[[V]], %{{.*}} : tensor<3x8xf32>
// CHECK-NEXT: %linear = graph.linear %x, %_weight_norm

// copysign: a graph op of its own, reading the sign bit of y (−0.0 and a negative NaN too).
// CHECK:      %copysign = graph.copysign %x, %y : tensor<2x8xf32>
