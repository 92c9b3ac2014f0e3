// RUN: tinyopt %s -p fuse | filecheck %s

// RoPE's rotate_half, cat(-x[..., 4:], x[..., :4]), is index arithmetic inside the consumer's
// kernel: each half is read at its own index clamped into bounds, and a select picks one.

// CHECK:      loop.kernel @rope_0(%[[X:.*]]: memref<3x8xf32>, %{{.*}}: memref<3x8xf32>, %[[OUT:.*]]: memref<3x8xf32>) {
// CHECK-NEXT:   loop.parallel (%[[R:.*]], %[[C:.*]]) in [3, 8] {
// CHECK:          %[[LAST:.*]] = arith.constant 3 : index
// CHECK-NEXT:     %[[LO:.*]] = arith.minsi %[[C]], %[[LAST]] : index
// CHECK-NEXT:     %[[HALF:.*]] = arith.constant 4 : index
// CHECK-NEXT:     %[[HI:.*]] = arith.addi %[[LO]], %[[HALF]] : index
// CHECK-NEXT:     %[[A:.*]] = memref.load %[[X]][%[[R]], %[[HI]]] : memref<3x8xf32>
// CHECK-NEXT:     %[[NEG:.*]] = arith.negf %[[A]] : f32
// CHECK-NEXT:     %[[AT:.*]] = arith.maxsi %[[C]], %[[HALF]] : index
// CHECK-NEXT:     %[[SHIFTED:.*]] = arith.subi %[[AT]], %[[HALF]] : index
// CHECK-NEXT:     %[[B:.*]] = memref.load %[[X]][%[[R]], %[[SHIFTED]]] : memref<3x8xf32>
// CHECK-NEXT:     %[[FIRST:.*]] = arith.cmpi ult, %[[C]], %[[HALF]] : index
// CHECK-NEXT:     %{{.*}} = arith.select %[[FIRST]], %[[NEG]], %[[B]] : f32
// CHECK:          memref.store %{{.*}}, %[[OUT]][%[[R]], %[[C]]] : memref<3x8xf32>
func.func @rope(%x: tensor<3x8xf32>, %sin: tensor<3x8xf32>) -> tensor<3x8xf32> {
  %hi = graph.slice %x {dim = 1 : i64, start = 4 : i64, step = 1 : i64} : tensor<3x8xf32> -> tensor<3x4xf32>
  %lo = graph.slice %x {dim = 1 : i64, start = 0 : i64, step = 1 : i64} : tensor<3x8xf32> -> tensor<3x4xf32>
  %n = graph.neg %hi : tensor<3x4xf32>
  %r = graph.concat %n, %lo {dim = 1 : i64} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x8xf32>
  %y = graph.mul %r, %sin : tensor<3x8xf32>
  func.return %y : tensor<3x8xf32>
}

// An embedding lookup: the table's row index is the loaded id, clamped into the table.

// CHECK:      loop.kernel @embed_0(%[[IDS:.*]]: memref<2x5xi64>, %[[T:.*]]: memref<10x4xf32>, %{{.*}}: memref<2x5x4xf32>) {
// CHECK-NEXT:   loop.parallel (%[[I:.*]], %[[J:.*]], %[[K:.*]]) in [2, 5, 4] {
// CHECK-NEXT:     %[[ID:.*]] = memref.load %[[IDS]][%[[I]], %[[J]]] : memref<2x5xi64>
// CHECK-NEXT:     %[[INDEX:.*]] = arith.index_cast %[[ID]] : i64 to index
// CHECK-NEXT:     %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT:     %[[LOW:.*]] = arith.maxsi %[[INDEX]], %[[ZERO]] : index
// CHECK-NEXT:     %[[ROWS:.*]] = arith.constant 9 : index
// CHECK-NEXT:     %[[ROW:.*]] = arith.minsi %[[LOW]], %[[ROWS]] : index
// CHECK-NEXT:     memref.load %[[T]][%[[ROW]], %[[K]]] : memref<10x4xf32>
func.func @embed(%table: tensor<10x4xf32>, %ids: tensor<2x5xi64>) -> tensor<2x5x4xf32> {
  %e = graph.gather %table, %ids : (tensor<10x4xf32>, tensor<2x5xi64>) -> tensor<2x5x4xf32>
  %y = graph.silu %e : tensor<2x5x4xf32>
  func.return %y : tensor<2x5x4xf32>
}
