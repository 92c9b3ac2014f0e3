// RUN: tinyopt %s -p decompose,fuse,flash-attention,plan | filecheck %s --check-prefix=PLAN
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,plan{asplits=4}' | filecheck %s --check-prefix=FOUR
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,plan{attn=none}' | filecheck %s --check-prefix=NONE
// RUN: tinyopt %s -p decompose,fuse,flash-attention,tile | filecheck %s --check-prefix=TILE
// RUN: not tinyopt %s -p 'decompose,fuse,flash-attention,plan{asplits=300}' 2>&1 | filecheck %s --check-prefix=BAD

// A decode step (one query per head) of GQA attention, 32 query heads over 8 KV heads, 4096
// keys, D = 128, bf16: the decode rule (attn=decode, taken by attn=auto) cuts the keys into
// chunks of whole 64-key tiles, one block (one warp: the 4 query heads of a KV head fill 4 of
// its 16 rows) per KV head and chunk, reading k and v at the group's first head; 8 groups at
// batch 1 fill the SMs with 32 chunks of 128 keys (256 blocks). A merge kernel combines the
// chunks' partial (m, l, acc) and divides. Both kernels show the split count.

// PLAN:      loop.kernel @decode_2_decode({{.*}}memref<256x4xf32>, {{.*}}memref<256x4xf32>, {{.*}}memref<256x4x128xf32>) attributes {tinyopt.decode_partial = 32 : i64, plan = #tile.plan<attention_decode, asplits = 32>}
// PLAN:        loop.parallel (%{{.*}}, %{{.*}}, %{{.*}}) in [256, 4, 128]
// PLAN:        loop.reduce (%{{.*}}) in [128] init
// PLAN:      loop.kernel @decode_2_merge({{.*}}) attributes {tinyopt.decode_merge = 32 : i64, plan = #tile.plan<attention_decode, asplits = 32>}
// PLAN:        loop.reduce (%{{.*}}) in [32] init
// PLAN:      loop.launch @decode_2_decode
// PLAN-NEXT: loop.launch @decode_2_merge

// FOUR: plan = #tile.plan<attention_decode, asplits = 4>
// FOUR: loop.reduce (%{{.*}}) in [1024] init

// NONE:     plan = #tile.plan<sequential
// NONE-NOT: attention_decode

// TILE: tile.kernel @decode_2_decode grid [1, 256, 1] block [32, 1, 1]
// TILE: tile.cp_async
// TILE: tile.mma_sync
// TILE: tile.kernel @decode_2_merge grid [32, 1, 1] block [128, 1, 1]

// BAD: asplits must be in [0, 256] (0 for auto), got 300

func.func @decode(%q: tensor<1x32x1x128xbf16>, %k: tensor<1x8x4096x128xbf16>, %v: tensor<1x8x4096x128xbf16>) -> tensor<1x32x1x128xbf16> {
  %y = graph.attention %q, %k, %v {scale = 0.0883883461 : f32} : (tensor<1x32x1x128xbf16>, tensor<1x8x4096x128xbf16>, tensor<1x8x4096x128xbf16>) -> tensor<1x32x1x128xbf16>
  func.return %y : tensor<1x32x1x128xbf16>
}
