// RUN: tinyopt %s -p "to-cuda{pdl=0}" | filecheck %s
// Hopper ops print as inline PTX: tensor-map arguments become `const __grid_constant__
// CUtensorMap` parameters (the opaque struct is declared, NVRTC has no cuda.h); dynamic shared
// buffers are pointers into 1024-byte aligned dynamic shared memory, whose size (plus 1024
// bytes of alignment slack) becomes the kernel's `smem`; wgmma takes 128B-swizzle descriptors.

// CHECK-LABEL: // kernel @gemm grid (1, 1, 1) block (128, 1, 1) smem 17408
// CHECK:      struct alignas(64) CUtensorMap { unsigned long long opaque[16]; };
// CHECK:      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;"
// CHECK:      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];"
// CHECK:      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
// CHECK:      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
// CHECK:      asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
// CHECK:      return ((address & 0x3FFFF) >> 4) | ((unsigned long long)((lbo & 0x3FFFF) >> 4) << 16) |
// CHECK-NEXT:        ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
// CHECK:      __device__ __forceinline__ void tinyopt_wgmma_m64n64k16_bf16_k(float (&d)[32], unsigned long long a, unsigned long long b) {
// CHECK:                   "setp.ne.b32 p, %34, 0;\n"
// CHECK-NEXT:              "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
// CHECK-NEXT:              "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
// CHECK-NEXT:              "%32, %33, p, 1, 1, 0, 0;\n}"
// CHECK:      extern "C" __global__ void __launch_bounds__(128, 1) gemm(const __grid_constant__ CUtensorMap a, const __grid_constant__ CUtensorMap b, float* __restrict__ out) {
// CHECK-NEXT:     extern __shared__ __align__(1024) unsigned char tinyopt_smem[];
// CHECK:          unsigned char* tinyopt_smem_base = tinyopt_smem + ((1024 - (unsigned)__cvta_generic_to_shared(tinyopt_smem) % 1024) % 1024);
// CHECK:          __nv_bfloat16 (*as)[64] = reinterpret_cast<__nv_bfloat16 (*)[64]>(tinyopt_smem_base + 0);
// CHECK-NEXT:     __nv_bfloat16 (*bs)[64] = reinterpret_cast<__nv_bfloat16 (*)[64]>(tinyopt_smem_base + 8192);
// CHECK-NEXT:     __shared__ long long bars[1];
// CHECK:          tinyopt_mbarrier_init(&bars[0], 1);
// CHECK-NEXT:     asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
// CHECK-NEXT:     __syncthreads();
// CHECK-NEXT:     asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
// CHECK-NEXT:     tinyopt_mbarrier_arrive_expect_tx(&bars[0], 16384);
// CHECK-NEXT:     tinyopt_tma_load_2d(&as[0][0], &a, &bars[0], 0, t);
// CHECK-NEXT:     tinyopt_tma_load_2d(&bs[0][0], &b, &bars[0], 0, 0);
// CHECK-NEXT:     tinyopt_mbarrier_wait(&bars[0], 0);
// CHECK-NEXT:     asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
// CHECK-NEXT:     tinyopt_wgmma_m64n64k16_bf16_k(acc, tinyopt_wgmma_desc(&as[0][16], 16, 1024), tinyopt_wgmma_desc(&bs[0][16], 16, 1024));
// CHECK-NEXT:     asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
// CHECK-NEXT:     asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
// CHECK-NEXT:     tinyopt_mbarrier_arrive(&bars[0]);
builtin.module {
  tile.kernel @gemm grid [1, 1, 1] block [128, 1, 1] (%a: memref<64x64xbf16>, %b: memref<64x64xbf16>, %out: memref<64x64xf32>) attributes {tile.min_blocks = 1 : i64, tile.tensor_maps = [{arg = 0 : i64, box = array<i64: 64, 64>, swizzle = 128 : i64}, {arg = 1 : i64, box = array<i64: 64, 64>, swizzle = 128 : i64}]} {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %t = tile.thread_id x
    %as = tile.alloc dynamic : memref<64x64xbf16, 3 : i32>
    %bs = tile.alloc dynamic : memref<64x64xbf16, 3 : i32>
    %bars = tile.alloc : memref<1xi64, 3 : i32>
    %acc = tile.alloc : memref<32xf32, 5 : i32>
    tile.mbarrier_init %bars[%c0] count 1 : i64 : memref<1xi64, 3 : i32>
    tile.fence_proxy_async
    tile.barrier
    tile.setmaxnreg inc 232 : i64
    tile.mbarrier_arrive_expect_tx %bars[%c0] bytes 16384 : i64 : memref<1xi64, 3 : i32>
    tile.tma_load %a[%t, %c0] -> %as[%c0, %c0], %bars[%c0] : memref<64x64xbf16> -> memref<64x64xbf16, 3 : i32>, memref<1xi64, 3 : i32>
    tile.tma_load %b[%c0, %c0] -> %bs[%c0, %c0], %bars[%c0] : memref<64x64xbf16> -> memref<64x64xbf16, 3 : i32>, memref<1xi64, 3 : i32>
    tile.mbarrier_wait %bars[%c0], %c0 : memref<1xi64, 3 : i32>
    tile.wgmma_fence
    tile.wgmma %acc, %as[%c0, %c16], %bs[%c0, %c16] {n = 64 : i64, a_sbo = 1024 : i64, b_lbo = 16 : i64, b_sbo = 1024 : i64} : memref<32xf32, 5 : i32>, memref<64x64xbf16, 3 : i32>, memref<64x64xbf16, 3 : i32>
    tile.wgmma_commit
    tile.wgmma_wait 0 : i64
    tile.mbarrier_arrive %bars[%c0] : memref<1xi64, 3 : i32>
    %v = memref.load %acc[%c0] : memref<32xf32, 5 : i32>
    memref.store %v, %out[%t, %c0] : memref<64x64xf32>
  }
}
