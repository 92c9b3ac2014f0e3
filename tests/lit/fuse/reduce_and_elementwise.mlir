// RUN: tinyopt %s -p fuse | filecheck %s

// A standalone row sum is `parallel [rows] { reduce [cols]; store }`; an elementwise chain
// with a broadcast bias is one flat parallel loop; bf16 is extended on load, truncated on store.

// CHECK:      loop.kernel @rsum_0(%{{.*}}: memref<8x32xbf16>, %[[OUT:.*]]: memref<8xf32>) {
// CHECK-NEXT:   loop.parallel (%[[I:.*]]) in [8] {
// CHECK:          %[[S:.*]] = loop.reduce (%{{.*}}) in [32] init
// CHECK-NEXT:       memref.load
// CHECK-NEXT:       arith.extf %{{.*}} : bf16 to f32
// CHECK:          memref.store %[[S]], %[[OUT]][%[[I]]] : memref<8xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK:      loop.kernel @ew_0(
// CHECK-NEXT:   loop.parallel (%{{.*}}, %{{.*}}) in [8, 32] {
// CHECK-NOT:      loop.
// CHECK:          math.erf
// CHECK:          arith.truncf %{{.*}} : f32 to f16
// CHECK-NEXT:     memref.store

func.func @rsum(%x: tensor<8x32xbf16>) -> tensor<8xf32> {
  %c = graph.cast %x : tensor<8x32xbf16> -> tensor<8x32xf32>
  %s = graph.reduce_sum %c {dims = array<i64: 1>, keepdim = false} : tensor<8x32xf32> -> tensor<8xf32>
  func.return %s : tensor<8xf32>
}

func.func @ew(%x: tensor<8x32xf16>, %b: tensor<32xf16>) -> tensor<8x32xf16> {
  %bb = graph.broadcast %b : tensor<32xf16> -> tensor<8x32xf16>
  %s = graph.add %x, %bb : tensor<8x32xf16>
  %g = graph.gelu %s : tensor<8x32xf16>
  func.return %g : tensor<8x32xf16>
}
