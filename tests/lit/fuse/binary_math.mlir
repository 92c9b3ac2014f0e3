// RUN: tinyopt %s | filecheck %s --check-prefix=GRAPH
// RUN: tinyopt %s -p fuse | filecheck %s
// RUN: tinyopt %s -p fuse,tile,to-cuda | filecheck %s --check-prefix=CUDA

// atan2 is math.atan2 and CUDA's atan2f; fmod is llvm.frem (C's fmod, exact: xDSL has no
// arith.remf) and CUDA's fmodf; remainder is torch's formula on fmod's m: m + b where m is
// not 0 and its sign differs from b's (`b < 0 ? m > 0 : m < 0`), else m, so a zero keeps a's
// sign. A bf16 remainder is computed in f32 and rounded once.

// GRAPH-LABEL: func.func @binary_math
// GRAPH-NEXT:  %atan2 = graph.atan2 %y, %x : tensor<4x8xf32>
// GRAPH-NEXT:  %fmod = graph.fmod %y, %x : tensor<4x8xf32>
// GRAPH-NEXT:  %remainder = graph.remainder %y, %x : tensor<4x8xf32>

// CHECK-LABEL: loop.kernel @binary_math_0
// CHECK:       %[[Y0:.*]] = memref.load
// CHECK-NEXT:  %[[X0:.*]] = memref.load
// CHECK-NEXT:  math.atan2 %[[Y0]], %[[X0]] : f32
// CHECK-LABEL: loop.kernel @binary_math_1
// CHECK:       %[[A1:.*]] = memref.load
// CHECK-NEXT:  %[[B1:.*]] = memref.load
// CHECK-NEXT:  llvm.frem %[[A1]], %[[B1]] : f32
// CHECK-LABEL: loop.kernel @binary_math_2
// CHECK:       %[[A2:.*]] = memref.load
// CHECK-NEXT:  %[[B2:.*]] = memref.load
// CHECK-NEXT:  %[[M:.*]] = llvm.frem %[[A2]], %[[B2]] : f32
// CHECK-NEXT:  %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:  %[[NEG_B:.*]] = arith.cmpf olt, %[[B2]], %[[ZERO]] : f32
// CHECK-NEXT:  %[[POS_M:.*]] = arith.cmpf ogt, %[[M]], %[[ZERO]] : f32
// CHECK-NEXT:  %[[NEG_M:.*]] = arith.cmpf olt, %[[M]], %[[ZERO]] : f32
// CHECK-NEXT:  %[[WRONG:.*]] = arith.select %[[NEG_B]], %[[POS_M]], %[[NEG_M]] : i1
// CHECK-NEXT:  %[[SHIFTED:.*]] = arith.addf %[[M]], %[[B2]] : f32
// CHECK-NEXT:  arith.select %[[WRONG]], %[[SHIFTED]], %[[M]] : f32
// CHECK-LABEL: loop.kernel @remainder_bf16_0
// CHECK:       %[[A:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK:       %[[B:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK-NEXT:  llvm.frem %[[A]], %[[B]] : f32
// CHECK:       %[[R:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:  arith.truncf %[[R]] : f32 to bf16

// CUDA-LABEL: // kernel @binary_math_0
// CUDA:       = atan2f(
// CUDA-LABEL: // kernel @binary_math_1
// CUDA:       = fmodf(
// CUDA-LABEL: // kernel @binary_math_2
// CUDA:       float [[M:v[0-9]+]] = fmodf([[A:v[0-9]+]], [[B:v[0-9]+]]);
// CUDA:       bool [[NEG_B:v[0-9]+]] = [[B]] < 0.0f;
// CUDA:       bool [[POS_M:v[0-9]+]] = [[M]] > 0.0f;
// CUDA:       bool [[NEG_M:v[0-9]+]] = [[M]] < 0.0f;
// CUDA:       bool [[WRONG:v[0-9]+]] = [[NEG_B]] ? [[POS_M]] : [[NEG_M]];
// CUDA:       float [[SHIFTED:v[0-9]+]] = [[M]] + [[B]];
// CUDA:       = [[WRONG]] ? [[SHIFTED]] : [[M]];
// CUDA-LABEL: // kernel @remainder_bf16_0
// CUDA:       float [[H:v[0-9]+]] = __bfloat162float(
// CUDA:       = fmodf([[H]],
// CUDA:       __float2bfloat16_rn(

func.func @binary_math(%y: tensor<4x8xf32>, %x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %atan2 = graph.atan2 %y, %x : tensor<4x8xf32>
  %fmod = graph.fmod %y, %x : tensor<4x8xf32>
  %remainder = graph.remainder %y, %x : tensor<4x8xf32>
  func.return %atan2, %fmod, %remainder : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

func.func @remainder_bf16(%a: tensor<4x8xbf16>, %b: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %r = graph.remainder %a, %b : tensor<4x8xbf16>
  func.return %r : tensor<4x8xbf16>
}
