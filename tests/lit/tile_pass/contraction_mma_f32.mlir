// RUN: not tinyopt %s -p 'fuse,tile{mma=sync}' 2>&1 | filecheck %s --check-prefix=SYNC
// RUN: not tinyopt %s -p 'fuse,tile{mma=wgmma}' 2>&1 | filecheck %s --check-prefix=WGMMA
// RUN: tinyopt %s -p 'fuse,tile' | filecheck %s --check-prefix=SIMT

// An f32 GEMM has no f16/bf16 tensor-core form: asking for one is an error naming the kernel
// and the operand type, not a silent fallback to CUDA cores. Left at mma=none it is SIMT.

// SYNC-NOT:  Traceback
// SYNC:      error: tile: mma=sync applies to sums of products of f16 or bf16 operands (one type); kernel @mm_0 reads f32 (leave mma=none for CUDA cores)
// WGMMA:     error: tile: mma=wgmma applies to sums of products of f16 or bf16 operands (one type); kernel @mm_0 reads f32 (leave mma=none for CUDA cores)
// SIMT:      tile.kernel @mm_0
// SIMT-NOT:  tile.wgmma
// SIMT-NOT:  tile.mma_sync

func.func @mm(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %m = graph.matmul %x, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  func.return %m : tensor<64x64xf32>
}
