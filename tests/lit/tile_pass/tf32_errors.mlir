// RUN: not tinyopt %s -p 'fuse,tile{mma=tf32}' 2>&1 | filecheck %s
// CHECK-NOT: Traceback

// TF32 is for f32 operands; bf16 ones take mma=sync or mma=wgmma.
// CHECK: error: tile: mma=tf32 applies to sums of products of f32 operands; kernel @mm_0 reads bf16 (f16/bf16 take mma=sync or mma=wgmma)

func.func @mm(%x: tensor<64x64xbf16>, %w: tensor<64x64xbf16>) -> tensor<64x64xbf16> {
  %m = graph.matmul %x, %w : (tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<64x64xbf16>
  func.return %m : tensor<64x64xbf16>
}
