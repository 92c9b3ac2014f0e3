// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,tile' | filecheck %s
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,tile{attn=sync}' | filecheck %s --check-prefix=SYNC
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,tile{aoverlap=off}' | filecheck %s --check-prefix=OFF
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,tile{apingpong=off}' | filecheck %s --check-prefix=SOLO
// RUN: not tinyopt %s -p 'decompose,fuse,flash-attention,tile{attn=wgmma aoverlap=off apingpong=on}' 2>&1 | filecheck %s --check-prefix=BAD
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,tile{sms=2}' | filecheck %s --check-prefix=TWO-SMS
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,tile{sms=2 persistent=0}' | filecheck %s --check-prefix=ONE-BLOCK

// Causal bf16 attention, S = 200 (not a multiple of the 128-row or 192-key tiles), D = 64.
// The default (attn=auto) takes the Hopper schedule: 384 threads, q, k and v passed as tensor
// maps copying 128 rows (Q) or 192 keys (K, V: akeys=auto at D <= 64) x 64 columns (128-byte
// swizzle). persistent=auto: the 4 work items (2
// query tiles x 2 heads) are walked by min(4, 132 SMs) = 4 blocks, block b taking items b, b +
// 4, ...; each item's heads come fastest (K and V fit in L2) and its query tiles from the last
// (longest) one. A producer warpgroup (40 registers) copies each item's Q into one of two Q
// slots (aqslots=auto on a persistent grid: item k's slot k % 2, free once item k - 2
// released it, q_empty) and its K(t), V(t) into two-slot rings guarded by full/empty
// mbarriers, the rings' slots counted across the block's items; two consumer warpgroups (232 registers) run S =
// Q.K^T as D/16 = 4 wgmma m64n192k16 from shared memory, then P.V as 192/16 = 12 wgmma with P
// packed in registers (wgmma_reg_a, V N-major).

