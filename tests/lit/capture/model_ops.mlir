// RUN: tinyopt capture %S/model_ops.py:model > %t.mlir
// RUN: filecheck %s < %t.mlir
// RUN: tinyopt %t.mlir -p fuse,tile,to-cuda | filecheck %s --check-prefix=CUDA

// How the ops Hugging Face-style models use are captured (tests/lit/capture/model_ops.py).

// A bool input is an i1 argument.
// CHECK: func.func @forward(%x: tensor<2x8x8xf32>, %mask: tensor<2x8x8xi1>,

// tril(ones(T, T)) == 0: rows and columns as graph.iota, compared; masked_fill selects -inf.
// CHECK:      %[[ROWS:.*]] = graph.iota {dim = 0 : i64} : tensor<8x8xf32>
// CHECK-NEXT: %[[COLS:.*]] = graph.iota {dim = 1 : i64} : tensor<8x8xf32>
// CHECK-NEXT: %[[ABOVE:.*]] = graph.sub %[[COLS]], %[[ROWS]] : tensor<8x8xf32>
// CHECK:      %[[KEEP:.*]] = graph.compare %[[ABOVE]], %{{.*}} {predicate = "le"} : tensor<8x8xf32> -> tensor<8x8xi1>
// CHECK:      %tril = graph.select %[[KEEP]], %ones, %{{.*}} : tensor<8x8xi1>, tensor<8x8xf32>
// CHECK:      %eq = graph.compare %tril, %{{.*}} {predicate = "eq"}
// CHECK:      graph.constant dense<0xff800000> : tensor<1x1x1xf32>
// CHECK:      %masked_fill = graph.select

// clamp is max then min; where selects by the mask input.
// CHECK:      graph.max %x
// CHECK:      %clamp = graph.min
// CHECK:      %erf = graph.erf %x
// CHECK:      %where = graph.select %mask, %clamp, %erf

// arange is an iota; var is a mean, squared deviations, a sum and n - 1; amin a reduce_min.
// CHECK:      %arange = graph.iota {dim = 0 : i64} : tensor<8xf32>
// CHECK:      graph.reduce_mean %x
// CHECK:      graph.reduce_sum
// CHECK:      graph.constant dense<7.000000e+00>
// CHECK:      %var = graph.div
// CHECK:      %amin = graph.reduce_min %x {dims = array<i64: 2>, keepdim = true}

// split is slices; addmm a matmul plus beta * input.
// CHECK:      %getitem = graph.slice %x {dim = 2 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x8x8xf32> -> tensor<2x8x4xf32>
// CHECK:      %getitem_1 = graph.slice %x {dim = 2 : i64, start = 4 : i64, step = 1 : i64}
// CHECK:      graph.matmul %select_2, %select_3
// CHECK:      graph.constant dense<5.000000e-01>
// CHECK:      %addmm = graph.add

// Conv1d (padding 1, 2 groups): zero pads by concat, a strided slice per kernel offset, one
// matmul batched over the groups.
// CHECK:      %[[PADDED:.*]] = graph.concat %{{.*}}, %x, %{{.*}} {dim = 2 : i64} : (tensor<2x8x1xf32>, tensor<2x8x8xf32>, tensor<2x8x1xf32>) -> tensor<2x8x10xf32>
// CHECK:      graph.slice %[[PADDED]] {dim = 2 : i64, start = 2 : i64, step = 1 : i64}
// CHECK:      graph.matmul %{{.*}}, %{{.*}} : (tensor<2x2x8x12xf32>, tensor<2x2x12x4xf32>) -> tensor<2x2x8x4xf32>
// CHECK:      %conv1d = graph.add
// CHECK:      %cos = graph.cos %conv1d

// CUDA: const bool* __restrict__
