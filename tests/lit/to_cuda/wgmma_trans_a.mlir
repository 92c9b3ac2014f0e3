// RUN: tinyopt %s -p "to-cuda{pdl=0}" | filecheck %s
// RUN: tinyopt %s | filecheck %s --check-prefix=ROUNDTRIP
// An M-major A (`a_mn_major`, the swapped GEMM's N-major B, wgmma_swap.py): 64 rows of M are
// one 128-byte swizzle row of each K, K rows in 8-row groups `a_sbo` apart, 64-row chunks
// `a_lbo` apart. The helper sets wgmma's trans-a (the first of the two transpose operands).

// CHECK:      __device__ __forceinline__ void tinyopt_wgmma_m64n64k16_bf16_k_ta(float (&d)[32], unsigned long long a, unsigned long long b) {
// CHECK:                   "%32, %33, p, 1, 1, 1, 0;\n}"
// CHECK:      tinyopt_wgmma_m64n64k16_bf16_k_ta(acc, tinyopt_wgmma_desc(&as[0][16][0], 8192, 1024), tinyopt_wgmma_desc(&bs[0][16], 16, 1024));
// ROUNDTRIP:  tile.wgmma %acc, %as[%c0, %c16, %c0] a_mn_major, %bs[%c0, %c16] {n = 64 : i64, a_sbo = 1024 : i64, b_lbo = 16 : i64, b_sbo = 1024 : i64, a_lbo = 8192 : i64}
builtin.module {
  tile.kernel @gemm grid [1, 1, 1] block [128, 1, 1] (%out: memref<64x64xf32>) {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %as = tile.alloc dynamic : memref<1x64x64xbf16, 3 : i32>
    %bs = tile.alloc dynamic : memref<64x64xbf16, 3 : i32>
    %acc = tile.alloc : memref<32xf32, 5 : i32>
    tile.wgmma_fence
    tile.wgmma %acc, %as[%c0, %c16, %c0] a_mn_major, %bs[%c0, %c16] {n = 64 : i64, a_sbo = 1024 : i64, b_lbo = 16 : i64, b_sbo = 1024 : i64, a_lbo = 8192 : i64} : memref<32xf32, 5 : i32>, memref<1x64x64xbf16, 3 : i32>, memref<64x64xbf16, 3 : i32>
    tile.wgmma_commit
    tile.wgmma_wait 0 : i64
    %v = memref.load %acc[%c0] : memref<32xf32, 5 : i32>
    memref.store %v, %out[%c0, %c0] : memref<64x64xf32>
  }
}

