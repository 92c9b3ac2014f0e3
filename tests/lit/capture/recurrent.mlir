// RUN: tinyopt capture %S/recurrent.py:model > %t.mlir
// RUN: filecheck %s < %t.mlir
// RUN: tinyopt %t.mlir -p fuse,tile,to-cuda | filecheck %s --check-prefix=CUDA

// nn.GRU unrolled over its 2 steps (tests/lit/capture/recurrent.py; frontends/torch_fx.py,
// `_recurrent`): the input projections of both steps in one linear; at each step the hidden
// state's linear, r = σ(x_r + h_r), z = σ(x_z + h_z), n = tanh(x_n + r·h_n) (b_hn inside r's
// product, as torch) and h' = (1 − z)·n + z·h; the steps' states concatenated in time order.

// CHECK:      %[[SEQ:.*]] = graph.transpose %x {perm = array<i64: 1, 0, 2>}
// CHECK-NEXT: %[[PROJ:.*]] = graph.linear %[[SEQ]], %p_gru_weight_ih_l0, %p_gru_bias_ih_l0 : ({{.*}}) -> tensor<2x1x9xf32>
// CHECK:      %[[HP:.*]] = graph.linear %{{.*}}, %p_gru_weight_hh_l0, %p_gru_bias_hh_l0 : (tensor<1x3xf32>, tensor<9x3xf32>, tensor<9xf32>) -> tensor<1x9xf32>
// CHECK:      %[[HN:.*]] = graph.slice %[[HP]] {dim = 1 : i64, start = 6 : i64, step = 1 : i64}
// CHECK:      %[[R:.*]] = graph.sigmoid
// CHECK:      %[[Z:.*]] = graph.sigmoid
// CHECK-NEXT: %[[RH:.*]] = graph.mul %[[R]], %[[HN]]
// CHECK-NEXT: %[[NX:.*]] = graph.add %{{.*}}, %[[RH]]
// CHECK-NEXT: %[[N:.*]] = graph.tanh %[[NX]]
// CHECK:      %[[KEEP:.*]] = graph.sub %{{.*}}, %[[Z]]
// CHECK-NEXT: graph.mul %[[KEEP]], %[[N]]
// CHECK:      graph.linear %{{.*}}, %p_gru_weight_hh_l0, %p_gru_bias_hh_l0
// CHECK:      %[[STATES:.*]] = graph.concat %{{.*}}, %{{.*}} {dim = 0 : i64} : (tensor<1x1x3xf32>, tensor<1x1x3xf32>) -> tensor<2x1x3xf32>
// CHECK:      graph.transpose %[[STATES]] {perm = array<i64: 1, 0, 2>} : tensor<2x1x3xf32> -> tensor<1x2x3xf32>

// The kernels print the gates' tanh.
// CUDA:      tanhf(