// CHECK:      tile.kernel @attention_2 grid [4, 1, 1] block [384, 1, 1]
// CHECK-SAME: tile.tensor_maps = [{arg = 0 : i64, box = array<i64: 1, 1, 128, 64>, swizzle = 128 : i64}, {arg = 1 : i64, box = array<i64: 1, 1, 192, 64>, swizzle = 128 : i64}, {arg = 2 : i64, box = array<i64: 1, 1, 192, 64>, swizzle = 128 : i64}]
// CHECK:        %[[Q:.*]] = tile.alloc dynamic : memref<2x1x128x64xbf16, 3 : i32>
// CHECK-NEXT:   %[[K:.*]] = tile.alloc dynamic : memref<2x1x192x64xbf16, 3 : i32>
// CHECK-NEXT:   %[[V:.*]] = tile.alloc dynamic : memref<2x1x192x64xbf16, 3 : i32>
// CHECK-NEXT:   %[[QFULL:.*]] = tile.alloc : memref<2xi64, 3 : i32>
// CHECK-NEXT:   %[[QEMPTY:.*]] = tile.alloc : memref<2xi64, 3 : i32>
// CHECK-NEXT:   %[[KFULL:.*]] = tile.alloc : memref<2xi64, 3 : i32>
// CHECK-NEXT:   %[[VFULL:.*]] = tile.alloc : memref<2xi64, 3 : i32>
// CHECK-NEXT:   %[[KEMPTY:.*]] = tile.alloc : memref<2xi64, 3 : i32>
// CHECK-NEXT:   %[[VEMPTY:.*]] = tile.alloc : memref<2xi64, 3 : i32>
// CHECK:        tile.mbarrier_init %[[QEMPTY]][%{{.*}}] count 256
// CHECK:        tile.mbarrier_init %[[KEMPTY]][%{{.*}}] count 256
// The warpgroup (threadIdx.x / 128) as lane 0 holds it: the role branches are warp-uniform.
// CHECK:        %[[GROUP:.*]] = tile.warp_uniform %{{.*}}
// CHECK-NEXT:   arith.cmpi eq, %[[GROUP]], %{{.*}} : index
// CHECK:        tile.setmaxnreg 40
// CHECK:        %[[BLOCK:.*]] = tile.block_id x
// CHECK-NEXT:   %[[FOUR:.*]] = arith.constant 4 : index
// CHECK-NEXT:   scf.for %[[W:.*]] = %[[BLOCK]] to %[[FOUR]] step %[[FOUR]] iter_args(%[[ITEM:.*]] = %{{.*}}, %[[RAN:.*]] = %{{.*}}) -> (index, index) {
// CHECK-NEXT:     %[[TWO:.*]] = arith.constant 2 : index
// CHECK-NEXT:     %[[HEAD:.*]] = arith.remui %[[W]], %[[TWO]] : index
// CHECK-NEXT:     %[[TILE:.*]] = arith.divui %[[W]], %[[TWO]] : index
// CHECK-NEXT:     %[[LAST:.*]] = arith.constant 1 : index
// CHECK-NEXT:     arith.subi %[[LAST]], %[[TILE]] : index
// CHECK:          tile.mbarrier_wait %[[QEMPTY]]
// CHECK-NEXT:     tile.mbarrier_arrive_expect_tx %[[QFULL]][%{{.*}}] bytes 16384
// CHECK-NEXT:     tile.tma_load %{{.*}}[%{{.*}}, %[[HEAD]], %{{.*}}, %{{.*}}] -> %[[Q]]
// CHECK:          arith.addi %[[RAN]], %{{.*}} : index
// CHECK:          tile.mbarrier_wait %[[KEMPTY]]
// CHECK-NEXT:     tile.mbarrier_arrive_expect_tx %[[KFULL]]
// CHECK-NEXT:     tile.tma_load %{{.*}} -> %[[K]]
// CHECK:          tile.mbarrier_wait %[[VEMPTY]]
// CHECK-NEXT:     tile.mbarrier_arrive_expect_tx %[[VFULL]]
// CHECK-NEXT:     tile.tma_load %{{.*}} -> %[[V]]
// CHECK:        tile.setmaxnreg inc 232
// CHECK:        %[[O:.*]] = tile.alloc : memref<32xf32, 5 : i32>
// CHECK-NEXT:   %[[S:.*]] = tile.alloc : memref<96xf32, 5 : i32>
// CHECK-NEXT:   %[[S16:.*]] = tile.alloc : memref<8xf32, 5 : i32>
// CHECK-NEXT:   %[[P:.*]] = tile.alloc : memref<12x4xi32, 5 : i32>
// CHECK-NEXT:   %[[MINE:.*]] = arith.addi %[[GROUP:.*]], %[[ONE:.*]] : index
// CHECK-NEXT:   %[[TWO:.*]] = arith.constant 2 : index
// CHECK-NEXT:   %[[OTHER:.*]] = arith.subi %[[TWO]], %[[GROUP]] : index
// CHECK-NEXT:   %[[SECOND:.*]] = arith.cmpi eq, %[[GROUP]], %[[ONE]] : index
// CHECK-NEXT:   scf.if %[[SECOND]] {
// CHECK-NEXT:     tile.named_barrier %[[ONE]], 256 : i64 arrive
// CHECK-NEXT:   }
// CHECK:        scf.for
// CHECK:        tile.mbarrier_wait %[[QFULL]]

