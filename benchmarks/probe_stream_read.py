"""How fast the H200 streams data it reads once from HBM into shared memory: the question behind
decode attention's partial kernel (docs/flash_attention.md, "Decode"), which reaches 4.25 TB/s
at B8 L32768 where cuDNN's whole call is faster (benchmarks/RESULTS.md, nineteenth session).

One GiB of random bytes, read by blocks of 8 warps, one block an SM; each block streams its own
contiguous range in 8 KiB tiles, warp w taking tiles w, w + 8, ... through a ring of `slots`
tiles (the decode kernel's pattern: K and V tiles of 16 keys × 128 bf16 are 4 KiB each):

- `cp.async`: 16 copies of 16 bytes per lane and tile (`cp.async.cg`), `wait_group slots - 1`;
- `bulk`: one `cp.async.bulk` of the whole tile by lane 0 (the TMA's one-dimensional form), an
  mbarrier per slot;
- `ld`: no shared memory, 16-byte loads into registers, 8 in flight per thread.

Each lane then reads its 256 bytes of the tile from shared memory into a checksum. Each variant
runs on 132 and on 128 blocks (the decode grid at B8 L32768 is 128 blocks), timed with L2
flushed before each run by a 256 MiB write (as `triton.testing.do_bench` does: the flush leaves
dirty lines for the reads to push out) and without. Medians of 30 runs, CUDA events.

Usage: python benchmarks/probe_stream_read.py   (a GPU and cupy)
"""

from __future__ import annotations

import statistics

TILE = 8192
WARPS = 8

SOURCE = r"""
#define TILE 8192
#define WARPS 8
__device__ __forceinline__ unsigned smem_address(const void* p) {
    return (unsigned)__cvta_generic_to_shared(p);
}
__device__ __forceinline__ void block_range(long long tiles, long long* first, long long* count) {
    long long start = tiles * blockIdx.x / gridDim.x, end = tiles * (blockIdx.x + 1) / gridDim.x;
    *first = start;
    *count = end - start;
}
struct WarpStream {
    int lane;
    long long mine;             // tiles this warp streams: its block's w, w + 8, ...
    const unsigned char* base;  // its first tile
    unsigned char* ring;        // its `slots` tiles of shared memory
};
__device__ __forceinline__ WarpStream warp_stream(const unsigned char* src, long long tiles,
                                                  unsigned char* smem, int slots) {
    int warp = threadIdx.x / 32;
    long long first, count;
    block_range(tiles, &first, &count);
    WarpStream w;
    w.lane = threadIdx.x % 32;
    w.mine = count > warp ? (count - warp + WARPS - 1) / WARPS : 0;
    w.base = src + (first + warp) * TILE;
    w.ring = smem + warp * slots * TILE;
    return w;
}
__device__ __forceinline__ float consume(const unsigned char* tile, int lane) {
    const uint4* t = reinterpret_cast<const uint4*>(tile);
    unsigned x = 0;
    #pragma unroll
    for (int j = 0; j < 16; ++j) { uint4 v = t[j * 32 + lane]; x ^= v.x ^ v.y ^ v.z ^ v.w; }
    return (float)(x & 1023);
}
__device__ __forceinline__ void copy_tile(unsigned char* dst, const unsigned char* src, int lane) {
    #pragma unroll
    for (int j = 0; j < 16; ++j) {
        int at = (j * 32 + lane) * 16;
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                     :: "r"(smem_address(dst + at)), "l"(src + at) : "memory");
    }
}
#define CP_ASYNC_KERNEL(SLOTS)                                                                   \
extern "C" __global__ void __launch_bounds__(256, 1)                                            \
stream_cp_async_##SLOTS(const unsigned char* __restrict__ src, long long tiles, float* out) {   \
    extern __shared__ __align__(128) unsigned char smem[];                                       \
    WarpStream w = warp_stream(src, tiles, smem, SLOTS);                                         \
    int lane = w.lane;                                                                           \
    long long mine = w.mine;                                                                     \
    const unsigned char* base = w.base;                                                          \
    unsigned char* ring = w.ring;                                                                \
    for (int s = 0; s < SLOTS; ++s) {                                                            \
        if (s < mine) copy_tile(ring + s * TILE, base + (long long)s * WARPS * TILE, lane);      \
        asm volatile("cp.async.commit_group;" ::: "memory");                                     \
    }                                                                                            \
    float acc = 0.0f;                                                                            \
    for (long long i = 0; i < mine; ++i) {                                                       \
        asm volatile("cp.async.wait_group %0;" :: "n"(SLOTS - 1) : "memory");                    \
        __syncwarp();                                                                            \
        unsigned char* slot = ring + (i % SLOTS) * TILE;                                         \
        acc += consume(slot, lane);                                                              \
        __syncwarp();                                                                            \
        if (i + SLOTS < mine) copy_tile(slot, base + (i + SLOTS) * WARPS * TILE, lane);          \
        asm volatile("cp.async.commit_group;" ::: "memory");                                     \
    }                                                                                            \
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;                                            \
}
CP_ASYNC_KERNEL(2)
CP_ASYNC_KERNEL(3)

__device__ __forceinline__ void bulk_tile(unsigned char* dst, const unsigned char* src,
                                          unsigned long long* bar) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 :: "r"(smem_address(bar)), "r"(TILE) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes "
                 "[%0], [%1], %2, [%3];"
                 :: "r"(smem_address(dst)), "l"(src), "r"(TILE), "r"(smem_address(bar))
                 : "memory");
}
__device__ __forceinline__ void wait_bar(unsigned long long* bar, int parity) {
    unsigned done = 0;
    while (!done) {
        asm volatile("{\n.reg .pred p;\n"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     "selp.u32 %0, 1, 0, p;\n}"
                     : "=r"(done) : "r"(smem_address(bar)), "r"(parity) : "memory");
    }
}
#define BULK_KERNEL(SLOTS)                                                                       \
extern "C" __global__ void __launch_bounds__(256, 1)                                            \
stream_bulk_##SLOTS(const unsigned char* __restrict__ src, long long tiles, float* out) {       \
    extern __shared__ __align__(128) unsigned char smem[];                                       \
    __shared__ __align__(8) unsigned long long bars[WARPS][SLOTS];                               \
    WarpStream w = warp_stream(src, tiles, smem, SLOTS);                                         \
    int warp = threadIdx.x / 32, lane = w.lane;                                                  \
    long long mine = w.mine;                                                                     \
    const unsigned char* base = w.base;                                                          \
    unsigned char* ring = w.ring;                                                                \
    if (lane == 0) {                                                                             \
        for (int s = 0; s < SLOTS; ++s)                                                          \
            asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;"                                \
                         :: "r"(smem_address(&bars[warp][s])) : "memory");                       \
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");                       \
        for (int s = 0; s < SLOTS && s < mine; ++s)                                              \
            bulk_tile(ring + s * TILE, base + (long long)s * WARPS * TILE, &bars[warp][s]);      \
    }                                                                                            \
    __syncwarp();                                                                                \
    float acc = 0.0f;                                                                            \
    for (long long i = 0; i < mine; ++i) {                                                       \
        int s = (int)(i % SLOTS);                                                                \
        wait_bar(&bars[warp][s], (int)((i / SLOTS) & 1));                                        \
        unsigned char* slot = ring + s * TILE;                                                   \
        acc += consume(slot, lane);                                                              \
        __syncwarp();                                                                            \
        if (lane == 0 && i + SLOTS < mine)                                                       \
            bulk_tile(slot, base + (i + SLOTS) * WARPS * TILE, &bars[warp][s]);                  \
    }                                                                                            \
    out[blockIdx.x * blockDim.x + threadIdx.x] = acc;                                            \
}
BULK_KERNEL(2)
BULK_KERNEL(3)

extern "C" __global__ void __launch_bounds__(256, 1)
stream_ld(const unsigned char* __restrict__ src, long long tiles, float* out) {
    long long first, count;
    block_range(tiles, &first, &count);
    const uint4* base = reinterpret_cast<const uint4*>(src + first * TILE);
    long long vectors = count * (TILE / 16);
    unsigned x = 0;
    for (long long i = threadIdx.x; i < vectors; i += 8 * blockDim.x) {
        uint4 v[8];
        #pragma unroll
        for (int u = 0; u < 8; ++u) {
            long long at = i + u * blockDim.x;
            v[u] = at < vectors ? __ldg(base + at) : make_uint4(0, 0, 0, 0);
        }
        #pragma unroll
        for (int u = 0; u < 8; ++u) x ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
    out[blockIdx.x * blockDim.x + threadIdx.x] = (float)(x & 1023);
}
"""

