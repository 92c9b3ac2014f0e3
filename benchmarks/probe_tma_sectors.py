"""How fast TMA delivers boxes of a bf16 matrix whose rows start on 32-byte sectors against one
whose rows start 16 bytes off them (K ≡ 8 mod 16), without a GEMM around the reads: the
question behind the wgmma GEMM's loss on such rows. On an H100 (benchmarks/RESULTS.md,
fifty-second session) 27 fresh linears with K ≡ 8 mod 16 ran 0.828× cuBLAS where 21 with K a
multiple of 16 ran 0.925×, while cuBLAS ran both kinds at the same rate; the GEMM on 5000³'s
operands staged onto sectors ran as fast as cuBLAS's (361.7 against 366.8 µs under ncu).

Each of `--blocks` blocks (one an SM) streams row tile `block mod T` of an [R, K] bf16 matrix,
64 columns (128 bytes, the GEMM's K step) by `rows` rows a box, over all of K, `passes` times,
through a ring of 4 slots swizzled as the GEMM's (128 bytes): one producer thread issues the
boxes, one consumer thread waits for each and frees its slot. About blocks / T blocks read each
box, as GEMM blocks read a shared operand tile, so the L2 serves the boxes (R = 2048: 16.8 MB).
Variants: K 4096 (rows on sectors) and 4104 (16 bytes off on every other row), box rows 64,
128, 192 and 256, and the tensor map's L2 promotion none, 128 and 256 bytes. Each row gives the
bytes delivered to shared memory per second (the median of 20 runs, CUDA events, L2 warm) and
the off-sector rate over the on-sector one.

Usage: python benchmarks/probe_tma_sectors.py [--blocks 132] [--passes 8]   (a GPU and cupy)
"""

from __future__ import annotations

import argparse
import ctypes
import statistics

SLOTS = 4
ROWS = 2048
BOX_COLUMNS = 64
"""Columns of a box: 128 bytes of bf16, the 128-byte swizzle's widest."""

SOURCE = r"""
#define SLOTS 4
__device__ __forceinline__ unsigned smem_address(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void wait_parity(unsigned bar, unsigned parity) {
    asm volatile("{\n .reg .pred done;\n WAIT:\n"
                 " mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 " @!done bra WAIT;\n}" :: "r"(bar), "r"(parity) : "memory");
}
extern "C" __global__ void __launch_bounds__(64, 1)
stream_boxes(const void* map, int rows, int row_tiles, int k_steps, int passes, unsigned* out) {
    extern __shared__ unsigned char smem[];
    __shared__ __align__(8) unsigned long long full[SLOTS], empty[SLOTS];
    unsigned char* ring = (unsigned char*)(((unsigned long long)smem + 1023) & ~1023ull);
    const unsigned bytes = rows * 128;
    const int row = (blockIdx.x % row_tiles) * rows;
    if (threadIdx.x == 0) {
        for (int s = 0; s < SLOTS; ++s) {
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_address(&full[s])));
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(smem_address(&empty[s])));
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    const long long total = (long long)k_steps * passes;
    if (threadIdx.x == 0) {
        for (long long i = 0; i < total; ++i) {
            int s = (int)(i % SLOTS);
            if (i >= SLOTS) wait_parity(smem_address(&empty[s]), (unsigned)((i / SLOTS - 1) & 1));
            asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                         :: "r"(smem_address(&full[s])), "r"(bytes) : "memory");
            int k = (int)(i % k_steps) * 64;
            asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global"
                         ".mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                         :: "r"(smem_address(ring + s * bytes)), "l"(map), "r"(k), "r"(row),
                            "r"(smem_address(&full[s])) : "memory");
        }
    } else if (threadIdx.x == 32) {
        unsigned x = 0;
        for (long long i = 0; i < total; ++i) {
            int s = (int)(i % SLOTS);
            wait_parity(smem_address(&full[s]), (unsigned)((i / SLOTS) & 1));
            x ^= *(volatile unsigned*)(ring + s * bytes + (i & 31) * 4);
            asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];"
                         :: "r"(smem_address(&empty[s])) : "memory");
        }
        out[blockIdx.x] = x;
    }
}
"""


def tensor_map(pointer: int, k: int, box_rows: int, promotion: int) -> bytes:
    """The 128 bytes of a tiled tensor map of an [ROWS, k] bf16 matrix at `pointer`: boxes of
    BOX_COLUMNS × box_rows, 128-byte swizzle, L2 promotion `promotion` bytes (0: none)."""
    from cuda.bindings import driver

    driver.cuInit(0)  # a no-op once cupy has started the driver; encoding needs it started
    promotions = {
        0: driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_NONE,
        128: driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        256: driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
    }
    result = driver.cuTensorMapEncodeTiled(
        driver.CUtensorMapDataType.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        2,
        pointer,
        [driver.cuuint64_t(k), driver.cuuint64_t(ROWS)],
        [driver.cuuint64_t(2 * k)],
        [driver.cuuint32_t(BOX_COLUMNS), driver.cuuint32_t(box_rows)],
        [driver.cuuint32_t(1), driver.cuuint32_t(1)],
        driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        driver.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
        promotions[promotion],
        driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )
    if result[0] != driver.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled: {result[0].name}")
    return ctypes.string_at(result[1].getPtr(), 128)


def main() -> None:
    import cupy as cp
    import numpy as np

    parser = argparse.ArgumentParser()
    parser.add_argument("--blocks", type=int, default=132)
    parser.add_argument("--passes", type=int, default=8)
    args = parser.parse_args()
    module = cp.RawModule(code=SOURCE, options=("-std=c++17", "-arch=sm_90a"))
    kernel = module.get_function("stream_boxes")
    out = cp.zeros(args.blocks, dtype=cp.uint32)
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    print(f"{cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}, {args.blocks} blocks")
    print("| box rows | L2 promotion | K 4096 GB/s | K 4104 GB/s | off / on |")
    print("|---|---|---|---|---|")
    matrices = {k: cp.ones((ROWS, k), dtype=cp.uint16) for k in (4096, 4104)}
    steps = 4096 // BOX_COLUMNS  # the same boxes of both: K 4104's last 8 columns unread
    for rows in (64, 128, 192, 256):
        shared = SLOTS * rows * 128 + 1024
        kernel.max_dynamic_shared_size_bytes = shared
        for promotion in (0, 128, 256):
            rates = {}
            for k, matrix in matrices.items():
                raw = tensor_map(matrix.data.ptr, k, rows, promotion)
                device_map = cp.asarray(np.frombuffer(raw, dtype=np.uint8))
                params = (
                    device_map,
                    np.int32(rows),
                    np.int32(ROWS // rows),
                    np.int32(steps),
                    np.int32(args.passes),
                    out,
                )
                times = []
                for _ in range(21):
                    start.record()
                    kernel((args.blocks,), (64,), params, shared_mem=shared)
                    stop.record()
                    stop.synchronize()
                    times.append(cp.cuda.get_elapsed_time(start, stop) * 1e-3)
                delivered = args.blocks * steps * args.passes * rows * BOX_COLUMNS * 2
                rates[k] = delivered / statistics.median(times[1:]) / 1e9
            ratio = rates[4104] / rates[4096]
            cells = (rows, promotion or "none", f"{rates[4096]:.0f}", f"{rates[4104]:.0f}")
            print("| " + " | ".join(map(str, cells)) + f" | {ratio:.3f} |")


if __name__ == "__main__":
    main()
