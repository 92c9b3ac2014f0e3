// RUN: tinyopt %s -p fuse | filecheck %s --check-prefix=FUSE
// RUN: tinyopt %s -p fuse,plan | filecheck %s

// A linear layer on a [batch, seq, hidden] activation is one kernel, a batched GEMM against
// the weight broadcast over the batch, with the bias and GELU as its epilogue. Planning makes
// it one GEMM over batch × seq rows, the wgmma rule's: the batch and row loops collapse into
// one, and x and y are read and written through collapse_shape views (no copy).

// CHECK:      loop.kernel @mlp_0(%{{.*}}: memref<256x64xbf16>, %{{.*}}: memref<96x64xbf16>, %{{.*}}: memref<96xbf16>, %{{.*}}: memref<256x96xbf16>) attributes {plan = #tile.plan<wgmma
// CHECK-NEXT:   loop.parallel (%[[M:.*]], %[[N:.*]]) in [256, 96] {
// CHECK:          loop.reduce (%[[K:.*]]) in [64] init(%{{.*}} : f32) attributes {tinyopt.contraction}
// CHECK-NEXT:       memref.load %{{.*}}[%[[M]], %[[K]]] : memref<256x64xbf16>
// CHECK:          math.erf
// CHECK:          memref.store %{{.*}}, %{{.*}}[%[[M]], %[[N]]] : memref<256x96xbf16>
// CHECK-NOT:  loop.kernel
// CHECK:      func.func @mlp(%[[X:.*]]: memref<2x128x64xbf16>,
// CHECK-NEXT:   %[[Y:.*]] = memref.alloc() : memref<2x128x96xbf16>
// CHECK-DAG:    %[[XV:.*]] = memref.collapse_shape %[[X]] {{\[\[}}0 : i64, 1 : i64], [2 : i64]] : memref<2x128x64xbf16> into memref<256x64xbf16>
// CHECK-DAG:    %[[YV:.*]] = memref.collapse_shape %[[Y]] {{\[\[}}0 : i64, 1 : i64], [2 : i64]] : memref<2x128x96xbf16> into memref<256x96xbf16>
// CHECK:        loop.launch @mlp_0(%[[XV]], %{{.*}}, %{{.*}}, %[[YV]])
// CHECK-NEXT:   func.return %[[Y]] : memref<2x128x96xbf16>

// FUSE:      loop.kernel @mlp_0(%{{.*}}: memref<2x128x64xbf16>,
// FUSE-NEXT:   loop.parallel (%{{.*}}, %{{.*}}, %{{.*}}) in [2, 128, 96] {
// FUSE-NOT:  loop.kernel
// FUSE-NOT:  memref.collapse_shape

func.func @mlp(%x: tensor<2x128x64xbf16>, %w: tensor<96x64xbf16>, %b: tensor<96xbf16>) -> tensor<2x128x96xbf16> {
  %h = graph.linear %x, %w, %b : (tensor<2x128x64xbf16>, tensor<96x64xbf16>, tensor<96xbf16>) -> tensor<2x128x96xbf16>
  %g = graph.gelu %h : tensor<2x128x96xbf16>
  func.return %g : tensor<2x128x96xbf16>
}
