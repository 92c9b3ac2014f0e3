// RUN: tinyopt %s | filecheck %s --check-prefix=GRAPH
// RUN: tinyopt %s -p fuse | filecheck %s
// RUN: tinyopt %s -p fuse,tile,to-cuda | filecheck %s --check-prefix=CUDA

// floor, ceil, round (halves to even, as torch.round) and trunc are math.floor, math.ceil,
// math.roundeven and math.trunc (a kernel for each result), and CUDA's floorf, ceilf,
// rintf and truncf; a bf16 value is rounded in f32 (exact: bf16 holds every integer it
// rounds to).

// GRAPH-LABEL: func.func @rounding
// GRAPH-NEXT:  %floor = graph.floor %x : tensor<4x8xf32>
// GRAPH-NEXT:  %ceil = graph.ceil %x : tensor<4x8xf32>
// GRAPH-NEXT:  %round = graph.round %x : tensor<4x8xf32>
// GRAPH-NEXT:  %trunc = graph.trunc %x : tensor<4x8xf32>

// CHECK-LABEL: loop.kernel @rounding_0
// CHECK:       %[[X0:.*]] = memref.load
// CHECK-NEXT:  math.floor %[[X0]] : f32
// CHECK-LABEL: loop.kernel @rounding_1
// CHECK:       %[[X1:.*]] = memref.load
// CHECK-NEXT:  math.ceil %[[X1]] : f32
// CHECK-LABEL: loop.kernel @rounding_2
// CHECK:       %[[X2:.*]] = memref.load
// CHECK-NEXT:  math.roundeven %[[X2]] : f32
// CHECK-LABEL: loop.kernel @rounding_3
// CHECK:       %[[X3:.*]] = memref.load
// CHECK-NEXT:  math.trunc %[[X3]] : f32
// CHECK-LABEL: loop.kernel @round_bf16_0
// CHECK:       %[[H:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK-NEXT:  %[[R:.*]] = math.roundeven %[[H]] : f32
// CHECK-NEXT:  arith.truncf %[[R]] : f32 to bf16

// CUDA-LABEL: // kernel @rounding_0
// CUDA:       = floorf(
// CUDA-LABEL: // kernel @rounding_1
// CUDA:       = ceilf(
// CUDA-LABEL: // kernel @rounding_2
// CUDA:       = rintf(
// CUDA-LABEL: // kernel @rounding_3
// CUDA:       = truncf(
// CUDA-LABEL: // kernel @round_bf16_0
// CUDA:       float [[H:v[0-9]+]] = __bfloat162float(
// CUDA:       float [[R:v[0-9]+]] = rintf([[H]]);
// CUDA:       __float2bfloat16_rn([[R]])

func.func @rounding(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %floor = graph.floor %x : tensor<4x8xf32>
  %ceil = graph.ceil %x : tensor<4x8xf32>
  %round = graph.round %x : tensor<4x8xf32>
  %trunc = graph.trunc %x : tensor<4x8xf32>
  func.return %floor, %ceil, %round, %trunc : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

func.func @round_bf16(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %r = graph.round %x : tensor<4x8xbf16>
  func.return %r : tensor<4x8xbf16>
}
