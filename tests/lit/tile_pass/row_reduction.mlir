// RUN: tinyopt %s -p fuse,tile | filecheck %s

// softmax over rows of 2048: one block of 128 threads per row, each thread striding over the
// row in 4 vectors of 4. The row is read once into a 4x4 register array and reused by the max
// reduction, the sum reduction and the store loop. Each reduction folds the thread's elements
// with its combine region and then combines across the block with tile.block_reduce carrying
// that same combine: arith.maximumf first, then arith.addf.

// CHECK:      tile.kernel @softmax_0 grid [64, 1, 1] block [128, 1, 1] (%[[X:.*]]: memref<64x2048xf32>, %[[OUT:.*]]: memref<64x2048xf32>) attributes {plan = #tile.plan<{{.*}}>} {
// CHECK-NEXT:   %[[BID:.*]] = tile.block_id x
// CHECK-NEXT:   %[[TY:.*]] = tile.thread_id y
// CHECK-NEXT:   %[[ROW:.*]] = arith.addi %[[BID]], %[[TY]] : index
// CHECK-NEXT:   %[[LANE:.*]] = tile.thread_id x
// CHECK-NEXT:   %[[NINF:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:   %[[REGS:.*]] = tile.alloc : memref<4x4xf32, 5 : i32>
// CHECK-NEXT:   %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:   %[[C4:.*]] = arith.constant 4 : index
// CHECK-NEXT:   %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:   scf.for %[[STEP:.*]] = %[[C0]] to %[[C4]] step %[[C1]] {
// CHECK-NEXT:     %[[C128:.*]] = arith.constant 128 : index
// CHECK-NEXT:     %[[OFF:.*]] = arith.muli %[[STEP]], %[[C128]] : index
// CHECK-NEXT:     %[[CHUNK:.*]] = arith.addi %[[LANE]], %[[OFF]] : index
// CHECK-NEXT:     %[[COL:.*]] = arith.muli %[[CHUNK]], %[[C4]] : index
// CHECK-NEXT:     %[[V0:.*]], %[[V1:.*]], %[[V2:.*]], %[[V3:.*]] = tile.vload %[[X]][%[[ROW]], %[[COL]]] : memref<64x2048xf32> -> f32, f32, f32, f32
// CHECK-NEXT:     memref.store %[[V0]], %[[REGS]][%[[STEP]], %[[C0]]] : memref<4x4xf32, 5 : i32>
// CHECK-NEXT:     memref.store %[[V1]], %[[REGS]][%[[STEP]], %[[C1]]] : memref<4x4xf32, 5 : i32>
// CHECK:          memref.store %[[V3]], %[[REGS]][%[[STEP]], %{{.*}}] : memref<4x4xf32, 5 : i32>
// CHECK-NEXT:   } {tile.unroll}

// The max: a per-thread fold over the registers, then the block-wide combine.
// CHECK-NEXT:   %[[PMAX:.*]] = scf.for %{{.*}} = %[[C0]] to %[[C4]] step %[[C1]] iter_args(%{{.*}} = %[[NINF]]) -> (f32) {
// CHECK-NOT:      tile.vload
// CHECK:          memref.load %[[REGS]]
// CHECK:          arith.maximumf
// CHECK:          scf.yield %{{.*}} : f32
// CHECK-NEXT:   } {tile.unroll}
// CHECK-NEXT:   %[[MAX:.*]] = tile.block_reduce %[[PMAX]] : f32 combine(%[[A:.*]], %[[B:.*]]) {
// CHECK-NEXT:     %[[C:.*]] = arith.maximumf %[[A]], %[[B]] : f32
// CHECK-NEXT:     tile.yield %[[C]] : f32
// CHECK-NEXT:   }

// The sum of exp(x - max), also from the registers.
// CHECK-NEXT:   %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:   %[[PSUM:.*]] = scf.for %{{.*}} = %[[C0]] to %[[C4]] step %[[C1]] iter_args(%{{.*}} = %[[ZERO]]) -> (f32) {
// CHECK-NOT:      tile.vload
// CHECK:          memref.load %[[REGS]]
// CHECK:          arith.subf %{{.*}}, %[[MAX]] : f32
// CHECK:          math.exp
// CHECK:          arith.addf
// CHECK:          scf.yield %{{.*}} : f32
// CHECK-NEXT:   } {tile.unroll}
// CHECK-NEXT:   %[[SUM:.*]] = tile.block_reduce %[[PSUM]] : f32 combine(%[[P:.*]], %[[Q:.*]]) {
// CHECK-NEXT:     %[[R:.*]] = arith.addf %[[P]], %[[Q]] : f32
// CHECK-NEXT:     tile.yield %[[R]] : f32
// CHECK-NEXT:   }

// The store loop reads the registers again and writes one vector per step.
// CHECK-NEXT:   scf.for %[[S:.*]] = %[[C0]] to %[[C4]] step %[[C1]] {
// CHECK-NOT:      tile.vload
// CHECK:          %[[OCOL:.*]] = arith.muli %{{.*}}, %[[C4]] : index
// CHECK:          memref.load %[[REGS]][%[[S]], %[[C0]]] : memref<4x4xf32, 5 : i32>
// CHECK:          %[[Y0:.*]] = arith.divf %{{.*}}, %[[SUM]] : f32
// CHECK-NEXT:     %[[Y1:.*]] = arith.divf %{{.*}}, %[[SUM]] : f32
// CHECK-NEXT:     %[[Y2:.*]] = arith.divf %{{.*}}, %[[SUM]] : f32
// CHECK-NEXT:     %[[Y3:.*]] = arith.divf %{{.*}}, %[[SUM]] : f32
// CHECK-NEXT:     tile.vstore(%[[Y0]], %[[Y1]], %[[Y2]], %[[Y3]] : f32, f32, f32, f32), %[[OUT]][%[[ROW]], %[[OCOL]]] : memref<64x2048xf32>
// CHECK-NEXT:   } {tile.unroll}
// CHECK-NEXT: }

// A short row (128 = 32 vectors of 4) gets one warp per row and 8 rows per block:
// the reductions are tile.warp_reduce over the 32 lanes, and the row still sits in registers.
// CHECK:      tile.kernel @short_0 grid [8, 1, 1] block [32, 8, 1]
// CHECK:        tile.alloc : memref<1x4xf32, 5 : i32>
// CHECK:        tile.vload %{{.*}} : memref<64x128xf32> -> f32, f32, f32, f32
// CHECK-NOT:    tile.vload
// CHECK:        tile.warp_reduce %{{.*}} : f32 attributes {width = 32 : i64} combine(%{{.*}}, %{{.*}}) {
// CHECK-NEXT:     arith.maximumf
// CHECK:        tile.warp_reduce %{{.*}} : f32 attributes {width = 32 : i64} combine(%{{.*}}, %{{.*}}) {
// CHECK-NEXT:     arith.addf
// CHECK-NOT:    tile.vload
// CHECK:        tile.vstore(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : f32, f32, f32, f32), %{{.*}} : memref<64x128xf32>

func.func @softmax(%x: tensor<64x2048xf32>) -> tensor<64x2048xf32> {
  %y = graph.softmax %x {dim = 1 : i64} : tensor<64x2048xf32>
  func.return %y : tensor<64x2048xf32>
}

func.func @short(%x: tensor<64x128xf32>) -> tensor<64x128xf32> {
  %y = graph.softmax %x {dim = 1 : i64} : tensor<64x128xf32>
  func.return %y : tensor<64x128xf32>
}
