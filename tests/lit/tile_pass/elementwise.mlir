// RUN: tinyopt %s -p fuse,tile | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{vec=2 threads=128}' | filecheck %s --check-prefix=KNOBS

// exp(x + bias) * scale is one elementwise kernel. Each thread takes 4 consecutive columns:
// x and the row-broadcast bias become 16-byte vector loads, the per-row scale (broadcast along
// the columns) is loaded once and shared by the 4 lanes, the result is one vector store.
// 64 * 128 / 4 = 2048 vectors over 256 threads: grid 8.

// CHECK:      tile.kernel @f_0 grid [8, 1, 1] block [256, 1, 1] (%[[X:.*]]: memref<64x128xf32>, %[[B:.*]]: memref<128xf32>, %[[S:.*]]: memref<64x1xf32>, %[[OUT:.*]]: memref<64x128xf32>) attributes {plan = #tile.plan<{{.*}}>} {
// CHECK-NEXT:   %[[BID:.*]] = tile.block_id x
// CHECK-NEXT:   %[[C256:.*]] = arith.constant 256 : index
// CHECK-NEXT:   %[[BASE:.*]] = arith.muli %[[BID]], %[[C256]] : index
// CHECK-NEXT:   %[[TID:.*]] = tile.thread_id x
// CHECK-NEXT:   %[[FLAT:.*]] = arith.addi %[[BASE]], %[[TID]] : index
// CHECK-NEXT:   %[[N:.*]] = arith.constant 2048 : index
// CHECK-NEXT:   %[[IN:.*]] = arith.cmpi ult, %[[FLAT]], %[[N]] : index
// CHECK-NEXT:   scf.if %[[IN]] {
// CHECK-NEXT:     %[[C32:.*]] = arith.constant 32 : index
// CHECK-NEXT:     %[[CHUNK:.*]] = arith.remui %[[FLAT]], %[[C32]] : index
// CHECK-NEXT:     %[[ROW:.*]] = arith.divui %[[FLAT]], %[[C32]] : index
// CHECK-NEXT:     %[[C4:.*]] = arith.constant 4 : index
// CHECK-NEXT:     %[[COL:.*]] = arith.muli %[[CHUNK]], %[[C4]] : index
// CHECK-NEXT:     %[[X0:.*]], %[[X1:.*]], %[[X2:.*]], %[[X3:.*]] = tile.vload %[[X]][%[[ROW]], %[[COL]]] : memref<64x128xf32> -> f32, f32, f32, f32
// CHECK-NEXT:     %[[B0:.*]], %[[B1:.*]], %[[B2:.*]], %[[B3:.*]] = tile.vload %[[B]][%[[COL]]] : memref<128xf32> -> f32, f32, f32, f32
// CHECK-NEXT:     %[[A0:.*]] = arith.addf %[[X0]], %[[B0]] : f32
// CHECK-NEXT:     %[[A1:.*]] = arith.addf %[[X1]], %[[B1]] : f32
// CHECK-NEXT:     %[[A2:.*]] = arith.addf %[[X2]], %[[B2]] : f32
// CHECK-NEXT:     %[[A3:.*]] = arith.addf %[[X3]], %[[B3]] : f32
// CHECK-NEXT:     %[[E0:.*]] = math.exp %[[A0]] : f32
// CHECK-NEXT:     %[[E1:.*]] = math.exp %[[A1]] : f32
// CHECK-NEXT:     %[[E2:.*]] = math.exp %[[A2]] : f32
// CHECK-NEXT:     %[[E3:.*]] = math.exp %[[A3]] : f32
// CHECK-NEXT:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:     %[[SV:.*]] = memref.load %[[S]][%[[ROW]], %[[C0]]] : memref<64x1xf32>
// CHECK-NEXT:     %[[M0:.*]] = arith.mulf %[[E0]], %[[SV]] : f32
// CHECK-NEXT:     %[[M1:.*]] = arith.mulf %[[E1]], %[[SV]] : f32
// CHECK-NEXT:     %[[M2:.*]] = arith.mulf %[[E2]], %[[SV]] : f32
// CHECK-NEXT:     %[[M3:.*]] = arith.mulf %[[E3]], %[[SV]] : f32
// CHECK-NEXT:     tile.vstore(%[[M0]], %[[M1]], %[[M2]], %[[M3]] : f32, f32, f32, f32), %[[OUT]][%[[ROW]], %[[COL]]] : memref<64x128xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK:      loop.launch @f_0

// vec=2 halves the vectors (4096 of them), threads=128 sets the block: grid 32.
// KNOBS:      tile.kernel @f_0 grid [32, 1, 1] block [128, 1, 1]
// KNOBS:        tile.vload %{{.*}}[%{{.*}}, %{{.*}}] : memref<64x128xf32> -> f32, f32
// KNOBS-NEXT:   tile.vload %{{.*}}[%{{.*}}] : memref<128xf32> -> f32, f32
// KNOBS:        memref.load %{{.*}} : memref<64x1xf32>
// KNOBS:        tile.vstore(%{{.*}}, %{{.*}} : f32, f32), %{{.*}} : memref<64x128xf32>

func.func @f(%x: tensor<64x128xf32>, %b: tensor<128xf32>, %s: tensor<64x1xf32>) -> tensor<64x128xf32> {
  %bb = graph.broadcast %b : tensor<128xf32> -> tensor<64x128xf32>
  %y = graph.add %x, %bb : tensor<64x128xf32>
  %e = graph.exp %y : tensor<64x128xf32>
  %sb = graph.broadcast %s : tensor<64x1xf32> -> tensor<64x128xf32>
  %z = graph.mul %e, %sb : tensor<64x128xf32>
  func.return %z : tensor<64x128xf32>
}
