// RUN: tinyopt capture %S/composite_ops.py:model > %t.mlir
// RUN: filecheck %s < %t.mlir

// How lerp, logaddexp, sinh, floor division, var_mean, kthvalue, cumprod and diagonal are
// captured as compositions of graph ops (tests/lit/capture/composite_ops.py;
// frontends/torch_fx.py).

// lerp: a + w (b - a) where |w| < 0.5, else b - (b - a)(1 - w): a select of the two.
// CHECK:      %lerp = graph.select
// logaddexp: max + log1p(exp(-|a - b|)), or a itself where both are the same infinity.
// CHECK:      graph.log1p
// CHECK:      %logaddexp = graph.select %{{.*}}, %x,
// sinh: (expm1(x) - expm1(-x)) / 2 below |x| = 1, else e^(x - ln 2) - e^(-x - ln 2).
// CHECK:      graph.expm1 %x
// CHECK:      %sinh = graph.select

// div(x, y, rounding_mode="floor"): torch's div_floor, from fmod(x, y).
// CHECK:      graph.fmod %x, %y
// CHECK:      graph.floor
// CHECK:      %div = graph.select

// var_mean: the variance, then the mean (a tuple's two parts).
// CHECK:      %getitem = graph.div
// CHECK-NEXT: %getitem_1 = graph.reduce_mean %x {dims = array<i64: 1>}

// kthvalue(x, 3): the element of ascending rank 2, a maximum with one selected term.
// CHECK:      %getitem_2 = graph.reduce_max %{{.*}} {dims = array<i64: 1>} : tensor<4x4xf32> -> tensor<4xf32>

// cumprod: terms past i masked to 1, a product over j.
// CHECK:      %cumprod = graph.reduce_prod %{{.*}} {dims = array<i64: 2>} : tensor<4x4x4xf32> -> tensor<4x4xf32>

// diagonal: x flattened, every fifth element.
// CHECK:      %diagonal = graph.slice %{{.*}} {dim = 0 : i64, start = 0 : i64, step = 5 : i64} : tensor<16xf32> -> tensor<4xf32>
