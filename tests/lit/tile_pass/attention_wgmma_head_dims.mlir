// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,tile' | filecheck %s
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,tile{attn=sync}' | filecheck %s --check-prefix=SYNC

// Head dims that are not 64 or 128 take the Hopper schedule too. D = 96 (@attention_2): each
// operand row is two 64-column chunks of 128-byte swizzle, the second half past the head dim
// (TMA fills zeros there, and its bytes count in the transaction: 128 rows x 128 columns x 2 =
// 32768). S = Q.K^T takes 96/16 = 6 K steps (none reads the tail), P.V is m64n96 (O is 48
// registers); Q has two slots (aqslots=auto). D = 256 (@attention_5): K/V tiles of 64 keys, so
// that Q (64 KiB, one slot: a second would not fit) and two-slot K and V rings (64 KiB each)
// fit in shared memory; S is m64n64 over 16 K steps, P.V m64n256 over 4.

// CHECK:      tile.kernel @attention_2 grid [2, 1, 1] block [384, 1, 1]
// CHECK-SAME: tile.tensor_maps = [{arg = 0 : i64, box = array<i64: 1, 1, 128, 64>, swizzle = 128 : i64}, {arg = 1 : i64, box = array<i64: 1, 1, 128, 64>, swizzle = 128 : i64}, {arg = 2 : i64, box = array<i64: 1, 1, 128, 64>, swizzle = 128 : i64}]
// CHECK:        %[[Q:.*]] = tile.alloc dynamic : memref<2x2x128x64xbf16, 3 : i32>
// CHECK-NEXT:   %[[K:.*]] = tile.alloc dynamic : memref<2x2x128x64xbf16, 3 : i32>
// CHECK-NEXT:   %[[V:.*]] = tile.alloc dynamic : memref<2x2x128x64xbf16, 3 : i32>
// CHECK:        tile.mbarrier_arrive_expect_tx %{{.*}} bytes 32768
// CHECK-COUNT-2: tile.tma_load %{{.*}} -> %[[Q]]
// CHECK:        tile.mbarrier_arrive_expect_tx %{{.*}} bytes 32768
// CHECK-COUNT-2: tile.tma_load %{{.*}} -> %[[K]]
// CHECK:        tile.mbarrier_arrive_expect_tx %{{.*}} bytes 32768
// CHECK-COUNT-2: tile.tma_load %{{.*}} -> %[[V]]
// CHECK:        %[[O:.*]] = tile.alloc : memref<48xf32, 5 : i32>
// CHECK:        tile.wgmma_fence
// CHECK-COUNT-6: tile.wgmma %{{.*}}, %[[Q]][{{.*}}], %[[K]][{{.*}}] {{(overwrite )?}}{n = 128 : i64
// CHECK-NEXT:   tile.wgmma_commit
// CHECK:        tile.wgmma_reg_a %[[O]], {{{.*}}}, %[[V]][{{.*}}] mn_major {n = 96 : i64
// CHECK-COUNT-7: tile.wgmma_reg_a %[[O]]
// CHECK-NEXT:   tile.wgmma_commit

// CHECK:      tile.kernel @attention_5 grid [2, 1, 1] block [384, 1, 1]
// CHECK-SAME: tile.tensor_maps = [{arg = 0 : i64, box = array<i64: 1, 1, 128, 64>, swizzle = 128 : i64}, {arg = 1 : i64, box = array<i64: 1, 1, 64, 64>, swizzle = 128 : i64}, {arg = 2 : i64, box = array<i64: 1, 1, 64, 64>, swizzle = 128 : i64}]
// CHECK:        %[[Q5:.*]] = tile.alloc dynamic : memref<1x4x128x64xbf16, 3 : i32>
// CHECK-NEXT:   %[[K5:.*]] = tile.alloc dynamic : memref<2x4x64x64xbf16, 3 : i32>
// CHECK-NEXT:   %[[V5:.*]] = tile.alloc dynamic : memref<2x4x64x64xbf16, 3 : i32>
// CHECK:        %[[O5:.*]] = tile.alloc : memref<128xf32, 5 : i32>
// CHECK-NEXT:   %[[S5:.*]] = tile.alloc : memref<32xf32, 5 : i32>
// CHECK:        tile.wgmma_fence
// CHECK-COUNT-16: tile.wgmma %[[S5]], %[[Q5]][{{.*}}], %[[K5]][{{.*}}] {{(overwrite )?}}{n = 64 : i64
// CHECK-NEXT:   tile.wgmma_commit
// CHECK:        tile.wgmma_reg_a %[[O5]], {{{.*}}}, %[[V5]][{{.*}}] mn_major {n = 256 : i64, b_lbo = 8192 : i64
// CHECK-COUNT-3: tile.wgmma_reg_a %[[O5]]
// CHECK-NEXT:   tile.wgmma_commit

// attn=sync still takes them on mma.sync.
// SYNC:       tile.kernel @attention_2 grid [1, 2, 1] block [128, 1, 1]
// SYNC:       tile.mma_sync
// SYNC-NOT:   tile.wgmma
// SYNC:       tile.kernel @attention_5

func.func @attention(%q: tensor<1x2x100x96xbf16>, %k: tensor<1x2x100x96xbf16>, %v: tensor<1x2x100x96xbf16>, %q2: tensor<1x2x100x256xbf16>, %k2: tensor<1x2x100x256xbf16>, %v2: tensor<1x2x100x256xbf16>) -> (tensor<1x2x100x96xbf16>, tensor<1x2x100x256xbf16>) {
  %y = graph.attention %q, %k, %v {scale = 0.1 : f32} : (tensor<1x2x100x96xbf16>, tensor<1x2x100x96xbf16>, tensor<1x2x100x96xbf16>) -> tensor<1x2x100x96xbf16>
  %z = graph.attention %q2, %k2, %v2 {scale = 0.0625 : f32} : (tensor<1x2x100x256xbf16>, tensor<1x2x100x256xbf16>, tensor<1x2x100x256xbf16>) -> tensor<1x2x100x256xbf16>
  func.return %y, %z : tensor<1x2x100x96xbf16>, tensor<1x2x100x256xbf16>
}
