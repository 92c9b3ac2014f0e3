// RUN: tinyopt %s -p decompose,fuse,flash-attention,plan | filecheck %s --check-prefix=PLAN
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,plan{asplits=4}' | filecheck %s --check-prefix=FOUR
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,plan{attn=none}' | filecheck %s --check-prefix=NONE
// RUN: tinyopt %s -p decompose,fuse,flash-attention,tile | filecheck %s --check-prefix=TILE
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,tile{akwarps=1 asplits=32}' | filecheck %s --check-prefix=ONE
// RUN: not tinyopt %s -p 'decompose,fuse,flash-attention,plan{asplits=300}' 2>&1 | filecheck %s --check-prefix=BAD
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,tile{akwarps_sync=warp}' | filecheck %s --check-prefix=WARP
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,tile{aslots=3}' | filecheck %s --check-prefix=SLOTS
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,tile{aswizzle=off}' | filecheck %s --check-prefix=PADDED
// RUN: not tinyopt %s -p 'decompose,fuse,flash-attention,tile{attn=decode akwarps=8 aslots=4}' 2>&1 | filecheck %s --check-prefix=NOROOM
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,tile{abalance=on}' | filecheck %s --check-prefix=BALANCED
// RUN: not tinyopt %s -p 'decompose,fuse,flash-attention,plan{attn=decode abalance=on asplits=4}' 2>&1 | filecheck %s --check-prefix=NOBALANCE

// A decode step (one query per head) of GQA attention, 32 query heads over 8 KV heads, 4096
// keys, D = 128, bf16: the decode rule (attn=decode, taken by attn=auto) cuts the keys into
// chunks of whole 64-key tiles, one block per KV head and chunk, reading k and v at the
// group's first head. The 4 query heads of a KV head fill 4 of a warp's 16 rows; a block runs
// 8 such warps (akwarps = 8, auto: the most a block may have, one 146 KiB block an SM), each
// on every eighth 16-key tile of the chunk, merged in the block. 8 groups at batch 1 take 11
// chunks of 384 keys (88 blocks). A merge kernel combines the chunks' partial (m, l, acc) and
// divides. Both kernels show the split count; the merge kernel, which has no warps to split
// keys between, akwarps = 1. Its loop over the splits is unrolled (tinyopt.unroll, then
// tile.unroll), so a thread's loads of the 11 partial states are issued together.

// PLAN:      loop.kernel @decode_2_decode({{.*}}memref<88x4xf32>, {{.*}}memref<88x4xf32>, {{.*}}memref<88x4x128xf32>) attributes {tinyopt.decode_partial = 11 : i64, plan = #tile.plan<attention_decode, asplits = 11, akwarps = 8, akwarps_sync = "block", aslots = 2, abalance = "off", aswizzle = "on">}
// PLAN:        loop.parallel (%{{.*}}, %{{.*}}, %{{.*}}) in [88, 4, 128]
// PLAN:        loop.reduce (%{{.*}}) in [384] init
// PLAN:      loop.kernel @decode_2_merge({{.*}}) attributes {tinyopt.decode_merge = 11 : i64, plan = #tile.plan<attention_decode, asplits = 11, akwarps = 1, akwarps_sync = "block", aslots = 2, abalance = "off", aswizzle = "off">}
// PLAN:        loop.reduce (%{{.*}}) in [11] init({{.*}}) attributes {tinyopt.unroll}
// PLAN:      loop.launch @decode_2_decode
// PLAN-NEXT: loop.launch @decode_2_merge

// FOUR: plan = #tile.plan<attention_decode, asplits = 4, akwarps = 8, akwarps_sync = "block", aslots = 2, abalance = "off", aswizzle = "on">
// FOUR: loop.reduce (%{{.*}}) in [1024] init

// NONE:     plan = #tile.plan<sequential
// NONE-NOT: attention_decode

// The K/V rings are unpadded and swizzled (aswizzle auto): each copy's column is the chunk
// XOR the row's low three bits.
// TILE: tile.kernel @decode_2_decode grid [1, 88, 1] block [256, 1, 1]
// TILE: arith.xori
// TILE: tile.cp_async {{.*}} -> memref<16x16x128xbf16, 3 : i32>
// TILE: tile.mma_sync
// TILE: tile.kernel @decode_2_merge grid [32, 1, 1] block [128, 1, 1]
// TILE: scf.for
// TILE: } {tile.unroll}

