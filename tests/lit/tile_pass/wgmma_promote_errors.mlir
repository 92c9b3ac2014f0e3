// RUN: not tinyopt %s -p 'fuse,tile{mma=wgmma bn=256}' 2>&1 | filecheck %s --check-prefix=WIDE
// RUN: tinyopt %s -p 'fuse,tile{mma=wgmma bn=256 promote=off}' | filecheck %s --check-prefix=FAST
// RUN: not tinyopt %s -p 'fuse,tile{mma=wgmma promote=on}' 2>&1 | filecheck %s --check-prefix=BF16

// An FP8 GEMM's K steps are promoted to f32 by default, so its blocks are at most 128 columns:
// bn=256 is refused with the reason, and promote=off (all of K in the tensor cores) takes it.
// WIDE: tile: mma=wgmma with promote=on takes bn up to 128 (a thread holds bn/2 accumulators and bn/2 products of a step), got bn=256; promote=off sums all of K in the tensor cores
// FAST: #tile.plan<wgmma, bm = {{[0-9]+}}, bn = 256, {{.*}} promote = "off">
func.func @scaled(%a: tensor<256x256xf8E4M3FN>, %b: tensor<256x256xf8E4M3FN>) -> tensor<256x256xbf16> {
  %a32 = graph.cast %a : tensor<256x256xf8E4M3FN> -> tensor<256x256xf32>
  %b32 = graph.cast %b : tensor<256x256xf8E4M3FN> -> tensor<256x256xf32>
  %bt = graph.transpose %b32 {perm = array<i64: 1, 0>} : tensor<256x256xf32> -> tensor<256x256xf32>
  %y = graph.matmul %a32, %bt : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %o = graph.cast %y : tensor<256x256xf32> -> tensor<256x256xbf16>
  func.return %o : tensor<256x256xbf16>
}

// A bf16 GEMM's products are summed in f32 by the tensor cores: promote=on is refused.
// BF16: tile: mma=wgmma promote=on applies to 8-bit float operands (the tensor cores sum f16/bf16 products in f32)
func.func @plain(%a: tensor<256x256xbf16>, %b: tensor<256x256xbf16>) -> tensor<256x256xbf16> {
  %y = graph.matmul %a, %b : (tensor<256x256xbf16>, tensor<256x256xbf16>) -> tensor<256x256xbf16>
  func.return %y : tensor<256x256xbf16>
}
