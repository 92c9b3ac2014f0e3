// RUN: tinyopt %s -p 'fuse,tile{threads=32 rows=4}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{threads=32 rows=4 cache=0}' | filecheck %s --check-prefix=NOCACHE

// softmax over 64 rows of 256 with one warp per row and 4 rows per block: block [32, 4, 1],
// grid 64 / 4 = 16; the row of a block is block_id.x * 4 + thread_id.y and the lane is
// thread_id.x. Each lane holds 256 / 4 / 32 = 2 vectors of the row in registers (2x4), and
// both reductions are warp shuffles over 32 lanes.

// CHECK:      tile.kernel @softmax_0 grid [16, 1, 1] block [32, 4, 1] (%[[X:.*]]: memref<64x256xf32>, %[[OUT:.*]]: memref<64x256xf32>) attributes {plan = #tile.plan<{{.*}}>} {
// CHECK-NEXT:   %[[BID:.*]] = tile.block_id x
// CHECK-NEXT:   %[[C4:.*]] = arith.constant 4 : index
// CHECK-NEXT:   %[[BASE:.*]] = arith.muli %[[BID]], %[[C4]] : index
// CHECK-NEXT:   %[[TY:.*]] = tile.thread_id y
// CHECK-NEXT:   %[[ROW:.*]] = arith.addi %[[BASE]], %[[TY]] : index
// CHECK-NEXT:   %[[LANE:.*]] = tile.thread_id x
// CHECK-NEXT:   %{{.*}} = arith.constant 0xff800000 : f32
// CHECK-NEXT:   %[[REGS:.*]] = tile.alloc : memref<2x4xf32, 5 : i32>
// CHECK:        tile.vload %[[X]][%[[ROW]], %{{.*}}] : memref<64x256xf32> -> f32, f32, f32, f32
// CHECK-NOT:    tile.vload
// CHECK:        tile.warp_reduce %{{.*}} : f32 attributes {width = 32 : i64} combine(%[[A:.*]], %[[B:.*]]) {
// CHECK-NEXT:     arith.maximumf %[[A]], %[[B]] : f32
// CHECK-NOT:    tile.vload
// CHECK:        tile.warp_reduce %{{.*}} : f32 attributes {width = 32 : i64} combine(%[[P:.*]], %[[Q:.*]]) {
// CHECK-NEXT:     arith.addf %[[P]], %[[Q]] : f32
// CHECK-NOT:    tile.vload
// CHECK:        memref.load %[[REGS]]
// CHECK:        tile.vstore(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : f32, f32, f32, f32), %[[OUT]][%[[ROW]], %{{.*}}] : memref<64x256xf32>
// CHECK-NOT:  tile.block_reduce

// cache=0: no register array; each of the three loops loads its own vectors of the row.
// NOCACHE:      tile.kernel @softmax_0 grid [16, 1, 1] block [32, 4, 1]
// NOCACHE-NOT:  tile.alloc
// NOCACHE:      scf.for {{.*}} iter_args
// NOCACHE:        tile.vload %{{.*}} : memref<64x256xf32> -> f32, f32, f32, f32
// NOCACHE:      tile.warp_reduce {{.*}} {width = 32 : i64}
// NOCACHE-NEXT:   arith.maximumf
// NOCACHE-NOT:  tile.alloc
// NOCACHE:      scf.for {{.*}} iter_args
// NOCACHE:        tile.vload %{{.*}} : memref<64x256xf32> -> f32, f32, f32, f32
// NOCACHE:      tile.warp_reduce {{.*}} {width = 32 : i64}
// NOCACHE-NEXT:   arith.addf
// NOCACHE-NOT:  tile.alloc
// NOCACHE:      scf.for
// NOCACHE:        tile.vload %{{.*}} : memref<64x256xf32> -> f32, f32, f32, f32
// NOCACHE-NOT:    memref.load
// NOCACHE:        tile.vstore
// NOCACHE-NOT:  tile.alloc
// NOCACHE:      func.func @softmax

func.func @softmax(%x: tensor<64x256xf32>) -> tensor<64x256xf32> {
  %y = graph.softmax %x {dim = 1 : i64} : tensor<64x256xf32>
  func.return %y : tensor<64x256xf32>
}
