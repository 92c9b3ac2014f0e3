// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,plan{why=1}' | filecheck %s
// RUN: tinyopt %s -p decompose,fuse,flash-attention,tile | filecheck %s --check-prefix=F32

// Which attention kernels the decode rule takes, by shape. Batch 64 has 512 KV groups: one
// chunk each, 512 blocks of eight key-parallel warps (one block an SM: about four waves).
// Four queries per head of a chunked prefill (GQA 4: 16 rows per KV head) still fit one
// warp's 16 rows; eight warps split the 300 keys of each group's one chunk. A square
// prefill of 128 queries per head is the tensor-core rules': its 128 rows fill their tiles.

// CHECK:      loop.kernel @batch64_2_decode({{.*}}) attributes {tinyopt.decode_partial = 1 : i64, plan = #tile.plan<attention_decode, asplits = 1, akwarps = 8, akwarps_sync = "block", aslots = 2, abalance = "off", aswizzle = "on">
// CHECK:      loop.kernel @chunk4_2_decode({{.*}}) attributes {tinyopt.decode_partial = 1 : i64, plan = #tile.plan<attention_decode, asplits = 1, akwarps = 8, akwarps_sync = "block", aslots = 2, abalance = "off", aswizzle = "on">
// CHECK:        loop.parallel (%{{.*}}, %{{.*}}, %{{.*}}) in [8, 16, 128]
// CHECK:      loop.kernel @prefill_{{[0-9]+}}({{.*}}) attributes {plan = #tile.plan<attention_wgmma, {{.*}}refusals = ["attention_decode: 128 query rows share each key and value (more than 64: the tensor-core attention rules' tiles of 64 and 128 rows are full)"]

// f32 partial kernels run on CUDA cores (decode_simt.py), a row tile of the group's rows:
// the 4 query heads of a KV head in a 64-thread block (4 rows of 16 lanes, 64-key tiles by
// 16-byte cp.async); one row of D = 256 in a 64-thread block (four rows of 16 lanes: a warp's
// 128-key tiles of K and V would take 260 KiB); 32 heads × 2 queries of one KV head (MQA) in
// 256 threads, 4 rows each. Their shared memory sets the blocks per SM the split count
// assumes.

// F32: tile.kernel @f32gqa_2_decode grid [1, 256, 1] block [64, 1, 1]
// F32:   tile.cp_async {{.*}} {width = 4 : i64} : memref<1x8x4096x128xf32> -> memref<64x132xf32, 3 : i32>
// F32: tile.kernel @f32gqa_2_merge grid [32, 1, 1] block [128, 1, 1]
// F32: tile.kernel @f32mha_2_decode grid [1, 128, 1] block [64, 1, 1] {{.*}}asplits = 16, akwarps = 1, akwarps_sync = "block", aslots = 2, abalance = "off", aswizzle = "off">
// F32:   tile.cp_async {{.*}} -> memref<64x260xf32, 3 : i32>
// F32: tile.kernel @f32chunk_2_decode grid [1, 16, 1] block [256, 1, 1] {{.*}}asplits = 16, akwarps = 1, akwarps_sync = "block", aslots = 2, abalance = "off", aswizzle = "off">

func.func @batch64(%q: tensor<64x32x1x128xbf16>, %k: tensor<64x8x4096x128xbf16>, %v: tensor<64x8x4096x128xbf16>) -> tensor<64x32x1x128xbf16> {
  %y = graph.attention %q, %k, %v {scale = 0.0883883461 : f32} : (tensor<64x32x1x128xbf16>, tensor<64x8x4096x128xbf16>, tensor<64x8x4096x128xbf16>) -> tensor<64x32x1x128xbf16>
  func.return %y : tensor<64x32x1x128xbf16>
}

func.func @chunk4(%q: tensor<1x32x4x128xbf16>, %k: tensor<1x8x300x128xbf16>, %v: tensor<1x8x300x128xbf16>) -> tensor<1x32x4x128xbf16> {
  %y = graph.attention %q, %k, %v {scale = 0.0883883461 : f32, causal = true} : (tensor<1x32x4x128xbf16>, tensor<1x8x300x128xbf16>, tensor<1x8x300x128xbf16>) -> tensor<1x32x4x128xbf16>
  func.return %y : tensor<1x32x4x128xbf16>
}

func.func @prefill(%q: tensor<1x2x128x64xbf16>, %k: tensor<1x2x128x64xbf16>, %v: tensor<1x2x128x64xbf16>) -> tensor<1x2x128x64xbf16> {
  %y = graph.attention %q, %k, %v {scale = 0.125 : f32, causal = true} : (tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>, tensor<1x2x128x64xbf16>) -> tensor<1x2x128x64xbf16>
  func.return %y : tensor<1x2x128x64xbf16>
}

func.func @f32gqa(%q: tensor<1x32x1x128xf32>, %k: tensor<1x8x4096x128xf32>, %v: tensor<1x8x4096x128xf32>) -> tensor<1x32x1x128xf32> {
  %y = graph.attention %q, %k, %v {scale = 0.0883883461 : f32} : (tensor<1x32x1x128xf32>, tensor<1x8x4096x128xf32>, tensor<1x8x4096x128xf32>) -> tensor<1x32x1x128xf32>
  func.return %y : tensor<1x32x1x128xf32>
}

func.func @f32mha(%q: tensor<1x8x1x256xf32>, %k: tensor<1x8x4096x256xf32>, %v: tensor<1x8x4096x256xf32>) -> tensor<1x8x1x256xf32> {
  %y = graph.attention %q, %k, %v {scale = 0.0625 : f32} : (tensor<1x8x1x256xf32>, tensor<1x8x4096x256xf32>, tensor<1x8x4096x256xf32>) -> tensor<1x8x1x256xf32>
  func.return %y : tensor<1x8x1x256xf32>
}

func.func @f32chunk(%q: tensor<1x32x2x64xf32>, %k: tensor<1x1x1000x64xf32>, %v: tensor<1x1x1000x64xf32>) -> tensor<1x32x2x64xf32> {
  %y = graph.attention %q, %k, %v {scale = 0.125 : f32, causal = true} : (tensor<1x32x2x64xf32>, tensor<1x1x1000x64xf32>, tensor<1x1x1000x64xf32>) -> tensor<1x32x2x64xf32>
  func.return %y : tensor<1x32x2x64xf32>
}
