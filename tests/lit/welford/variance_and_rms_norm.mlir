// RUN: tinyopt %s -p fuse,welford | filecheck %s

// A variance spelled out in graph ops, mean((x - mean(x))^2), becomes one Welford reduction
// whose M2 / n is stored.

// CHECK-LABEL: loop.kernel @variance_0
// CHECK:         %{{.*}}, %{{.*}}, %[[M2:.*]] = loop.reduce (%{{.*}}) in [64] init(%{{.*}}, %{{.*}}, %{{.*}} : f32, f32, f32) {
// CHECK-NOT:     loop.reduce
// CHECK:         %[[VAR:.*]] = arith.divf %[[M2]], %{{.*}} : f32
// CHECK-NEXT:    %{{.*}} = arith.constant 0 : index
// CHECK-NEXT:    memref.store %[[VAR]]

// RMSNorm's mean of squares is not centered: its single reduction stays.

// CHECK-LABEL: loop.kernel @rms_0
// CHECK:         loop.reduce (%{{.*}}) in [64] init(%{{.*}} : f32) {
// CHECK-NOT:     loop.reduce

func.func @variance(%x: tensor<8x64xf32>) -> tensor<8x1xf32> {
  %m = graph.reduce_mean %x {dims = array<i64: 1>, keepdim = true} : tensor<8x64xf32> -> tensor<8x1xf32>
  %mb = graph.broadcast %m : tensor<8x1xf32> -> tensor<8x64xf32>
  %c = graph.sub %x, %mb : tensor<8x64xf32>
  %sq = graph.mul %c, %c : tensor<8x64xf32>
  %v = graph.reduce_mean %sq {dims = array<i64: 1>, keepdim = true} : tensor<8x64xf32> -> tensor<8x1xf32>
  func.return %v : tensor<8x1xf32>
}

func.func @rms(%x: tensor<8x64xf32>, %w: tensor<64xf32>) -> tensor<8x64xf32> {
  %y = graph.rms_norm %x, %w {eps = 1.0e-06 : f32} : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  func.return %y : tensor<8x64xf32>
}
