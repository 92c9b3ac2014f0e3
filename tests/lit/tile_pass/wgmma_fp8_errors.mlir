// RUN: not tinyopt %s -p 'fuse,tile{mma=wgmma}' 2>&1 | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile' | filecheck %s --check-prefix=AUTO

// b [K, N] is N-major: the tensor cores do not transpose 8-bit operands, so mma=wgmma says
// why; the default leaves the GEMM to the CUDA-core contraction rule.
// CHECK: tile: mma=wgmma takes f8E4M3FN B K-major only (B [N, K], as torch's linear and _scaled_mm hold it): the tensor cores do not transpose 8-bit operands
// AUTO: #tile.plan<contraction
// AUTO-NOT: tile.wgmma
func.func @kn(%a: tensor<256x256xf8E4M3FN>, %b: tensor<256x256xf8E4M3FN>) -> tensor<256x256xf32> {
  %a32 = graph.cast %a : tensor<256x256xf8E4M3FN> -> tensor<256x256xf32>
  %b32 = graph.cast %b : tensor<256x256xf8E4M3FN> -> tensor<256x256xf32>
  %y = graph.matmul %a32, %b32 : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  func.return %y : tensor<256x256xf32>
}
