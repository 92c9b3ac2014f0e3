// RUN: tinyopt %s -p 'fuse,tile{streamk=on}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile' | filecheck %s --check-prefix=AUTO
// RUN: tinyopt %s -p 'fuse,tile{streamk=tail}' | filecheck %s --check-prefix=TAIL
// RUN: not tinyopt %s -p 'fuse,tile{streamk=on copy=cp_async}' 2>&1 | filecheck %s --check-prefix=REFUSED
// RUN: not tinyopt %s -p 'fuse,tile{streamk=tail copy=tma}' 2>&1 | filecheck %s --check-prefix=TAIL-REFUSED

// streamk=on at 4096x4096x4096: 1024 tiles of 128x128 on 264 block slots (3.88 waves) with
// 256 K steps each, so one wave of 264 blocks shares the 262144 steps, two at a time (992 or
// 994 each). The host allocates the partial-sum workspace [264, 8*8, 256 threads] and 264
// flags, which a zeroing kernel clears before each launch.
// CHECK:      tile.kernel @mm_0_flags grid
// CHECK:      tile.kernel @mm_0 grid [264, 1, 1] block [256, 1, 1]
// CHECK-SAME:   memref<264x64x256xf32>, %{{.*}}: memref<264xi32>)
// CHECK-SAME:   tile.min_blocks = 2
// The block's first step (block * 262144 / 264) and its pieces of up to 5 tiles.
// CHECK:        arith.muli %{{.*}}, %{{.*}} : index
// CHECK:        scf.for %{{.*}} = %{{.*}} to %{{.*}} step
// A piece that starts a tile but ends before it waits for the next block's flag and adds
// that block's partial sums before the epilogue stores the tile.
// CHECK:        tile.flag_wait %{{.*}}[%{{.*}}] : memref<264xi32>
// CHECK:        tile.barrier
// CHECK:        memref.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<264x64x256xf32>
// CHECK:        tile.vstore
// A piece that starts inside a tile writes its sums, fences, meets, and sets its flag.
// CHECK:        memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<264x64x256xf32>
// CHECK:        tile.threadfence
// CHECK-NEXT:   tile.barrier
// CHECK:        tile.flag_set %{{.*}}[%{{.*}}] : memref<264xi32>
// CHECK:      func.func @mm
// CHECK:        memref.alloc() : memref<264x64x256xf32>
// CHECK-NEXT:   memref.alloc() : memref<264xi32>
// CHECK-NEXT:   loop.launch @mm_0_flags
// CHECK-NEXT:   loop.launch @mm_0

// streamk=auto leaves 4096^3 one block per tile (3.88 waves: too many for the handoffs to
// pay) and shares 2560x2560x8192 (400 tiles, 1.52 waves, half the slots idle in the second).
// AUTO:       tile.kernel @mm_0 grid [32, 32, 1] block [256, 1, 1]
// AUTO-NOT:   tile.flag
// AUTO:       tile.kernel @few_waves_0 grid [264, 1, 1]
// AUTO:         tile.flag_wait

// streamk=tail at 4096^3: the 232 tiles past the 3 whole waves (1024 - 3 * 264) are shared by
// 264 blocks launched first; the 792 blocks after them run one whole tile each (tiles 232..),
// with no handoff.
// TAIL:       tile.kernel @mm_0 grid [1056, 1, 1] block [256, 1, 1]
// TAIL-SAME:    memref<264x64x256xf32>, %{{.*}}: memref<264xi32>)
// TAIL:         %[[BLOCK:.*]] = tile.block_id x
// TAIL:         %[[WHOLE:.*]] = arith.cmpi sge, %[[BLOCK]], %{{.*}} : index
// TAIL-NEXT:    scf.if %[[WHOLE]] {
// TAIL-NEXT:      %[[LATER:.*]] = arith.subi %[[BLOCK]], %{{.*}} : index
// TAIL:           %[[TILE:.*]] = arith.addi %[[LATER]], %{{.*}} : index
// TAIL-NOT:       tile.flag
// TAIL:         arith.cmpi ult, %[[BLOCK]], %{{.*}} : index
// TAIL:           tile.flag_wait
// TAIL:           tile.flag_set
// TAIL:       tile.kernel @few_waves_0 grid [528, 1, 1]

// REFUSED: tile: streamk=on does not apply: it stages K steps through registers only (copy=ld; here copy=cp_async)
// TAIL-REFUSED: tile: streamk=tail does not apply: it stages K steps through registers only (copy=ld; here copy=tma)

func.func @mm(%x: tensor<4096x4096xf32>, %w: tensor<4096x4096xf32>) -> tensor<4096x4096xf32> {
  %y = graph.matmul %x, %w : (tensor<4096x4096xf32>, tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  func.return %y : tensor<4096x4096xf32>
}

func.func @few_waves(%x: tensor<2560x8192xf32>, %w: tensor<8192x2560xf32>) -> tensor<2560x2560xf32> {
  %y = graph.matmul %x, %w : (tensor<2560x8192xf32>, tensor<8192x2560xf32>) -> tensor<2560x2560xf32>
  func.return %y : tensor<2560x2560xf32>
}
