// RUN: tinyopt %s -p fuse,tile,to-cuda | filecheck %s

// An FP8 GEMM, matmul(cast(a), cast(b)) with b [N, K] (the form of torch's _scaled_mm), is the
// wgmma rule's by default: TMA copies the bytes (128 of K per swizzled row, a K step of 128
// elements) and one m64nNk32 e4m3 product issues per 32 of K, with no transpose operands
// (8-bit operands are K-major only). 4096 x 4096: 512 tiles of 128x256, persistent.

// CHECK:      // kernel @scaled_0 grid (132, 1, 1) block (384, 1, 1)
// CHECK:      __device__ __forceinline__ void tinyopt_wgmma_m64n256k32_e4m3_k(float (&d)[128], unsigned long long a, unsigned long long b) {
// CHECK:        "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 "
// CHECK:        "%128, %129, p, 1, 1;\n}"
// CHECK:        tinyopt_wgmma_m64n256k32_e4m3_k(
// CHECK-SAME:     tinyopt_wgmma_desc(&{{v[0-9]+}}[{{v[0-9]+}}][{{v[0-9]+}}][0], 16, 1024), tinyopt_wgmma_desc(&{{v[0-9]+}}[{{v[0-9]+}}][0][0], 16, 1024));
// CHECK:        tinyopt_wgmma_m64n256k32_e4m3_k(
// CHECK-SAME:     [32], 16, 1024)
func.func @scaled(%a: tensor<4096x4096xf8E4M3FN>, %b: tensor<4096x4096xf8E4M3FN>) -> tensor<4096x4096xbf16> {
  %a32 = graph.cast %a : tensor<4096x4096xf8E4M3FN> -> tensor<4096x4096xf32>
  %b32 = graph.cast %b : tensor<4096x4096xf8E4M3FN> -> tensor<4096x4096xf32>
  %bt = graph.transpose %b32 {perm = array<i64: 1, 0>} : tensor<4096x4096xf32> -> tensor<4096x4096xf32>
  %y = graph.matmul %a32, %bt : (tensor<4096x4096xf32>, tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  %o = graph.cast %y : tensor<4096x4096xf32> -> tensor<4096x4096xbf16>
  func.return %o : tensor<4096x4096xbf16>
}
