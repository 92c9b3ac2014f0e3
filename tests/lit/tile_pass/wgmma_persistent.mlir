// RUN: tinyopt %s -p 'fuse,tile{mma=wgmma bn=128 persistent=1 store=smem}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{mma=wgmma bn=128 persistent=1}' | filecheck %s --check-prefix=TMA
// RUN: not tinyopt %s -p 'fuse,tile{mma=wgmma ws=0 persistent=1}' 2>&1 | filecheck %s --check-prefix=WS0

// persistent=1: one block per SM (132) walks the 16 x 17 = 272 tiles of 128 x 128, block b
// taking tiles b, b + 132, ... (ceil((272 - b) / 132) of them), n fastest. The producer's
// and the consumers' K loops count ring steps on across tiles (turn x 3 K steps + step), so
// the slots and mbarrier phases of the 6-slot ring (128 x 128 tiles) carry over: the producer fills the next tile's slots while
// the consumers run the epilogue. After a tile's last wgmma the consumers release its last
// slot themselves (no next K step does), and the staged epilogue meets at its barrier before
// it overwrites the staging tile the previous tile's epilogue read.

// CHECK:      tile.kernel @mm_0 grid [132, 1, 1] block [384, 1, 1]
// CHECK:        tile.setmaxnreg 40
// CHECK:          %[[BLOCK:.*]] = tile.block_id x
// CHECK-NEXT:     %[[TILES:.*]] = arith.constant 272 : index
// CHECK-NEXT:     %[[LEFT:.*]] = arith.subi %[[TILES]], %[[BLOCK]] : index
// CHECK:          %[[MINE:.*]] = arith.divui %{{.*}}, %{{.*}} : index
// CHECK:          scf.for %[[TURN:.*]] = %{{.*}} to %[[MINE]] step %{{.*}} {
// CHECK-NEXT:       %[[STRIDE:.*]] = arith.muli %[[TURN]], %{{.*}} : index
// CHECK-NEXT:       %[[TILE:.*]] = arith.addi %[[BLOCK]], %[[STRIDE]] : index
// CHECK:            %[[FIRST:.*]] = arith.muli %[[TURN]], %{{.*}} : index
// CHECK-NEXT:       scf.for %[[STEP:.*]] = {{.*}} {
// CHECK-NEXT:         %[[RING:.*]] = arith.addi %[[FIRST]], %[[STEP]] : index
// CHECK:              %[[SLOT:.*]] = arith.remui %[[RING]], %{{.*}} : index
// CHECK:              tile.mbarrier_wait %{{.*}}[%[[SLOT]]]
// CHECK:              tile.tma_load
// CHECK:        tile.setmaxnreg inc 232
// CHECK:        scf.for
// CHECK:          scf.for
// CHECK:            tile.wgmma_wait 1
// CHECK:          tile.wgmma_wait 0
// CHECK-NEXT:     %[[LAST:.*]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK-NEXT:     %[[LAST_SLOT:.*]] = arith.remui %[[LAST]], %{{.*}} : index
// CHECK-NEXT:     tile.mbarrier_arrive %{{.*}}[%[[LAST_SLOT]]]
// CHECK:          tile.named_barrier
// CHECK-NEXT:     memref.load %{{.*}}[%{{.*}}] : memref<64xf32, 5 : i32>

// store=auto on a persistent grid: the TMA-store epilogue (wgmma.py `_store`), whose
// warpgroup leader waits until the last tile's boxes have read the output tile before the
// warpgroup writes it again.
// TMA:        store = "tma", persistent = 1
// TMA:        tile.wgmma_wait 0
// TMA:        tile.bulk_wait read
// TMA-NEXT:   }
// TMA-NEXT:   %{{.*}} = arith.addi
// TMA-NEXT:   tile.named_barrier
// TMA:        tile.tma_store

// WS0: tile: mma=wgmma persistent=1 needs ws=1 (the producer warpgroup runs ahead into a block's next tile)

func.func @mm(%a: tensor<2000x136xbf16>, %b: tensor<136x2104xbf16>) -> tensor<2000x2104xbf16> {
  %c = graph.matmul %a, %b : (tensor<2000x136xbf16>, tensor<136x2104xbf16>) -> tensor<2000x2104xbf16>
  func.return %c : tensor<2000x2104xbf16>
}
