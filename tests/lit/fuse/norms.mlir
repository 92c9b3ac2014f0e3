// RUN: tinyopt %s -p fuse | filecheck %s

// rms_norm and layer_norm are each one row kernel; layer_norm's variance reduce reads the
// mean computed by the reduce before it.

// CHECK:      loop.kernel @rms_0(
// CHECK-NEXT:   loop.parallel (%{{.*}}) in [8] {
// CHECK:          %[[SQ:.*]] = loop.reduce (%{{.*}}) in [256] init
// CHECK:          %[[MEAN:.*]] = arith.divf %[[SQ]], %{{.*}} : f32
// CHECK:          math.rsqrt
// CHECK:          loop.parallel (%{{.*}}) in [256] {
// CHECK:            memref.store
// CHECK-NOT:  loop.kernel @rms_1
// CHECK:      loop.kernel @ln_0(
// CHECK-NEXT:   loop.parallel (%{{.*}}, %{{.*}}) in [2, 8] {
// CHECK:          %[[S:.*]] = loop.reduce (%{{.*}}) in [256] init
// CHECK:          %[[MU:.*]] = arith.divf %[[S]], %{{.*}} : f32
// CHECK:          loop.reduce (%{{.*}}) in [256] init
// CHECK:            arith.subf %{{.*}}, %[[MU]] : f32
// CHECK:          loop.parallel (%{{.*}}) in [256] {
// CHECK:            memref.store
// CHECK-NOT:  loop.kernel @ln_1
// CHECK:      func.func @ln(
// CHECK-COUNT-1: loop.launch

func.func @rms(%x: tensor<8x256xf32>, %w: tensor<256xf32>) -> tensor<8x256xf32> {
  %y = graph.rms_norm %x, %w {eps = 1.0e-06 : f32} : (tensor<8x256xf32>, tensor<256xf32>) -> tensor<8x256xf32>
  func.return %y : tensor<8x256xf32>
}

func.func @ln(%x: tensor<2x8x256xbf16>, %w: tensor<256xbf16>, %b: tensor<256xbf16>) -> tensor<2x8x256xbf16> {
  %y = graph.layer_norm %x, %w, %b {eps = 1.0e-05 : f32} : (tensor<2x8x256xbf16>, tensor<256xbf16>, tensor<256xbf16>) -> tensor<2x8x256xbf16>
  func.return %y : tensor<2x8x256xbf16>
}
