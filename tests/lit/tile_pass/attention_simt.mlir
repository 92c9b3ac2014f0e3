// RUN: tinyopt %s -p decompose,fuse,flash-attention,plan | filecheck %s --check-prefix=PLAN
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,plan{attn=simt bm=64 bn=32 threads=128}' | filecheck %s --check-prefix=KNOBS
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,plan{attn=none}' | filecheck %s --check-prefix=NONE
// RUN: tinyopt %s -p decompose,fuse,flash-attention,tile | filecheck %s --check-prefix=TILE
// RUN: not tinyopt %s -p 'decompose,fuse,flash-attention,plan{attn=simt bn=256}' 2>&1 | filecheck %s --check-prefix=BAD

// f32 causal GQA attention (4 query heads over 1 KV head, 256 queries and keys, D = 128): the
// SIMT rule (attn=simt, taken by attn=auto for f32) plans 64 query rows per block (4 a
// thread; 128 rows would leave one block an SM at D = 128, measured twice as slow), key tiles
// of 64 (4 keys for each of 16 lanes of a row) and 256 threads; the grid is (query tiles,
// heads). K and V arrive by cp.async,
// the row maxima and sums by shuffles across the 16 lanes.

// PLAN:  loop.kernel @attention_2({{.*}}) attributes {plan = #tile.plan<attention_simt, bm = 64, bn = 64, threads = 256>}

// KNOBS: plan = #tile.plan<attention_simt, bm = 64, bn = 32, threads = 128>

// NONE:     plan = #tile.plan<sequential
// NONE-NOT: attention_simt

// TILE: tile.kernel @attention_2 grid [4, 4, 1] block [256, 1, 1]
// TILE: tile.cp_async
// TILE: tile.warp_reduce
// TILE-SAME: width = 16

// BAD: bn must be 16, 32, 64 or 128 (4 keys a lane, 4 to 32 lanes a row), got 256

func.func @attention(%q: tensor<1x4x256x128xf32>, %k: tensor<1x1x256x128xf32>, %v: tensor<1x1x256x128xf32>) -> tensor<1x4x256x128xf32> {
  %y = graph.attention %q, %k, %v {scale = 0.0883883461 : f32, causal = true} : (tensor<1x4x256x128xf32>, tensor<1x1x256x128xf32>, tensor<1x1x256x128xf32>) -> tensor<1x4x256x128xf32>
  func.return %y : tensor<1x4x256x128xf32>
}
