// RUN: not tinyopt %s -p 'fuse,tile{mma=wgmma bn=224 promote=on}' 2>&1 | filecheck %s --check-prefix=WIDE
// RUN: tinyopt %s -p 'fuse,tile{mma=wgmma}' | filecheck %s --check-prefix=FAST
// RUN: not tinyopt %s -p 'fuse,tile{mma=wgmma promote=on}' 2>&1 | filecheck %s --check-prefix=BF16

// An FP8 GEMM whose K steps are promoted to f32 has blocks of whole 64-column chunks, at most
// 192 columns or 256 promoted in halves: bn=224 with promote=on is refused with the reason. To a bf16 output the default sums all of K in the
// tensor cores (promote off); to an f32 output it promotes.
// WIDE: tile: mma=wgmma runs blocks of a width off 64-column chunks (bn=224) as a plain GEMM of one product to each block (no dual GEMM, cluster split, stream-K or promoted FP8 steps); got promote=on
// FAST: tile.kernel @scaled_0 {{.*}}#tile.plan<wgmma, {{.*}} promote = "off", {{.*}}>
// FAST: tile.kernel @plain_0 {{.*}}#tile.plan<wgmma, {{.*}} promote = "off", {{.*}}>
// FAST: tile.kernel @wide_0 {{.*}}#tile.plan<wgmma, {{.*}} promote = "on", {{.*}}>
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

// K steps promoted by default: the epilogue stores f32.
func.func @wide(%a: tensor<256x256xf8E4M3FN>, %b: tensor<256x256xf8E4M3FN>) -> tensor<256x256xf32> {
  %a32 = graph.cast %a : tensor<256x256xf8E4M3FN> -> tensor<256x256xf32>
  %b32 = graph.cast %b : tensor<256x256xf8E4M3FN> -> tensor<256x256xf32>
  %bt = graph.transpose %b32 {perm = array<i64: 1, 0>} : tensor<256x256xf32> -> tensor<256x256xf32>
  %y = graph.matmul %a32, %bt : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  func.return %y : tensor<256x256xf32>
}
