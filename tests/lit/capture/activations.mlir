// RUN: tinyopt capture %S/activations.py:model > %t.mlir
// RUN: filecheck %s < %t.mlir
// RUN: tinyopt %t.mlir -p fuse,tile,to-cuda | filecheck %s --check-prefix=CUDA

// How activations, log-space ops and norms are captured as compositions of graph ops
// (tests/lit/capture/activations.py; frontends/torch_fx.py, "activations, log-space, norms").

// leaky_relu: x > 0 selects x, else x times the slope.
// CHECK:      %[[POS:.*]] = graph.compare %x, %{{.*}} {predicate = "gt"}
// CHECK-NEXT: %[[SCALED:.*]] = graph.mul %x, %{{.*}}
// CHECK-NEXT: %leaky_relu = graph.select %[[POS]], %x, %[[SCALED]]

// hardswish: x * min(max(x + 3, 0), 6) / 6, in torch's order.
// CHECK:      %[[SHIFT:.*]] = graph.add %y,
// CHECK:      %[[LOW:.*]] = graph.max %[[SHIFT]],
// CHECK:      %[[CLAMP:.*]] = graph.min %[[LOW]],
// CHECK-NEXT: %[[PROD:.*]] = graph.mul %y, %[[CLAMP]]
// CHECK:      %hardswish = graph.div %[[PROD]],

// log_softmax: s = x - max, then s - log(sum(exp(s))).
// CHECK:      %[[TOP:.*]] = graph.reduce_max %x {dims = array<i64: 2>, keepdim = true}
// CHECK:      %[[S:.*]] = graph.sub %x,
// CHECK-NEXT: %[[E:.*]] = graph.exp %[[S]]
// CHECK-NEXT: %[[SUM:.*]] = graph.reduce_sum %[[E]] {dims = array<i64: 2>, keepdim = true}
// CHECK-NEXT: %[[LOG:.*]] = graph.log %[[SUM]]
// CHECK:      %log_softmax = graph.sub %[[S]],

// logsumexp: the maximum, replaced by 0 where |max| is infinite (torch's rule), shifts x.
// CHECK:      %[[M:.*]] = graph.reduce_max %y {dims = array<i64: 2>, keepdim = true}
// CHECK-NEXT: %[[ABS:.*]] = graph.abs %[[M]]
// CHECK-NEXT: graph.constant dense<0x7f800000>
// CHECK:      %[[INF:.*]] = graph.compare %[[ABS]], %{{.*}} {predicate = "eq"}
// CHECK:      %[[SAFE:.*]] = graph.select %[[INF]], %{{.*}}, %[[M]]
// CHECK:      %logsumexp = graph.add %{{.*}}, %[[SAFE]]

// sign: (x > 0) - (x < 0), as torch computes it (0 where x is NaN); isnan is x != x.
// CHECK:      %[[GT:.*]] = graph.compare %x, %{{.*}} {predicate = "gt"}
// CHECK:      %[[LT:.*]] = graph.compare %x, %{{.*}} {predicate = "lt"}
// CHECK:      %sign = graph.sub
// CHECK-NEXT: %isnan = graph.compare %y, %y {predicate = "ne"}

// vector_norm: sqrt(sum(x * x)); max of two tensors is graph.max.
// CHECK:      %[[SQ:.*]] = graph.mul %x, %x
// CHECK-NEXT: %[[SS:.*]] = graph.reduce_sum %[[SQ]] {dims = array<i64: 2>}
// CHECK-NEXT: %linalg_vector_norm = graph.sqrt %[[SS]]
// CHECK-NEXT: %max = graph.max %x, %y

// softplus: log1p(exp(x)), x itself past the threshold; elu: expm1 where x <= 0; mish:
// x * tanh(log1p(exp(x))).
// CHECK:      %[[EXP:.*]] = graph.exp %x
// CHECK-NEXT: %[[SMOOTH:.*]] = graph.log1p %[[EXP]]
// CHECK:      %[[BIG:.*]] = graph.compare %x, %{{.*}} {predicate = "gt"}
// CHECK-NEXT: %softplus = graph.select %[[BIG]], %x, %[[SMOOTH]]
// CHECK:      graph.expm1 %y
// CHECK:      %elu = graph.select
// CHECK:      %[[T:.*]] = graph.tanh
// CHECK-NEXT: %mish = graph.mul %x, %[[T]]

// relu6: hardtanh on [0, 6], a max (x itself where it equals the bound, so -0.0 stays -0.0 as
// in torch) then a min.
// CHECK:      %[[LOW6:.*]] = graph.max %mul, %[[ZERO6:.*]] :
// CHECK-NEXT: %[[AT6:.*]] = graph.compare %mul, %[[ZERO6]] {predicate = "eq"}
// CHECK-NEXT: %[[KEPT6:.*]] = graph.select %[[AT6]], %mul, %[[LOW6]]
// CHECK:      %relu6 = graph.min %[[KEPT6]], %{{.*}}

// stack: each input reshaped with a dim of 1, then a concat.
// CHECK:      graph.reshape %x : tensor<2x4x8xf32> -> tensor<2x1x4x8xf32>
// CHECK:      %stack = graph.concat %{{.*}}, %{{.*}} {dim = 1 : i64}

// The printed kernels hold the slope as a float literal, logsumexp's test of an infinite
// maximum, and CUDA's log1pf.
// CUDA:      // kernel @forward_0
// CUDA:      * 0.2f;
// CUDA:      // kernel @forward_1
// CUDA:      = fabsf(
// CUDA-NEXT: == INFINITY;
// CUDA:      sqrtf(
// CUDA:      log1pf(
