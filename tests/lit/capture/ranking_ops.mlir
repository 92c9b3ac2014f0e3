// RUN: tinyopt capture %S/ranking_ops.py:model > %t.mlir
// RUN: filecheck %s < %t.mlir

// How topk, sort and a transposed convolution are captured (tests/lit/capture/ranking_ops.py;
// frontends/torch_fx.py, "reductions" and "convolution").

// topk(x, 2): each element's rank counts the elements that come before it (larger, NaN
// counting as the largest, or equal at a lower index), j against i as two broadcasts and two
// index expressions, summed over j.
// CHECK:      %[[I:.*]] = graph.broadcast %{{.*}} : tensor<2x4x8x1xf32> -> tensor<2x4x8x8xf32>
// CHECK:      %[[J:.*]] = graph.broadcast %{{.*}} : tensor<2x4x1x8xf32> -> tensor<2x4x8x8xf32>
// CHECK:      graph.compare %[[J]], %[[I]] {predicate = "gt"}
// CHECK:      graph.compare %[[J]], %[[I]] {predicate = "eq"}
// CHECK:      %[[COL:.*]] = graph.iota {dim = 3 : i64} : tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[ROW:.*]] = graph.iota {dim = 2 : i64} : tensor<2x4x8x8xf32>
// CHECK-NEXT: graph.compare %[[COL]], %[[ROW]] {predicate = "lt"}
// CHECK:      %[[RANK:.*]] = graph.reduce_sum %{{.*}} {dims = array<i64: 3>} : tensor<2x4x8x8xf32> -> tensor<2x4x8xf32>

// Output r takes the element of rank r: a maximum with one selected term, the others −inf
// (values), then a sum with one selected term (indices).
// CHECK:      %[[SLOT:.*]] = graph.iota {dim = 2 : i64} : tensor<2x4x2x8xf32>
// CHECK:      %[[MATCH:.*]] = graph.compare %{{.*}}, %[[SLOT]] {predicate = "eq"}
// CHECK:      graph.select %[[MATCH]],
// CHECK-NEXT: %getitem = graph.reduce_max %{{.*}} {dims = array<i64: 3>} : tensor<2x4x2x8xf32> -> tensor<2x4x2xf32>
// CHECK:      %getitem_1 = graph.cast %{{.*}} : tensor<2x4x2xf32> -> tensor<2x4x2xi64>

// sort ascending: the same ranks with "lt".
// CHECK:      graph.compare %{{.*}}, %{{.*}} {predicate = "lt"} : tensor<2x4x8x8xf32>
// CHECK:      %getitem_2 = graph.reduce_max

// conv_transpose1d, stride 2, padding 1, kernel 3: x with one zero after each element but the
// last (15 long), one zero each side (dilation · 2 - padding), then a stride-1 convolution by
// the weight with in and out channels swapped and its window reversed.
// CHECK:      graph.concat %{{.*}}, %{{.*}} {dim = 3 : i64} : (tensor<2x4x8x1xf32>, tensor<2x4x8x1xf32>) -> tensor<2x4x8x2xf32>
// CHECK:      graph.slice %{{.*}} {dim = 2 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x4x16xf32> -> tensor<2x4x15xf32>
// CHECK:      graph.concat %{{.*}} {dim = 2 : i64} : (tensor<2x4x1xf32>, tensor<2x4x15xf32>, tensor<2x4x1xf32>) -> tensor<2x4x17xf32>
// CHECK:      graph.transpose %{{.*}} {perm = array<i64: 0, 2, 1, 3>} : tensor<1x4x2x3xf32> -> tensor<1x2x4x3xf32>
// CHECK:      graph.gather
// CHECK:      graph.matmul %{{.*}} : (tensor<2x1x15x12xf32>, tensor<2x1x12x2xf32>) -> tensor<2x1x15x2xf32>
// CHECK:      %conv_transpose1d = graph.add
