// RUN: tinyopt %s -p fuse | filecheck %s --check-prefix=BEFORE
// RUN: tinyopt %s -p fuse,welford | filecheck %s --check-prefix=AFTER

// LayerNorm after fuse: sum(x), mean = sum / n, then a sum of (x - mean)^2 that reads x again.

// BEFORE:      loop.parallel (%[[I:.*]]) in [64] {
// BEFORE:        %[[SUM:.*]] = loop.reduce (%[[J:.*]]) in [256] init(%{{.*}} : f32) {
// BEFORE-NEXT:     %[[X:.*]] = memref.load %{{.*}}[%[[I]], %[[J]]] : memref<64x256xf32>
// BEFORE-NEXT:     loop.yield %[[X]] : f32
// BEFORE:          arith.addf
// BEFORE:        %[[N:.*]] = arith.constant 2.560000e+02 : f32
// BEFORE-NEXT:   %[[MEAN:.*]] = arith.divf %[[SUM]], %[[N]] : f32
// BEFORE-NEXT:   %[[Q:.*]] = loop.reduce (%[[K:.*]]) in [256] init(%{{.*}} : f32) {
// BEFORE-NEXT:     %[[X2:.*]] = memref.load %{{.*}}[%[[I]], %[[K]]] : memref<64x256xf32>
// BEFORE-NEXT:     %[[C:.*]] = arith.subf %[[X2]], %[[MEAN]] : f32
// BEFORE-NEXT:     %[[SQ:.*]] = arith.mulf %[[C]], %[[C]] : f32
// BEFORE-NEXT:     loop.yield %[[SQ]] : f32
// BEFORE:        arith.divf %[[Q]], %[[N]] : f32

// After welford: one reduction over (count, mean, M2) with identity (0, 0, 0); each element is
// (1, x, -0); the combine is Chan et al.'s merge with the divisions by max(count, 1). The
// output loop centers by the merged mean; the variance is M2 / n.

// AFTER:        loop.parallel (%[[I:.*]]) in [64] {
// AFTER-NEXT:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// AFTER-NEXT:     %[[CNT:.*]], %[[MEAN:.*]], %[[M2:.*]] = loop.reduce (%[[J:.*]]) in [256] init(%[[ZERO]], %[[ZERO]], %[[ZERO]] : f32, f32, f32) {
// AFTER-NEXT:       %[[X:.*]] = memref.load %{{.*}}[%[[I]], %[[J]]] : memref<64x256xf32>
// AFTER-NEXT:       %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// AFTER-NEXT:       %[[NZ:.*]] = arith.constant -0.000000e+00 : f32
// AFTER-NEXT:       loop.yield %[[ONE]], %[[X]], %[[NZ]] : f32, f32, f32
// AFTER-NEXT:     } combine(%[[N1:.*]], %[[MU1:.*]], %[[Q1:.*]], %[[N2:.*]], %[[MU2:.*]], %[[Q2:.*]]) {
// AFTER-NEXT:       %[[NN:.*]] = arith.addf %[[N1]], %[[N2]] : f32
// AFTER-NEXT:       %[[C1:.*]] = arith.constant 1.000000e+00 : f32
// AFTER-NEXT:       %[[SAFE:.*]] = arith.maximumf %[[NN]], %[[C1]] : f32
// AFTER-NEXT:       %[[DELTA:.*]] = arith.subf %[[MU2]], %[[MU1]] : f32
// AFTER-NEXT:       %[[W:.*]] = arith.divf %[[N2]], %[[SAFE]] : f32
// AFTER-NEXT:       %[[STEP:.*]] = arith.mulf %[[DELTA]], %[[W]] : f32
// AFTER-NEXT:       %[[MU:.*]] = arith.addf %[[MU1]], %[[STEP]] : f32
// AFTER-NEXT:       %[[T:.*]] = arith.mulf %[[STEP]], %[[DELTA]] : f32
// AFTER-NEXT:       %[[SPREAD:.*]] = arith.mulf %[[T]], %[[N1]] : f32
// AFTER-NEXT:       %[[QQ:.*]] = arith.addf %[[Q1]], %[[Q2]] : f32
// AFTER-NEXT:       %[[Q:.*]] = arith.addf %[[QQ]], %[[SPREAD]] : f32
// AFTER-NEXT:       loop.yield %[[NN]], %[[MU]], %[[Q]] : f32, f32, f32
// AFTER-NEXT:     }
// AFTER-NEXT:     %[[N:.*]] = arith.constant 2.560000e+02 : f32
// AFTER-NEXT:     %[[VAR:.*]] = arith.divf %[[M2]], %[[N]] : f32
// AFTER-NOT:      loop.reduce
// AFTER:          loop.parallel (%{{.*}}) in [256] {
// AFTER:            arith.subf %{{.*}}, %[[MEAN]] : f32

func.func @layernorm(%x: tensor<64x256xf32>, %w: tensor<256xf32>, %b: tensor<256xf32>) -> tensor<64x256xf32> {
  %y = graph.layer_norm %x, %w, %b {eps = 1.0e-05 : f32} : (tensor<64x256xf32>, tensor<256xf32>, tensor<256xf32>) -> tensor<64x256xf32>
  func.return %y : tensor<64x256xf32>
}
