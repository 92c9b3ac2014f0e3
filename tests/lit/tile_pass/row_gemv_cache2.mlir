// RUN: tinyopt %s -p 'decompose,fuse,tile{cache=2}' | filecheck %s

// cache=2 on the row rule's GEMV: each thread first loads every vector of its weight row
// (evict-first, the streamed row first) and of x into register arrays (4 vectors of 8: 2048 /
// 64 threads / 8), then folds the products from registers: no load inside the reduction loop.

func.func @gemv(%x: tensor<1x2048xbf16>, %w: tensor<256x2048xbf16>) -> tensor<1x256xbf16> {
  %y = graph.linear %x, %w : (tensor<1x2048xbf16>, tensor<256x2048xbf16>) -> tensor<1x256xbf16>
  func.return %y : tensor<1x256xbf16>
}

// CHECK:      tile.kernel @gemv_0 grid [256, 1, 1] block [64, 1, 1] (%[[X:.*]]: memref<1x2048xbf16>, %[[W:.*]]: memref<256x2048xbf16>, %{{.*}}: memref<1x256xbf16>) attributes {plan = #tile.plan<row_reduction, {{.*}}cache = 2
// CHECK:        %[[WREGS:.*]] = tile.alloc : memref<4x8xbf16, 5 : i32>
// CHECK:        scf.for
// CHECK:          tile.vload %[[W]][{{.*}}] evict_first
// CHECK:        } {tile.unroll}
// CHECK:        %[[XREGS:.*]] = tile.alloc : memref<4x8xbf16, 5 : i32>
// CHECK:        scf.for
// CHECK:          tile.vload %[[X]][
// CHECK:        } {tile.unroll}
// CHECK:        scf.for {{.*}} iter_args
// CHECK-NOT:      tile.vload
// CHECK:          memref.load %[[WREGS]]
// CHECK-NOT:      tile.vload
// CHECK:        tile.block_reduce
