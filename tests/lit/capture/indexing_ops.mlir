// RUN: tinyopt capture %S/indexing_ops.py:model > %t.mlir
// RUN: filecheck %s < %t.mlir

// How writes into a tensor the module made, gather and scatter along a dim, one_hot, unfold,
// diff and nan_to_num are captured (tests/lit/capture/indexing_ops.py; frontends/torch_fx.py).
// The written values (0.5, -1.0) are torch's lifted constants: 0-d arguments after x and ids.
// CHECK:      func.func @forward(%x: tensor<2x8xf32>, %ids: tensor<2x3xi64>, %c_lifted_tensor: tensor<f32>, %c_lifted_tensor_1: tensor<f32>)

// written[:, 0] = 0.5 (a select_scatter once functional): the value, then x's other columns.
// CHECK:      %[[RIGHT:.*]] = graph.slice %x {dim = 1 : i64, start = 1 : i64, step = 1 : i64} : tensor<2x8xf32> -> tensor<2x7xf32>
// CHECK-NEXT: %select_scatter = graph.concat %{{.*}}, %[[RIGHT]] {dim = 1 : i64}

// written[x > 1] = -1.0 (an index_put with one boolean mask): a select.
// CHECK:      %gt = graph.compare %x,
// CHECK:      %index_put = graph.select %gt, %{{.*}}, %select_scatter

// gather(x, 1, ids): for each index entry, a masked maximum over x's row, the others −inf
// (the entry compared with the column number, an index expression; a masked sum would turn a
// picked −0.0 into +0.0).
// CHECK:      %[[COLUMN:.*]] = graph.iota {dim = 2 : i64} : tensor<2x3x8xf32>
// CHECK:      %[[HIT:.*]] = graph.compare %{{.*}}, %[[COLUMN]] {predicate = "eq"} : tensor<2x3x8xf32> -> tensor<2x3x8xi1>
// CHECK:      graph.select %[[HIT]],
// CHECK-NEXT: %gather = graph.reduce_max %{{.*}} {dims = array<i64: 2>} : tensor<2x3x8xf32> -> tensor<2x3xf32>

// scatter_add: for each position, the sum of the entries whose index names it, or -0.0 where
// only -0.0 entries name it (x + -0.0 keeps x's sign, as torch's adds one by one).
// CHECK:      %[[POSITION:.*]] = graph.iota {dim = 1 : i64} : tensor<2x8x3xf32>
// CHECK-NEXT: graph.compare %{{.*}}, %[[POSITION]] {predicate = "eq"}
// CHECK:      %[[ADDED:.*]] = graph.reduce_sum %{{.*}} {dims = array<i64: 2>} : tensor<2x8x3xf32> -> tensor<2x8xf32>
// CHECK:      %[[OTHER:.*]] = graph.reduce_max %{{.*}} {dims = array<i64: 2>} : tensor<2x8x3xf32> -> tensor<2x8xf32>
// CHECK:      %[[NOT_ZERO:.*]] = graph.compare %[[OTHER]], %{{.*}} {predicate = "gt"}
// CHECK:      %[[SIGNED:.*]] = graph.select %[[NOT_ZERO]], %[[ADDED]], %{{.*}}
// CHECK-NEXT: %scatter_add = graph.add %new_zeros, %[[SIGNED]]

// one_hot: the ids compared with the class number.
// CHECK:      %one_hot = graph.cast %{{.*}} : tensor<2x3x8xi1> -> tensor<2x3x8xf32>

// unfold (2x2 windows of [1, 2, 2, 4]): the four window offsets' slices, stacked and moved to
// [N, C*KH*KW, L].
// CHECK:      graph.concat %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {dim = 2 : i64} : ({{.*}}) -> tensor<1x2x4x1x3xf32>
// CHECK:      %im2col = graph.transpose %{{.*}} {perm = array<i64: 0, 2, 1>} : tensor<1x3x8xf32> -> tensor<1x8x3xf32>

// diff: x[1:] - x[:-1].
// CHECK:      %[[LATER:.*]] = graph.slice %x {dim = 1 : i64, start = 1 : i64, step = 1 : i64}
// CHECK-NEXT: %[[EARLIER:.*]] = graph.slice %x {dim = 1 : i64, start = 0 : i64, step = 1 : i64}
// CHECK-NEXT: %diff = graph.sub %[[LATER]], %[[EARLIER]]

// nan_to_num: NaN (x != x), then +inf and -inf, each replaced by a select.
// CHECK:      %[[NAN:.*]] = graph.compare %div, %div {predicate = "ne"}
// CHECK:      graph.select %[[NAN]],
// CHECK:      graph.compare %div, %{{.*}} {predicate = "eq"}
// CHECK:      %nan_to_num = graph.select