VARIANTS = [
    ("cp.async, 2 slots", "stream_cp_async_2", 2),
    ("cp.async, 3 slots", "stream_cp_async_3", 3),
    ("bulk, 2 slots", "stream_bulk_2", 2),
    ("bulk, 3 slots", "stream_bulk_3", 3),
    ("ld, registers", "stream_ld", 0),
]


def main() -> None:
    import cupy as cp

    module = cp.RawModule(code=SOURCE, options=("-std=c++17", "-arch=sm_90a"))
    nbytes = 1 << 30
    src = cp.random.randint(0, 256, nbytes, dtype=cp.uint8)
    flush = cp.empty(256 << 20, dtype=cp.uint8)
    out = cp.empty(132 * 256, dtype=cp.float32)
    tiles = nbytes // TILE
    start, end = cp.cuda.Event(), cp.cuda.Event()
    copy = cp.empty_like(src)

    def median_us(launch, flushed: bool) -> float:
        times = []
        for r in range(33):
            if flushed:
                flush.fill(r & 255)
            start.record()
            launch()
            end.record()
            end.synchronize()
            if r >= 3:
                times.append(cp.cuda.get_elapsed_time(start, end) * 1e3)
        return statistics.median(times)

    ceiling = 2 * nbytes / median_us(lambda: copy.__setitem__(slice(None), src), True) / 1e3
    print(f"device-to-device copy (read + write, L2 flushed): {ceiling:.0f} GB/s\n")
    print("| variant | blocks | flushed µs | GB/s | not flushed µs | GB/s |")
    print("|---|---|---|---|---|---|")
    for label, name, slots in VARIANTS:
        kernel = module.get_function(name)
        shared = slots * WARPS * TILE
        if shared:
            kernel.max_dynamic_shared_size_bytes = shared
        for blocks in (132, 128):

            def launch(kernel=kernel, blocks=blocks, shared=shared) -> None:
                kernel((blocks,), (256,), (src, cp.int64(tiles), out), shared_mem=shared)

            launch()
            cp.cuda.runtime.deviceSynchronize()
            row = [label, str(blocks)]
            for flushed in (True, False):
                us = median_us(launch, flushed)
                row += [f"{us:.1f}", f"{nbytes / us / 1e3:.0f}"]
            print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