// aoverlap=auto (on): the first key tile's S, its softmax, and P kept in registers; then per
// tile t, S(t) and P(t-1).V(t-1) are in flight together, the softmax of tile t runs once S(t)
// is done (wait 1) while P.V still runs, and O is rescaled after it (wait 0); the last tile's
// P.V follows the loop. The first wgmma of S overwrites it (no zeroing). apingpong=auto (on):
// the consumer warpgroups issue those products in turns, each waiting at its named barrier
// (1 + group) and arriving at the other's (256 threads: both warpgroups); the second lets the
// first start, and the first takes the second's last arrival after the block's last item. Q is
// released (q_empty) once the item's last S is done, so the producer copies the next item's Q
// during the last P.V and the epilogue. atail=auto: the second query tile's keys end 8 past
// its first 192-key tile, so its last tile is narrowed: the second warpgroup (rows 192-255,
// of which 192-199 are queries) computes 16 keys of it, the first (rows 128-191) none. The loop
// runs the whole tiles; then at 0 keys the step is the previous tile's P.V alone, K and then
// V released unread; at 16 keys it computes S as m64n16k16 (8 accumulators of its own), its
// softmax over 16 columns and one P fragment, and the last P.V is one wgmma; where the last
// tile is whole (the first query tile's only tile) the whole P.V runs.
// CHECK:        tile.mbarrier_wait %[[KFULL]]
// CHECK-NEXT:   tile.wgmma_fence
// CHECK-NEXT:   tile.wgmma %[[S]], %[[Q]][{{.*}}], %[[K]][{{.*}}] overwrite {n = 192 : i64, a_sbo = 1024 : i64, b_lbo = 16 : i64, b_sbo = 1024 : i64}
// CHECK-COUNT-3: tile.wgmma %[[S]]
// CHECK-NEXT:   tile.wgmma_commit
// CHECK-NEXT:   tile.wgmma_wait 0
// CHECK-NEXT:   tile.mbarrier_arrive %[[KEMPTY]]
// CHECK:        tile.pack
// CHECK:        memref.store %{{.*}}, %[[P]]
// CHECK:        scf.for
// CHECK:        tile.mbarrier_wait %[[KFULL]]
// CHECK-NEXT:   tile.mbarrier_wait %[[VFULL]]
// CHECK-NEXT:   memref.load %[[P]]
// CHECK:        tile.named_barrier %[[MINE]], 256 : i64
// CHECK-NEXT:   tile.wgmma_fence
// CHECK-NEXT:   tile.wgmma %[[S]], {{.*}} overwrite
// CHECK-COUNT-3: tile.wgmma %[[S]]
// CHECK-NEXT:   tile.wgmma_commit
// CHECK-NEXT:   tile.wgmma_reg_a %[[O]], {{{.*}}}, %[[V]][{{.*}}] mn_major {n = 64 : i64, b_lbo = 24576 : i64, b_sbo = 1024 : i64}
// CHECK-COUNT-11: tile.wgmma_reg_a %[[O]]
// CHECK-NEXT:   tile.wgmma_commit
// CHECK-NEXT:   tile.named_barrier %[[OTHER]], 256 : i64 arrive
// CHECK-NEXT:   tile.wgmma_wait 1
// CHECK-NEXT:   tile.mbarrier_arrive %[[KEMPTY]]
// CHECK:        math.exp2
// CHECK-NOT:    tile.pack
// CHECK:        tile.wgmma_wait 0
// CHECK-NEXT:   tile.mbarrier_arrive %[[VEMPTY]]
// CHECK:        arith.mulf
// CHECK:        tile.pack
// CHECK-COUNT-48: memref.store %{{.*}}, %[[P]]
// CHECK-NEXT:   }
// CHECK-NEXT:   arith.cmpi ult
// CHECK-NEXT:   %[[PASS:.*]] = arith.andi
// CHECK-NEXT:   scf.if %[[PASS]] {
// CHECK:          tile.named_barrier %[[MINE]], 256 : i64
// CHECK-NEXT:     tile.wgmma_fence
// CHECK-NEXT:     tile.wgmma_reg_a %[[O]]
// CHECK-COUNT-11: tile.wgmma_reg_a %[[O]]
// CHECK-NEXT:     tile.wgmma_commit
// CHECK-NEXT:     tile.named_barrier %[[OTHER]], 256 : i64 arrive
// CHECK-NEXT:     tile.mbarrier_arrive %[[KEMPTY]]
// CHECK-NEXT:     tile.wgmma_wait 0
// CHECK-NEXT:     tile.mbarrier_arrive %[[VEMPTY]]
// CHECK-NEXT:   }
// CHECK:        scf.if %[[NARROW:.*]] {
// CHECK:          tile.named_barrier %[[MINE]], 256 : i64
// CHECK-NEXT:     tile.wgmma_fence
// CHECK-NEXT:     tile.wgmma %[[S16]], {{.*}} overwrite {n = 16 : i64
// CHECK-COUNT-3:  tile.wgmma %[[S16]]
// CHECK-NEXT:     tile.wgmma_commit
// CHECK-COUNT-12: tile.wgmma_reg_a %[[O]]
// CHECK:          tile.pack
// CHECK-COUNT-4:  memref.store %{{.*}}, %[[P]]
// CHECK-NEXT:   }
// CHECK-NEXT:   tile.mbarrier_arrive %[[QEMPTY]]
// CHECK:        scf.if %[[PASS]] {
// CHECK-NEXT:     tile.mbarrier_wait %[[VFULL]]
// CHECK-NEXT:     tile.mbarrier_arrive %[[VEMPTY]]
// CHECK-NEXT:   }
// CHECK-NEXT:   scf.if %[[NARROW]] {
// CHECK-NEXT:     tile.mbarrier_wait %[[VFULL]]
// CHECK-COUNT-4:  memref.load %[[P]]
// CHECK-NEXT:     tile.wgmma_fence
// CHECK-NEXT:     tile.wgmma_reg_a %[[O]]
// CHECK-NEXT:     tile.wgmma_commit
// CHECK-NEXT:     tile.wgmma_wait 0
// CHECK-NEXT:     tile.mbarrier_arrive %[[VEMPTY]]
// CHECK-NEXT:   }
// CHECK:        scf.if
// CHECK-NEXT:     tile.mbarrier_wait %[[VFULL]]
// CHECK:          tile.wgmma_fence
// CHECK-NEXT:     tile.wgmma_reg_a %[[O]]
// CHECK-COUNT-11: tile.wgmma_reg_a %[[O]]
// CHECK-NEXT:     tile.wgmma_commit
// CHECK-NEXT:     tile.wgmma_wait 0
// CHECK-NEXT:     tile.mbarrier_arrive %[[VEMPTY]]
// CHECK:        scf.yield
// CHECK-NEXT:   }
// CHECK-NEXT:   %[[FIRST:.*]] = arith.cmpi eq, %[[GROUP]], %{{.*}} : index
// CHECK-NEXT:   scf.if %[[FIRST]] {
// CHECK-NEXT:     tile.named_barrier %[[ONE]], 256 : i64
// CHECK-NEXT:   }

