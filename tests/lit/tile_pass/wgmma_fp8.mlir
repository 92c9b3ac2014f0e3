// RUN: tinyopt %s -p 'fuse,tile{promote=on},to-cuda' | filecheck %s
// RUN: tinyopt %s -p fuse,tile,to-cuda | filecheck %s --check-prefix=FAST

// An FP8 GEMM, matmul(cast(a), cast(b)) with b [N, K] (the form of torch's _scaled_mm), is the
// wgmma rule's by default: TMA copies the bytes (128 of K per swizzled row, a K step of 128
// elements) and one m64nNk32 e4m3 product issues per 32 of K, with no transpose operands
// (8-bit operands are K-major only). With promote=on (the default for an f32 output) each K
// step's four products go to registers of their own (the first overwriting them: the `_set`
// form), then are added to the f32 accumulators once done, so blocks are 128x128 here (1024
// tiles, persistent). The first step is issued before the loop over pairs of steps.

// CHECK:      // kernel @scaled_0 grid (132, 1, 1) block (384, 1, 1)
// CHECK:      __device__ __forceinline__ void tinyopt_wgmma_m64n128k32_e4m3_k_set(float (&d)[64], unsigned long long a, unsigned long long b) {
// CHECK:        "%64, %65, p, 1, 1;\n}"
// CHECK:        : "l"(a), "l"(b), "r"(0));
// CHECK:      float [[ACCS:v[0-9]+]][64];
// CHECK:      float [[PRODUCTS:v[0-9]+]][64];
// CHECK:        tinyopt_wgmma_m64n128k32_e4m3_k_set([[PRODUCTS]], tinyopt_wgmma_desc(&{{v[0-9]+}}[{{v[0-9]+}}][{{v[0-9]+}}][0], 16, 1024), tinyopt_wgmma_desc(&{{v[0-9]+}}[{{v[0-9]+}}][0][0], 16, 1024));
// CHECK-NEXT:   tinyopt_wgmma_m64n128k32_e4m3_k([[PRODUCTS]], {{.*}}[32], 16, 1024), {{.*}}[32], 16, 1024));
// CHECK-NEXT:   tinyopt_wgmma_m64n128k32_e4m3_k([[PRODUCTS]], {{.*}}[64], 16, 1024), {{.*}}[64], 16, 1024));
// CHECK-NEXT:   tinyopt_wgmma_m64n128k32_e4m3_k([[PRODUCTS]], {{.*}}[96], 16, 1024), {{.*}}[96], 16, 1024));
// CHECK-NEXT:   asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
// CHECK:        for (int
// CHECK:        asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
// CHECK-NEXT:   int
// CHECK-NEXT:   tinyopt_mbarrier_arrive(
// CHECK-NEXT:   float [[PRODUCT:v[0-9]+]] = [[PRODUCTS]][0];
// CHECK-NEXT:   float [[ACC:v[0-9]+]] = [[ACCS]][0];
// CHECK-NEXT:   float [[SUM:v[0-9]+]] = [[ACC]] + [[PRODUCT]];
// CHECK-NEXT:   [[ACCS]][0] = [[SUM]];

// promote=off (the default for a bf16 output): all of K summed in the tensor cores'
// accumulators (torch's use_fast_accum=True), 128x256 blocks (512 tiles, persistent), one
// wgmma group kept in flight.

// FAST:      // kernel @scaled_0 grid (132, 1, 1) block (384, 1, 1)
// FAST:      __device__ __forceinline__ void tinyopt_wgmma_m64n256k32_e4m3_k(float (&d)[128], unsigned long long a, unsigned long long b) {
// FAST:        "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 "
// FAST:        "%128, %129, p, 1, 1;\n}"
// FAST-NOT:  _set(
// FAST:        tinyopt_wgmma_m64n256k32_e4m3_k(
// FAST-SAME:     tinyopt_wgmma_desc(&{{v[0-9]+}}[{{v[0-9]+}}][{{v[0-9]+}}][0], 16, 1024), tinyopt_wgmma_desc(&{{v[0-9]+}}[{{v[0-9]+}}][0][0], 16, 1024));
// FAST:        tinyopt_wgmma_m64n256k32_e4m3_k(
// FAST-SAME:     [32], 16, 1024)
// FAST:        asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
func.func @scaled(%a: tensor<4096x4096xf8E4M3FN>, %b: tensor<4096x4096xf8E4M3FN>) -> tensor<4096x4096xbf16> {
  %a32 = graph.cast %a : tensor<4096x4096xf8E4M3FN> -> tensor<4096x4096xf32>
  %b32 = graph.cast %b : tensor<4096x4096xf8E4M3FN> -> tensor<4096x4096xf32>
  %bt = graph.transpose %b32 {perm = array<i64: 1, 0>} : tensor<4096x4096xf32> -> tensor<4096x4096xf32>
  %y = graph.matmul %a32, %bt : (tensor<4096x4096xf32>, tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  %o = graph.cast %y : tensor<4096x4096xf32> -> tensor<4096x4096xbf16>
  func.return %o : tensor<4096x4096xbf16>
}
