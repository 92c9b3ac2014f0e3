// RUN: tinyopt %s -p fuse | filecheck %s

// softmax is one row kernel: max then sum as row-level reductions, then the store loop.

// CHECK:      loop.kernel @softmax_0(%[[X:.*]]: memref<64x128xf32>, %[[OUT:.*]]: memref<64x128xf32>) {
// CHECK-NEXT:   loop.parallel (%[[I:.*]]) in [64] {
// CHECK-NEXT:     %[[NINF:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:     %[[MAX:.*]] = loop.reduce (%[[J:.*]]) in [128] init(%[[NINF]] : f32) {
// CHECK-NEXT:       %[[V:.*]] = memref.load %[[X]][%[[I]], %[[J]]] : memref<64x128xf32>
// CHECK-NEXT:       loop.yield %[[V]] : f32
// CHECK-NEXT:     } combine(%[[A:.*]], %[[B:.*]]) {
// CHECK-NEXT:       %[[C:.*]] = arith.maximumf %[[A]], %[[B]] : f32
// CHECK:          %[[SUM:.*]] = loop.reduce (%{{.*}}) in [128] init(%{{.*}} : f32) {
// CHECK:            arith.subf %{{.*}}, %[[MAX]] : f32
// CHECK-NEXT:       math.exp
// CHECK:          } combine
// CHECK:            arith.addf
// CHECK:          loop.parallel (%[[K:.*]]) in [128] {
// CHECK:            arith.divf %{{.*}}, %[[SUM]] : f32
// CHECK-NEXT:       memref.store %{{.*}}, %[[OUT]][%[[I]], %[[K]]] : memref<64x128xf32>
// CHECK-NOT:  loop.kernel
// CHECK:      func.func @softmax(%[[HX:.*]]: memref<64x128xf32>) -> memref<64x128xf32> {
// CHECK-NEXT:   %[[HOUT:.*]] = memref.alloc() : memref<64x128xf32>
// CHECK-NEXT:   loop.launch @softmax_0(%[[HX]], %[[HOUT]]) : memref<64x128xf32>, memref<64x128xf32>
// CHECK-NEXT:   func.return %[[HOUT]] : memref<64x128xf32>

func.func @softmax(%x: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %y = graph.softmax %x {dim = 1 : i64} : tensor<64x128xf32>
  func.return %y : tensor<64x128xf32>
}