// Planned for 2 SMs, 2 persistent blocks walk the 4 items (item w = block + 2k); with
// persistent=0, one block per item, and one Q slot (no next item to copy ahead).
// TWO-SMS:      tile.kernel @attention_2 grid [2, 1, 1]
// TWO-SMS:      %[[TWO:.*]] = arith.constant 2 : index
// TWO-SMS:      scf.for %{{.*}} = %{{.*}} to %{{.*}} step %[[TWO]] iter_args
// ONE-BLOCK:    tile.kernel @attention_2 grid [4, 1, 1]
// ONE-BLOCK-SAME: q_slots = 1>
// ONE-BLOCK:    tile.alloc dynamic : memref<1x1x128x64xbf16, 3 : i32>

// apingpong=off: no named barriers.
// SOLO:         tile.setmaxnreg inc 232
// SOLO-NOT:     tile.named_barrier
// SOLO:         tile.wgmma_wait 1
// SOLO-NOT:     tile.named_barrier

// aoverlap=off: per key tile S, wait, release K, softmax, P.V, wait, release V; the narrowed
// last tile (16 keys) after the loop.
// OFF:          tile.setmaxnreg inc 232
// OFF:          %[[S:.*]] = tile.alloc : memref<96xf32, 5 : i32>
// OFF:          scf.for
// OFF:          scf.for
// OFF:          tile.mbarrier_wait
// OFF-NEXT:     tile.wgmma_fence
// OFF-NEXT:     tile.wgmma %[[S]], {{.*}} overwrite
// OFF-COUNT-3:  tile.wgmma %[[S]]
// OFF-NEXT:     tile.wgmma_commit
// OFF-NEXT:     tile.wgmma_wait 0
// OFF:          math.exp2
// OFF:          tile.pack
// OFF:          tile.wgmma_fence
// OFF-NEXT:     tile.wgmma_reg_a
// OFF-COUNT-11: tile.wgmma_reg_a
// OFF-NEXT:     tile.wgmma_commit
// OFF-NEXT:     tile.wgmma_wait 0
// OFF-NEXT:     tile.mbarrier_arrive
// OFF-NEXT:     }
// OFF:          scf.if
// OFF:          tile.wgmma %{{.*}} overwrite {n = 16 : i64
// OFF:          tile.wgmma_fence
// OFF-NEXT:     tile.wgmma_reg_a
// OFF-NEXT:     tile.wgmma_commit
// OFF-NOT:      tile.wgmma_reg_a

// BAD: attn=wgmma apingpong=on takes turns over the overlapped key loop: not with aoverlap=off

// attn=sync: the mma.sync schedule (4 warps, cp.async, ldmatrix).
// SYNC:       tile.kernel @attention_2 grid [2, 2, 1] block [128, 1, 1]
// SYNC:       tile.cp_async
// SYNC:       tile.ldmatrix
// SYNC:       tile.mma_sync
// SYNC-NOT:   tile.wgmma

func.func @attention(%q: tensor<1x2x200x64xbf16>, %k: tensor<1x2x200x64xbf16>, %v: tensor<1x2x200x64xbf16>) -> tensor<1x2x200x64xbf16> {
  %y = graph.attention %q, %k, %v {scale = 0.125 : f32, causal = true} : (tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16>, tensor<1x2x200x64xbf16>) -> tensor<1x2x200x64xbf16>
  func.return %y : tensor<1x2x200x64xbf16>
}
