// RUN: tinyopt %s -p fuse,tile | filecheck %s

// relu(x - y) over 16x33: the odd last dim allows no vector access (width 1), so each thread
// takes one point with scalar loads and a scalar store. 528 points over 256 threads: grid 3,
// the last block guarded by `flat < 528`.

// CHECK:      tile.kernel @f_0 grid [3, 1, 1] block [256, 1, 1] (%[[X:.*]]: memref<16x33xf32>, %[[Y:.*]]: memref<16x33xf32>, %[[OUT:.*]]: memref<16x33xf32>) attributes {plan = #tile.plan<{{.*}}>} {
// CHECK-NOT:    tile.vload
// CHECK:        %[[FLAT:.*]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK-NEXT:   %[[N:.*]] = arith.constant 528 : index
// CHECK-NEXT:   %[[IN:.*]] = arith.cmpi ult, %[[FLAT]], %[[N]] : index
// CHECK-NEXT:   scf.if %[[IN]] {
// CHECK-NEXT:     %[[C33:.*]] = arith.constant 33 : index
// CHECK-NEXT:     %[[COL:.*]] = arith.remui %[[FLAT]], %[[C33]] : index
// CHECK-NEXT:     %[[ROW:.*]] = arith.divui %[[FLAT]], %[[C33]] : index
// CHECK-NEXT:     %[[XV:.*]] = memref.load %[[X]][%[[ROW]], %[[COL]]] : memref<16x33xf32>
// CHECK-NEXT:     %[[YV:.*]] = memref.load %[[Y]][%[[ROW]], %[[COL]]] : memref<16x33xf32>
// CHECK-NEXT:     %[[D:.*]] = arith.subf %[[XV]], %[[YV]] : f32
// CHECK-NEXT:     %[[Z:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:     %[[R:.*]] = arith.maximumf %[[D]], %[[Z]] : f32
// CHECK-NEXT:     memref.store %[[R]], %[[OUT]][%[[ROW]], %[[COL]]] : memref<16x33xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NOT:  tile.v{{load|store}}

func.func @f(%x: tensor<16x33xf32>, %y: tensor<16x33xf32>) -> tensor<16x33xf32> {
  %s = graph.sub %x, %y : tensor<16x33xf32>
  %r = graph.relu %s : tensor<16x33xf32>
  func.return %r : tensor<16x33xf32>
}
