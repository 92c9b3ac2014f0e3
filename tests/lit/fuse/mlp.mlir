// RUN: tinyopt %s -p fuse | filecheck %s

// A 2-layer MLP is two contraction kernels: the first layer with its bias+relu epilogue is
// materialized because it feeds the second matmul's K loop.

// CHECK:      loop.kernel @mlp_0(%{{.*}}: memref<16x64xf32>, %{{.*}}: memref<64x32xf32>, %{{.*}}: memref<32xf32>, %{{.*}}: memref<16x32xf32>) {
// CHECK-NEXT:   loop.parallel (%{{.*}}, %{{.*}}) in [16, 32] {
// CHECK:          %[[ACC:.*]] = loop.reduce (%{{.*}}) in [64] init(%{{.*}} : f32) attributes {tinyopt.contraction}
// CHECK:          arith.addf %[[ACC]], %{{.*}} : f32
// CHECK-NEXT:     arith.maximumf
// CHECK-NEXT:     memref.store
// CHECK:      loop.kernel @mlp_1(%{{.*}}: memref<16x32xf32>, %{{.*}}: memref<32x8xf32>, %{{.*}}: memref<16x8xf32>) {
// CHECK-NEXT:   loop.parallel (%{{.*}}, %{{.*}}) in [16, 8] {
// CHECK:          loop.reduce (%{{.*}}) in [32] init(%{{.*}} : f32) attributes {tinyopt.contraction}
// CHECK-NOT:  loop.kernel
// CHECK:      func.func @mlp(
// CHECK-NEXT:   %[[H:.*]] = memref.alloc() : memref<16x32xf32>
// CHECK-NEXT:   loop.launch @mlp_0(%{{.*}}, %{{.*}}, %{{.*}}, %[[H]])
// CHECK-NEXT:   %[[Y:.*]] = memref.alloc() : memref<16x8xf32>
// CHECK-NEXT:   loop.launch @mlp_1(%[[H]], %{{.*}}, %[[Y]])
// CHECK-NEXT:   func.return %[[Y]] : memref<16x8xf32>

func.func @mlp(%x: tensor<16x64xf32>, %w1: tensor<64x32xf32>, %b1: tensor<32xf32>, %w2: tensor<32x8xf32>) -> tensor<16x8xf32> {
  %h = graph.matmul %x, %w1 : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
  %bb = graph.broadcast %b1 : tensor<32xf32> -> tensor<16x32xf32>
  %hb = graph.add %h, %bb : tensor<16x32xf32>
  %a = graph.relu %hb : tensor<16x32xf32>
  %y = graph.matmul %a, %w2 : (tensor<16x32xf32>, tensor<32x8xf32>) -> tensor<16x8xf32>
  func.return %y : tensor<16x8xf32>
}
