// RUN: tinyopt %s -p fuse | filecheck %s --check-prefix=BEFORE
// RUN: tinyopt %s -p fuse,online-softmax | filecheck %s --check-prefix=AFTER

// Safe softmax after fuse: a max reduction, a sum of exp(x - max) that reads x again, and the
// output loop (three reads of the row).

// BEFORE:      loop.parallel (%[[I:.*]]) in [64] {
// BEFORE:        %[[MAX:.*]] = loop.reduce (%[[J:.*]]) in [128] init(%{{.*}} : f32) {
// BEFORE-NEXT:     %[[X:.*]] = memref.load %{{.*}}[%[[I]], %[[J]]] : memref<64x128xf32>
// BEFORE-NEXT:     loop.yield %[[X]] : f32
// BEFORE:          arith.maximumf
// BEFORE:        %[[SUM:.*]] = loop.reduce (%[[K:.*]]) in [128] init(%{{.*}} : f32) {
// BEFORE-NEXT:     %[[X2:.*]] = memref.load %{{.*}}[%[[I]], %[[K]]] : memref<64x128xf32>
// BEFORE-NEXT:     %[[D:.*]] = arith.subf %[[X2]], %[[MAX]] : f32
// BEFORE-NEXT:     %[[E:.*]] = math.exp %[[D]] : f32
// BEFORE-NEXT:     loop.yield %[[E]] : f32
// BEFORE:          arith.addf
// BEFORE:        loop.parallel

// After online-softmax: one reduction over the state (m, l) with identity (-inf, 0); each
// element is (x, 1); the combine rescales both sums to the larger maximum, floored at the
// lowest finite f32 so that (-inf, 0) + (-inf, 0) stays (-inf, 0). The output loop reads m, l.

// AFTER:        loop.parallel (%[[I:.*]]) in [64] {
// AFTER:          %[[NINF:.*]] = arith.constant 0xff800000 : f32
// AFTER-NEXT:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// AFTER-NEXT:     %[[M:.*]], %[[L:.*]] = loop.reduce (%[[J:.*]]) in [128] init(%[[NINF]], %[[ZERO]] : f32, f32) {
// AFTER-NEXT:       %[[X:.*]] = memref.load %{{.*}}[%[[I]], %[[J]]] : memref<64x128xf32>
// AFTER-NEXT:       %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// AFTER-NEXT:       loop.yield %[[X]], %[[ONE]] : f32, f32
// AFTER-NEXT:     } combine(%[[M1:.*]], %[[L1:.*]], %[[M2:.*]], %[[L2:.*]]) {
// AFTER-NEXT:       %[[MM:.*]] = arith.maximumf %[[M1]], %[[M2]] : f32
// AFTER-NEXT:       %[[LOWEST:.*]] = arith.constant -3.40282347e+38 : f32
// AFTER-NEXT:       %[[FLOOR:.*]] = arith.maximumf %[[MM]], %[[LOWEST]] : f32
// AFTER-NEXT:       %[[D1:.*]] = arith.subf %[[M1]], %[[FLOOR]] : f32
// AFTER-NEXT:       %[[E1:.*]] = math.exp %[[D1]] : f32
// AFTER-NEXT:       %[[S1:.*]] = arith.mulf %[[L1]], %[[E1]] : f32
// AFTER-NEXT:       %[[D2:.*]] = arith.subf %[[M2]], %[[FLOOR]] : f32
// AFTER-NEXT:       %[[E2:.*]] = math.exp %[[D2]] : f32
// AFTER-NEXT:       %[[S2:.*]] = arith.mulf %[[L2]], %[[E2]] : f32
// AFTER-NEXT:       %[[S:.*]] = arith.addf %[[S1]], %[[S2]] : f32
// AFTER-NEXT:       loop.yield %[[MM]], %[[S]] : f32, f32
// AFTER-NEXT:     }
// AFTER-NEXT:     loop.parallel (%{{.*}}) in [128] {
// AFTER:            arith.subf %{{.*}}, %[[M]] : f32
// AFTER-NEXT:       math.exp
// AFTER-NEXT:       arith.divf %{{.*}}, %[[L]] : f32

func.func @softmax(%x: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %y = graph.softmax %x {dim = 1 : i64} : tensor<64x128xf32>
  func.return %y : tensor<64x128xf32>
}
