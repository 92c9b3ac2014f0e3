// RUN: tinyopt %s -p fuse | filecheck %s

// relu(matmul(x + bias, w)) is one contraction kernel: the bias add is inlined in the K loop
// (A side first, then B, then the product), the relu follows the reduce.

// CHECK:      loop.kernel @mm_0(%[[X:.*]]: memref<32x64xf32>, %[[BIAS:.*]]: memref<64xf32>, %[[W:.*]]: memref<64x16xf32>, %[[OUT:.*]]: memref<32x16xf32>) {
// CHECK-NEXT:   loop.parallel (%[[M:.*]], %[[N:.*]]) in [32, 16] {
// CHECK-NEXT:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:     %[[ACC:.*]] = loop.reduce (%[[K:.*]]) in [64] init(%[[ZERO]] : f32) attributes {tinyopt.contraction} {
// CHECK-NEXT:       %[[XV:.*]] = memref.load %[[X]][%[[M]], %[[K]]] : memref<32x64xf32>
// CHECK-NEXT:       %[[BV:.*]] = memref.load %[[BIAS]][%[[K]]] : memref<64xf32>
// CHECK-NEXT:       %[[AV:.*]] = arith.addf %[[XV]], %[[BV]] : f32
// CHECK-NEXT:       %[[WV:.*]] = memref.load %[[W]][%[[K]], %[[N]]] : memref<64x16xf32>
// CHECK-NEXT:       %[[P:.*]] = arith.mulf %[[AV]], %[[WV]] : f32
// CHECK-NEXT:       loop.yield %[[P]] : f32
// CHECK-NEXT:     } combine(%{{.*}}, %{{.*}}) {
// CHECK-NEXT:       arith.addf
// CHECK-NEXT:       loop.yield
// CHECK-NEXT:     }
// CHECK-NEXT:     %[[R:.*]] = arith.maximumf %[[ACC]], %[[ZERO]] : f32
// CHECK-NEXT:     memref.store %[[R]], %[[OUT]][%[[M]], %[[N]]] : memref<32x16xf32>
// CHECK-NOT:  loop.kernel
// CHECK:      loop.launch @mm_0

func.func @mm(%x: tensor<32x64xf32>, %bias: tensor<64xf32>, %w: tensor<64x16xf32>) -> tensor<32x16xf32> {
  %bb = graph.broadcast %bias : tensor<64xf32> -> tensor<32x64xf32>
  %xb = graph.add %x, %bb : tensor<32x64xf32>
  %m = graph.matmul %xb, %w : (tensor<32x64xf32>, tensor<64x16xf32>) -> tensor<32x16xf32>
  %r = graph.relu %m : tensor<32x16xf32>
  func.return %r : tensor<32x16xf32>
}