// akwarps_sync=warp: each of the 8 warps waits for its own copies at its own barrier
// (tile.warp_barrier, `__syncwarp`) before reading a tile and before refilling its slot; the
// block meets (tile.barrier) only to merge the warps' states. The merge kernel has no warps
// to split keys between and keeps "block".
// WARP:      tile.kernel @decode_2_decode {{.*}}akwarps = 8, akwarps_sync = "warp", aslots = 2, abalance = "off", aswizzle = "on">
// WARP:        scf.for
// WARP:          tile.cp_async_wait
// WARP-NEXT:     tile.warp_barrier
// WARP-NOT:      tile.barrier
// WARP:          tile.mma_sync
// WARP-NOT:      tile.barrier
// WARP:          tile.warp_barrier
// WARP:        tile.barrier
// WARP:      tile.kernel @decode_2_merge {{.*}}akwarps = 1, akwarps_sync = "block", aslots = 2, abalance = "off", aswizzle = "off">

// aslots=3: each warp's ring holds three 16-key tiles (24 slots of K and of V for 8 warps),
// two in flight while one is read: the wait leaves two groups of copies pending.
// SLOTS:      tile.kernel @decode_2_decode {{.*}}akwarps = 8, akwarps_sync = "block", aslots = 3, abalance = "off", aswizzle = "on">
// SLOTS:        tile.alloc dynamic : memref<24x16x128xbf16, 3 : i32>
// SLOTS:        tile.cp_async_wait 2
// aswizzle=off: the rings' rows padded by 16 bytes, no XOR.
// PADDED:     tile.kernel @decode_2_decode {{.*}}aswizzle = "off">
// PADDED-NOT: arith.xori
// PADDED:     tile.cp_async {{.*}} -> memref<16x16x136xbf16, 3 : i32>
// PADDED-NOT: arith.xori
// PADDED:     tile.kernel @decode_2_merge
// Four slots for eight warps would take more shared memory than an SM has.
// NOROOM: error: tile: akwarps=8 with aslots=4 needs 289280 bytes of shared memory, more than an SM's 233472

// One warp per block (akwarps = 1): 64-key tiles in a two-slot ring.
// ONE: tile.kernel @decode_2_decode grid [1, 256, 1] block [32, 1, 1]
// ONE: tile.cp_async {{.*}} -> memref<2x64x136xbf16, 3 : i32>
// ONE: tile.kernel @decode_2_merge grid [32, 1, 1] block [128, 1, 1]

// abalance=on: the 8 groups' 256 tiles of 16 keys, end to end, cut into 132 runs (one block
// an SM) of max(⌈2048 / 132⌉, 16) = 16 tiles; a group spans at most ⌈256 / 16⌉ + 1 = 17 runs,
// so it has 17 slots (asplits) and the merge combines those its runs fill. Each block walks
// the (group, slot) pairs of its run (an scf.for over groups around the key loop).
// BALANCED:      tile.kernel @decode_2_decode grid [1, 132, 1] block [256, 1, 1]
// BALANCED-SAME: asplits = 17, akwarps = 8, akwarps_sync = "block", aslots = 2, abalance = "on", aswizzle = "on">
// BALANCED:        scf.for
// BALANCED:          scf.for
// BALANCED:            tile.mma_sync
// BALANCED:      tile.kernel @decode_2_merge grid [32, 1, 1]
// BALANCED-SAME: asplits = 17, akwarps = 1, akwarps_sync = "block", aslots = 2, abalance = "on", aswizzle = "off">
// NOBALANCE: error: tile: abalance=on needs key-parallel warps {{.*}} and asplits=0 (the grid sets the split)

// BAD: asplits must be in [0, 256] (0 for auto), got 300

func.func @decode(%q: tensor<1x32x1x128xbf16>, %k: tensor<1x8x4096x128xbf16>, %v: tensor<1x8x4096x128xbf16>) -> tensor<1x32x1x128xbf16> {
  %y = graph.attention %q, %k, %v {scale = 0.0883883461 : f32} : (tensor<1x32x1x128xbf16>, tensor<1x8x4096x128xbf16>, tensor<1x8x4096x128xbf16>) -> tensor<1x32x1x128xbf16>
  func.return %y : tensor<1x32x1x128xbf16>
}
