"""Runs the wgmma kernels (GEMMs, flash attention) on the CPU (tests/cpu_cuda.py) emulated:
TMA tensor maps, mbarriers and `wgmma` products, so a whole program's launches (staging copies,
then the TMA + wgmma GEMM) can be checked against float64 without a GPU.

What is emulated, and how:

- a tensor map is the buffer's pointer, shape and the kernel's box (the parameter is passed as
  the pointer and the map built at the top of the kernel); `tinyopt_tma_load_Nd` copies the box
  at the coordinates into shared memory densely, zero outside the buffer (as TMA fills), and
  completes its bytes on the mbarrier; `tinyopt_tma_load_Nd_multicast` (its mask of cluster
  ranks after the mbarrier) copies it to the same shared-memory offset in each block of the
  cluster the mask names, the issuing block among them or not, and completes the whole box's
  bytes on the mbarrier at the same offset in each (a block outside a cluster is rank 0 of
  its own); the evict-first forms are the plain ones; `tinyopt_tma_store_Nd` copies a box of
  shared memory (through the swizzle) to the tensor when issued, skipping what lies outside it,
  so the bulk async-group's commit and waits (dropped PTX) have nothing to do;
- the 128-byte swizzle is applied where the hardware applies it, to the shared-memory byte
  offset (16-byte chunk XOR 128-byte row within 1024 bytes): TMA writes a swizzled map's box
  so, and `wgmma` reads its operands through it, so the kernels' own reads of swizzled tiles
  (the 3xTF32 split and its f32 FMA steps) see the hardware's layout (a descriptor is decoded
  as the kernel encodes it: start, LBO, SBO);
- an mbarrier is an expected arrival count, the arrivals and transaction bytes pending and a
  phase bit, packed into its own 8 bytes of shared memory (as on the GPU) and changed by
  atomic compare-and-swap, so that in a cluster, whose shared memory is process-shared, every
  block sees and changes it; a phase completes when no arrival and no byte is pending (bytes
  may complete before the phase's expect_tx: the count goes negative meanwhile);
  `try_wait.parity p` returns once the phase is no longer p, so a fresh barrier's "previous
  phase" (parity 1) has completed; an arrival, copy or wait on 8 bytes no init wrote (the 0
  or 0xFF fill) aborts;
- `tinyopt_mbarrier_arrive_cluster(bar, rank)` arrives on the mbarrier at `bar`'s offset in
  the cluster's block of rank `rank` (`mapa`; rank: x fastest, as `%cluster_ctarank`), and
  `tinyopt_fence_mbarrier_init` has nothing to do (an init is seen at once);
- `wgmma` m64nNk16 computes each thread's accumulators (rows 16·warp + lane/4 (+8), columns
  8j + 2(lane%4) (+1) of the warpgroup's tile) from shared memory when issued, in f32; the
  TF32 m64nNk8 likewise from f32 operands with their low 13 mantissa bits dropped (the `_set`
  form replacing the accumulators); with A in registers (flash attention's P·V, the swapped
  3xTF32 GEMM's weights) each warp's 16 rows of A are gathered from its lanes' mma.sync-layout
  fragments. Its fence and wait have nothing left to do, nor has `setmaxnreg` or the proxy
  fence, but `wgmma.commit_group` is a barrier of the warpgroup's 128 threads (threadIdx.x /
  128): on the GPU the warpgroup's wgmma, reading shared memory until `wait_group`, cannot end
  before its four warps all issued it, so a kernel may have ONE thread release the operands'
  ring slot after `wait_group`; here a thread's products are computed when it issues them, so
  a thread past the commit knows that every thread of its warpgroup issued its earlier wgmmas;
- `bar.sync id, count` is a barrier of `count` threads per id (`bar.arrive` counts in without
  waiting), `bar.red.or.pred` one that also hands every thread the OR of the predicates;
  `cvt.rna.tf32.f32` rounds on the CPU;
- thread-block clusters (`__cluster_dims__`) run cluster by cluster, the blocks of a cluster at
  once as processes (tests/cpu_cuda.py); the kernels' `tinyopt_cluster_sync` and
  `tinyopt_cluster_load_f32x4` helpers, like the other `tinyopt_*` ones printed before the
  kernel, are dropped for the emulation header's. Each block process has its own copy of every
  table here (named barriers, the warpgroups' barriers) and of static `__shared__` variables:
  the mbarriers other blocks arrive on or copy to must lie in dynamic shared memory (as the
  printer puts them), the process-shared arenas. A block whose threads all wait on what
  another block will do polls until the cluster changes; only when every block of the cluster
  waits, or has finished, with nothing changed is it a deadlock (cpu_cuda.h), or after
  CPU_CUDA_CLUSTER_TIMEOUT seconds (default 300) without a change while some block spins
  outside the emulation's waits.

What is not: the scopes and orderings of the asynchronous proxy and of the cluster (every
copy and arrival is complete and visible to all blocks at once, so a missing fence, a
CTA-scope arrival where a cluster-scope one is needed, or an init not fenced before another
block's copy or arrival is not caught, unless that copy or arrival comes before the init in
time: "used before its init"); a wgmma reading its operands after its commit (they are read
when it is issued, so a slot overwritten between a commit and its wait_group goes unseen); a
copy or arrival into a block that has returned is caught only when it comes after the return.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
from cpu_cuda import plain_flags, run_on_cpu
from test_sgemm_on_cpu import ALIGNED_SHARED, viewed
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import MemRefType, ModuleOp, StringAttr
from xdsl.ir import BlockArgument, SSAValue

from tinyopt.backends.check import device_inputs, errors_against_reference, graph_function
from tinyopt.backends.check import tolerance
from tinyopt.compiler import lower
from tinyopt.dialects import loop, tile

PRELUDE = r"""
#include <map>
#define __shared__ static
struct CUtensorMap {
    const unsigned char* base; int rank, element, swizzle; long long dims[5]; int box[5];
};
static inline CUtensorMap cpu_tensor_map(const void* base, int rank, int element, int swizzle,
                                         std::initializer_list<long long> dims,
                                         std::initializer_list<int> box) {
    CUtensorMap map{(const unsigned char*)base, rank, element, swizzle, {}, {}};
    int d = 0;
    for (long long v : dims) map.dims[d++] = v;
    d = 0;
    for (int v : box) map.box[d++] = v;
    return map;
}
// An mbarrier's state is held in its own 8 bytes of shared memory, as on the GPU, and
// changed by an atomic compare-and-swap: in a cluster's arenas (MAP_SHARED) every block of the
// cluster sees and updates it, as the arrivals of other blocks and multicast copies need.
// Packed: expected arrivals (bits 0-15), arrivals pending (16-31), transaction bytes pending
// (32-60, signed: a copy's bytes may complete before the phase's expect_tx), 0b01 (61-62: an
// initialized barrier, which neither the 0 nor the 0xFF fill of shared memory is), the phase
// (63).
struct CpuMbarrier { long long expected, pending, tx; unsigned phase; };
constexpr unsigned long long CPU_MBARRIER_INIT = 1ull << 61, CPU_MBARRIER_MARK = 3ull << 61;
static inline unsigned long long* cpu_mbarrier_word(void* bar) {
    if ((uintptr_t)bar % 8) { fprintf(stderr, "mbarrier: not 8-byte aligned\n"); abort(); }
    return (unsigned long long*)bar;
}
static inline CpuMbarrier cpu_mbarrier_unpack(unsigned long long bits) {
    if ((bits & CPU_MBARRIER_MARK) != CPU_MBARRIER_INIT) {
        fprintf(stderr, "mbarrier: used before its init\n");
        abort();
    }
    long long tx = (long long)(bits << 3) >> 35;  // bits 32-60, sign-extended
    return {(long long)(bits & 0xFFFF), (long long)(bits >> 16 & 0xFFFF), tx,
            (unsigned)(bits >> 63)};
}
static inline unsigned long long cpu_mbarrier_pack(const CpuMbarrier& b) {
    if (b.pending < 0) { fprintf(stderr, "mbarrier: more arrivals than expected\n"); abort(); }
    if (b.tx < -(1ll << 28) || b.tx >= 1ll << 28) {
        fprintf(stderr, "mbarrier: %lld transaction bytes pending\n", b.tx);
        abort();
    }
    return (unsigned long long)b.expected | (unsigned long long)b.pending << 16 |
           ((unsigned long long)b.tx & ((1ull << 29) - 1)) << 32 | CPU_MBARRIER_INIT |
           (unsigned long long)b.phase << 63;
}
// Applies `change` to the mbarrier at `bar` (this block's or, in a cluster, another's), then
// completes the phase once no arrival and no transaction byte is pending (the next phase then
// expects the init's count again). Every arrival or completed copy counts as progress for the
// fibers' deadlock check, and in a cluster as a change another block may wait for.
template <typename Change>
static inline void cpu_mbarrier_update(void* bar, Change change) {
    std::atomic_ref<unsigned long long> word(*cpu_mbarrier_word(bar));
    unsigned long long old = word.load(), next;
    do {
        CpuMbarrier b = cpu_mbarrier_unpack(old);
        change(b);
        if (b.pending == 0 && b.tx == 0) { b.phase ^= 1; b.pending = b.expected; }
        next = cpu_mbarrier_pack(b);
    } while (!word.compare_exchange_weak(old, next));
    cpu_cuda_progress = true;
    cpu_cuda_cluster_changed();
}
static inline void tinyopt_mbarrier_init(void* bar, int count) {
    if (count < 1 || count > 0xFFFF) { fprintf(stderr, "mbarrier: count %d\n", count); abort(); }
    std::atomic_ref<unsigned long long>(*cpu_mbarrier_word(bar)).store(
        cpu_mbarrier_pack({count, count, 0, 0}));
    cpu_cuda_cluster_changed();
}
static inline void tinyopt_mbarrier_arrive(void* bar) {
    cpu_mbarrier_update(bar, [](CpuMbarrier& b) { --b.pending; });
}
static inline void tinyopt_mbarrier_arrive_expect_tx(void* bar, int bytes) {
    cpu_mbarrier_update(bar, [bytes](CpuMbarrier& b) { b.tx += bytes; --b.pending; });
}
// mbarrier.arrive.release.cluster on the mbarrier at `bar`'s offset in the block of cluster
// rank `rank` (this block's own for its rank).
static inline void tinyopt_mbarrier_arrive_cluster(void* bar, unsigned rank) {
    void* at = cpu_cuda_cluster_address(bar, rank, 8, "tinyopt_mbarrier_arrive_cluster");
    cpu_mbarrier_update(at, [](CpuMbarrier& b) { --b.pending; });
}
// fence.mbarrier_init.release.cluster: an init is seen by every block at once here.
static inline void tinyopt_fence_mbarrier_init() {}
static inline void tinyopt_mbarrier_wait(void* bar, int parity) {
    std::atomic_ref<unsigned long long> word(*cpu_mbarrier_word(bar));
    while (cpu_mbarrier_unpack(word.load()).phase == (unsigned)(parity & 1)) cpu_cuda_poll();
    cpu_cuda_progress = true;
}
// The 128-byte swizzle, as TMA and wgmma apply it to a shared-memory byte offset: its 16-byte
// chunk (bits 4-6) XORed with its 128-byte row within 1024 bytes (bits 7-9).
static inline long long cpu_swizzle(long long offset) {
    return offset ^ (((offset >> 7) & 7) << 4);
}
static inline const unsigned char* cpu_swizzled(const unsigned char* p) {
    return cpu_cuda_smem + cpu_swizzle(p - cpu_cuda_smem);
}
// Calls `visit(i, inside, offset)` for each element i of the box at `at` (innermost first, the
// box's dense order): whether the element lies inside the tensor and its element offset there;
// returns the box's bytes.
template <typename Visit>
static inline long long cpu_tma_box(const CUtensorMap* map, const int* at, Visit visit) {
    long long total = 1, stride[5];
    for (int d = 0; d < map->rank; ++d) {
        stride[d] = d ? stride[d - 1] * map->dims[d - 1] : 1;
        total *= map->box[d];
    }
    for (long long i = 0; i < total; ++i) {
        long long rest = i, offset = 0;
        bool inside = true;
        for (int d = 0; d < map->rank; ++d) {
            long long g = at[d] + rest % map->box[d];
            rest /= map->box[d];
            inside = inside && g >= 0 && g < map->dims[d];
            offset += g * stride[d];
        }
        visit(i, inside, offset);
    }
    return total * map->element;
}
// The box at `at` (innermost first) into shared memory at `dst` of the block whose arena is
// `arena` (the swizzle applies to the offset in it), zeros outside the tensor; returns the
// box's bytes.
static inline long long cpu_tma_copy(unsigned char* dst, const unsigned char* arena,
                                     const CUtensorMap* map, const int* at) {
    return cpu_tma_box(map, at, [&](long long i, bool inside, long long offset) {
        unsigned char* to = dst + i * map->element;
        if (map->swizzle) to = (unsigned char*)arena + cpu_swizzle(to - arena);
        if (inside) memcpy(to, map->base + offset * map->element, map->element);
        else memset(to, 0, map->element);
    });
}
static inline void cpu_tma_load(void* dst, const CUtensorMap* map, void* bar, const int* at) {
    long long bytes = cpu_tma_copy((unsigned char*)dst, cpu_cuda_smem, map, at);
    cpu_mbarrier_update(bar, [bytes](CpuMbarrier& b) { b.tx -= bytes; });
}
// .multicast::cluster: the box at `dst`'s offset in each block of the cluster whose rank's bit
// is set in `mask` (this block's among them or not), its bytes (the whole box's) completed on
// the mbarrier at `bar`'s offset in each, the copy written before the completion.
static inline void cpu_tma_load_multicast(void* dst, const CUtensorMap* map, void* bar,
                                          unsigned short mask, const int* at) {
    unsigned ranks = cpu_cuda_cluster_size ? cpu_cuda_cluster_size : 1;
    if (mask == 0 || mask >> ranks) {
        fprintf(stderr, "multicast TMA load: mask 0x%x names no rank or one past the cluster's "
                "%u\n", mask, ranks);
        abort();
    }
    for (unsigned r = 0; r < ranks; ++r) {
        if (!(mask >> r & 1)) continue;
        const char* what = "multicast TMA load";
        unsigned char* to = cpu_cuda_cluster_address(dst, r, 1, what);
        unsigned char* arena = to - ((unsigned char*)dst - cpu_cuda_smem);
        long long bytes = cpu_tma_copy(to, arena, map, at);
        cpu_mbarrier_update(cpu_cuda_cluster_address(bar, r, 8, what),
                            [bytes](CpuMbarrier& b) { b.tx -= bytes; });
    }
}
// tinyopt_tma_load_Rd and its multicast form, coordinates innermost first.
static inline void tinyopt_tma_load_1d(void* dst, const CUtensorMap* map, void* bar,
                                       int c0) {
    int at[] = {c0};
    cpu_tma_load(dst, map, bar, at);
}
static inline void tinyopt_tma_load_1d_multicast(void* dst, const CUtensorMap* map, void* bar,
                                                 unsigned short mask, int c0) {
    int at[] = {c0};
    cpu_tma_load_multicast(dst, map, bar, mask, at);
}
static inline void tinyopt_tma_load_2d(void* dst, const CUtensorMap* map, void* bar,
                                       int c0, int c1) {
    int at[] = {c0, c1};
    cpu_tma_load(dst, map, bar, at);
}
static inline void tinyopt_tma_load_2d_multicast(void* dst, const CUtensorMap* map, void* bar,
                                                 unsigned short mask, int c0, int c1) {
    int at[] = {c0, c1};
    cpu_tma_load_multicast(dst, map, bar, mask, at);
}
static inline void tinyopt_tma_load_3d(void* dst, const CUtensorMap* map, void* bar,
                                       int c0, int c1, int c2) {
    int at[] = {c0, c1, c2};
    cpu_tma_load(dst, map, bar, at);
}
static inline void tinyopt_tma_load_3d_multicast(void* dst, const CUtensorMap* map, void* bar,
                                                 unsigned short mask, int c0, int c1, int c2) {
    int at[] = {c0, c1, c2};
    cpu_tma_load_multicast(dst, map, bar, mask, at);
}
static inline void tinyopt_tma_load_4d(void* dst, const CUtensorMap* map, void* bar,
                                       int c0, int c1, int c2, int c3) {
    int at[] = {c0, c1, c2, c3};
    cpu_tma_load(dst, map, bar, at);
}
static inline void tinyopt_tma_load_4d_multicast(void* dst, const CUtensorMap* map, void* bar,
                                                 unsigned short mask,
                                                 int c0, int c1, int c2, int c3) {
    int at[] = {c0, c1, c2, c3};
    cpu_tma_load_multicast(dst, map, bar, mask, at);
}
static inline void tinyopt_tma_load_5d(void* dst, const CUtensorMap* map, void* bar,
                                       int c0, int c1, int c2, int c3, int c4) {
    int at[] = {c0, c1, c2, c3, c4};
    cpu_tma_load(dst, map, bar, at);
}
static inline void tinyopt_tma_load_5d_multicast(void* dst, const CUtensorMap* map, void* bar,
                                                 unsigned short mask,
                                                 int c0, int c1, int c2, int c3, int c4) {
    int at[] = {c0, c1, c2, c3, c4};
    cpu_tma_load_multicast(dst, map, bar, mask, at);
}
// The L2 cache policy changes no value: the evict-first copies are the plain ones.
#define tinyopt_tma_load_1d_evict_first tinyopt_tma_load_1d
#define tinyopt_tma_load_2d_evict_first tinyopt_tma_load_2d
#define tinyopt_tma_load_3d_evict_first tinyopt_tma_load_3d
#define tinyopt_tma_load_4d_evict_first tinyopt_tma_load_4d
#define tinyopt_tma_load_5d_evict_first tinyopt_tma_load_5d
#define tinyopt_tma_load_1d_multicast_evict_first tinyopt_tma_load_1d_multicast
#define tinyopt_tma_load_2d_multicast_evict_first tinyopt_tma_load_2d_multicast
#define tinyopt_tma_load_3d_multicast_evict_first tinyopt_tma_load_3d_multicast
#define tinyopt_tma_load_4d_multicast_evict_first tinyopt_tma_load_4d_multicast
#define tinyopt_tma_load_5d_multicast_evict_first tinyopt_tma_load_5d_multicast
// cp.async.bulk.tensor shared -> global: the box at `src` (read through the swizzle where the
// map has one) to the tensor at `at` (innermost first), the elements outside it not written.
// The copy is done when issued, so its bulk async-group waits have nothing left to wait for.
static inline void cpu_tma_store(const CUtensorMap* map, const void* src, const int* at) {
    cpu_tma_box(map, at, [&](long long i, bool inside, long long offset) {
        const unsigned char* from = (const unsigned char*)src + i * map->element;
        if (map->swizzle) from = cpu_swizzled(from);
        if (inside) memcpy((unsigned char*)map->base + offset * map->element, from, map->element);
    });
}
static inline void tinyopt_tma_store_1d(const CUtensorMap* map, const void* src, int c0) {
    int at[] = {c0};
    cpu_tma_store(map, src, at);
}
static inline void tinyopt_tma_store_2d(const CUtensorMap* map, const void* src, int c0, int c1) {
    int at[] = {c0, c1};
    cpu_tma_store(map, src, at);
}
static inline void tinyopt_tma_store_3d(const CUtensorMap* map, const void* src, int c0, int c1,
                                        int c2) {
    int at[] = {c0, c1, c2};
    cpu_tma_store(map, src, at);
}
static inline unsigned long long tinyopt_wgmma_desc(const void* start, unsigned lbo, unsigned sbo) {
    unsigned long long address = __cvta_generic_to_shared(start);
    return ((address & 0x3FFFF) >> 4) | ((unsigned long long)((lbo & 0x3FFFF) >> 4) << 16) |
           ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);
}
static inline const unsigned char* cpu_desc_start(unsigned long long d) {
    return cpu_cuda_smem + ((d & 0x3FFF) << 4);
}
static inline long long cpu_desc_lbo(unsigned long long d) { return ((d >> 16) & 0x3FFF) << 4; }
static inline long long cpu_desc_sbo(unsigned long long d) { return ((d >> 32) & 0x3FFF) << 4; }
using cpu_bf16 = __nv_bfloat16;
using cpu_f16 = __half;
using cpu_e4m3 = __nv_fp8_e4m3;
using cpu_e5m2 = __nv_fp8_e5m2;
// An operand as the tensor cores take it: f16/bf16 as they are, f32 as TF32 (its low 13
// mantissa bits dropped).
static inline float cpu_tf32(float x) {
    unsigned bits;
    memcpy(&bits, &x, 4);
    bits &= 0xFFFFE000u;
    memcpy(&x, &bits, 4);
    return x;
}
template <typename T>
static inline float cpu_operand(T x) { return to_float(x); }
static inline float cpu_operand(float x) { return cpu_tf32(x); }
// m64nNkK, K 16 for 16-bit operands, 8 for TF32, 32 for 8-bit floats (32 bytes of K each
// way). A: K-major, 128-byte rows in 8-row groups SBO apart, or M-major (A_MN, 16-bit only:
// trans-a): 128-byte chunks of M LBO apart, 128-byte K rows in 8-row groups SBO apart.
// B: K-major like A ('k'), or N-major ('n', 16-bit only) like an M-major A. SET: the
// product replaces the accumulators (scale-d 0).
template <typename T, int N, char B_MAJOR, bool SET = false, bool A_MN = false>
static inline void cpu_wgmma(float (&d)[N / 2], unsigned long long a, unsigned long long b) {
    constexpr int width = sizeof(T), K = 32 / width, row_elements = 128 / width;
    int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
    const unsigned char *as = cpu_desc_start(a), *bs = cpu_desc_start(b);
    long long a_lbo = cpu_desc_lbo(a), a_sbo = cpu_desc_sbo(a);
    long long b_lbo = cpu_desc_lbo(b), b_sbo = cpu_desc_sbo(b);
    for (int i = 0; i < N / 2; ++i) {
        int row = 16 * warp + lane / 4 + 8 * (i / 2 % 2);
        int col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
        float sum = SET ? 0.0f : d[i];
        for (int k = 0; k < K; ++k) {
            const T* x = (const T*)cpu_swizzled(
                A_MN ? as + row / row_elements * a_lbo + row % row_elements * width
                           + k % 8 * 128 + k / 8 * a_sbo
                     : as + row % 8 * 128 + row / 8 * a_sbo + width * k);
            const T* y = (const T*)cpu_swizzled(
                B_MAJOR == 'k'
                    ? bs + col % 8 * 128 + col / 8 * b_sbo + width * k
                    : bs + col / row_elements * b_lbo + col % row_elements * width
                          + k % 8 * 128 + k / 8 * b_sbo);
            sum += cpu_operand(*x) * cpu_operand(*y);
        }
        d[i] = sum;
    }
}
// The same with A in registers (16-bit types): each warp's 16 rows × 16 K as mma.sync's A
// fragment (a0: row g, K 2t and 2t+1; a1: row g+8; a2 and a3: K + 8), exchanged in the warp.
template <typename T, int N, char B_MAJOR>
static inline void cpu_wgmma_ra(float (&d)[N / 2], unsigned a0, unsigned a1, unsigned a2,
                                unsigned a3, unsigned long long b) {
    constexpr int width = sizeof(T), row_elements = 128 / width;
    WarpExchange& x = exchange();
    int lane = cpu_cuda_thread % 32;
    int regs[4] = {(int)a0, (int)a1, (int)a2, (int)a3};
    memcpy(x.i[lane], regs, sizeof regs);
    warp_sync();
    float a[16][16];
    auto lo = [](int v) { return to_float(T{(uint16_t)(v & 0xffff)}); };
    auto hi = [](int v) { return to_float(T{(uint16_t)((uint32_t)v >> 16)}); };
    for (int from = 0; from < 32; ++from) {
        int g = from / 4, t = from % 4;
        for (int h = 0; h < 2; ++h) {
            a[g][2 * t + 8 * h] = lo(x.i[from][2 * h]);
            a[g][2 * t + 8 * h + 1] = hi(x.i[from][2 * h]);
            a[g + 8][2 * t + 8 * h] = lo(x.i[from][2 * h + 1]);
            a[g + 8][2 * t + 8 * h + 1] = hi(x.i[from][2 * h + 1]);
        }
    }
    warp_sync();
    const unsigned char* bs = cpu_desc_start(b);
    long long b_lbo = cpu_desc_lbo(b), b_sbo = cpu_desc_sbo(b);
    for (int i = 0; i < N / 2; ++i) {
        int row = lane / 4 + 8 * (i / 2 % 2);
        int col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
        float sum = d[i];
        for (int k = 0; k < 16; ++k) {
            const T* y = (const T*)cpu_swizzled(
                B_MAJOR == 'k'
                    ? bs + col % 8 * 128 + col / 8 * b_sbo + width * k
                    : bs + col / row_elements * b_lbo + col % row_elements * width
                          + k % 8 * 128 + k / 8 * b_sbo);
            sum += a[row][k] * to_float(*y);
        }
        d[i] = sum;
    }
}
// TF32 with A in registers: each warp's 16 rows × 8 K, one value's bits a register (a0: row
// g, K t; a1: row g+8; a2 and a3: K + 4), exchanged in the warp; B K-major f32 (TF32).
template <int N, bool SET>
static inline void cpu_wgmma_ra_tf32(float (&d)[N / 2], unsigned a0, unsigned a1, unsigned a2,
                                     unsigned a3, unsigned long long b) {
    WarpExchange& x = exchange();
    int lane = cpu_cuda_thread % 32;
    int regs[4] = {(int)a0, (int)a1, (int)a2, (int)a3};
    memcpy(x.i[lane], regs, sizeof regs);
    warp_sync();
    float a[16][8];
    for (int from = 0; from < 32; ++from) {
        int g = from / 4, t = from % 4;
        for (int r = 0; r < 4; ++r) {
            float v;
            memcpy(&v, &x.i[from][r], 4);
            a[g + 8 * (r % 2)][t + 4 * (r / 2)] = cpu_tf32(v);
        }
    }
    warp_sync();
    const unsigned char* bs = cpu_desc_start(b);
    long long b_sbo = cpu_desc_sbo(b);
    for (int i = 0; i < N / 2; ++i) {
        int row = lane / 4 + 8 * (i / 2 % 2);
        int col = 8 * (i / 4) + 2 * (lane % 4) + i % 2;
        float sum = SET ? 0.0f : d[i];
        for (int k = 0; k < 8; ++k) {
            const float* y =
                (const float*)cpu_swizzled(bs + col % 8 * 128 + col / 8 * b_sbo + 4 * k);
            sum += a[row][k] * cpu_tf32(*y);
        }
        d[i] = sum;
    }
}
// wgmma.commit_group: a barrier of the 128 threads of the warpgroup (threadIdx.x / 128).
// A thread's wgmma computes its products when it issues it, where on the GPU the warpgroup's
// asynchronous wgmma reads shared memory until wgmma.wait_group, and it cannot end before all
// four warps issued it: past the commit (and so past a wait_group), every thread of the
// warpgroup has issued its earlier wgmmas here too, so one thread may release their shared
// memory (an mbarrier arrival for the whole warpgroup) after its wait.
static cpu_cuda_barrier* cpu_wgmma_groups[8];
static inline void cpu_wgmma_commit() {
    unsigned group = cpu_cuda_thread / 128;
    if (!cpu_wgmma_groups[group]) {
        unsigned left = cpu_cuda_block->count - 128 * group;
        cpu_wgmma_groups[group] = new cpu_cuda_barrier(left < 128 ? left : 128);
    }
    cpu_wgmma_groups[group]->arrive_and_wait();
}
static inline float __uint_as_float(unsigned bits) {
    float x;
    memcpy(&x, &bits, 4);
    return x;
}
// cvt.rna.tf32.f32: to nearest, ties away from zero, on the 13 bits TF32 drops.
static inline unsigned cpu_cvt_rna_tf32(float x) {
    unsigned bits;
    memcpy(&bits, &x, 4);
    if ((bits & 0x7F800000u) != 0x7F800000u) bits = (bits + 0x1000u) & 0xFFFFE000u;
    return bits;
}
// Named barriers (bar.sync id, count), made on first use with that count, and the reducing
// ones (bar.red.or.pred): each thread ORs its predicate in, the barrier's completion takes the
// OR for every thread to read before any of them can arrive again.
static std::map<unsigned, cpu_cuda_barrier*> cpu_cuda_named;
static inline cpu_cuda_barrier* cpu_cuda_named_barrier(unsigned id, int count) {
    auto found = cpu_cuda_named.find(id);
    return found != cpu_cuda_named.end() ? found->second
                                         : (cpu_cuda_named[id] = new cpu_cuda_barrier(count));
}
static inline void cpu_cuda_bar_sync(unsigned id, int count) {
    cpu_cuda_named_barrier(id, count)->arrive_and_wait();
}
// bar.arrive: counts the thread in at barrier `id` without waiting for the others.
static inline void cpu_cuda_bar_arrive(unsigned id, int count) {
    (void)cpu_cuda_named_barrier(id, count)->arrive();
}
struct CpuRed { unsigned any = 0, result = 0; };
static std::map<unsigned, std::pair<CpuRed*, cpu_cuda_barrier*>> cpu_cuda_reducing;
static inline unsigned cpu_cuda_bar_red_or(unsigned id, int count, unsigned predicate) {
    auto found = cpu_cuda_reducing.find(id);
    if (found == cpu_cuda_reducing.end()) {
        CpuRed* red = new CpuRed;
        cpu_cuda_barrier* barrier = new cpu_cuda_barrier(count);
        barrier->state = red;
        barrier->done = [](void* r) {
            ((CpuRed*)r)->result = ((CpuRed*)r)->any;
            ((CpuRed*)r)->any = 0;
        };
        found = cpu_cuda_reducing.emplace(id, std::make_pair(red, barrier)).first;
    }
    auto [red, barrier] = found->second;
    red->any |= predicate != 0;
    barrier->arrive_and_wait();
    return red->result;
}
"""

WGMMA = re.compile(r"tinyopt_wgmma_m64n(\d+)k(?:16|32)_(bf16|f16|e4m3|e5m2)_([nk])(_ta)?(_set)?\(")
WGMMA_RA = re.compile(r"tinyopt_wgmma_ra_m64n(\d+)k16_(bf16|f16)_([nk])\(")
WGMMA_TF32 = re.compile(r"tinyopt_wgmma_m64n(\d+)k8_tf32_k(_set)?\(")
WGMMA_RA_TF32 = re.compile(r"tinyopt_wgmma_ra_m64n(\d+)k8_tf32_k(_set)?\(")
TENSOR_MAP = re.compile(r"const __grid_constant__ CUtensorMap (\w+)")
BAR_SYNC = re.compile(
    r'asm volatile\("bar\.(sync|arrive) %0, (\d+);" :: "r"\(\(unsigned\)(\w+)\) : "memory"\);'
)
BAR_RED = re.compile(
    r'asm volatile\("\{ \.reg \.pred p, q; setp\.ne\.u32 q, %2, 0; bar\.red\.or\.pred p, %1, '
    r'(\d+), q; selp\.u32 %0, 1, 0, p; \}" : "=r"\((\w+)\) : "r"\(\(unsigned\)(\w+)\), '
    r'"r"\(\(unsigned\)(\w+)\) : "memory"\);'
)
CVT_TF32 = re.compile(r'asm\("cvt\.rna\.tf32\.f32 %0, %1;" : "=r"\((\w+)\) : "f"\((\w+)\)\);')
RED_ADD = re.compile(
    r'asm volatile\("red\.global\.add\.v\d\.f32 \[%0\], \{[%\d, ]+\};" :: "l"\((.*?)\), '
    r'((?:"f"\(\w+\)(?:, )?)+) : "memory"\);'
)
"""A vector of f32 added into global memory (`tile.vector_atomic_add`: an atomic split's
partial sums): one `atomicAdd` per lane here."""
WGMMA_COMMIT = 'asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");'
"""`tile.wgmma_commit`, a barrier of the warpgroup here (`cpu_wgmma_commit`)."""
OTHER_ASM = re.compile(r"^\s*asm volatile\(.*\);$", re.MULTILINE)
_C_TYPES = {"bf16": "__nv_bfloat16", "f16": "__half"}


def emulated(kernel: tile.CudaKernelOp, buffers: list[np.ndarray]) -> tile.CudaKernelOp:
    """The kernel with its tensor-map parameters taken as pointers (each map built from its
    buffer's shape at the top of the kernel), wgmma on the emulation, bar.sync on its barriers,
    and the other inline PTX dropped."""
    source = kernel.source.data
    specs = {spec.arg: spec for spec in tile.tensor_maps(kernel)}
    names = TENSOR_MAP.findall(source)
    maps = []
    for position, name in zip(sorted(specs), names, strict=True):
        spec, shape = specs[position], buffers[position].shape
        width = buffers[position].dtype.itemsize
        # f16 and bf16 are both held as their 16-bit patterns, the 8-bit floats as bytes
        element = {4: "float", 2: "__nv_bfloat16", 1: "__nv_fp8_e4m3"}[width]
        dims = ", ".join(str(d) for d in reversed(shape))
        box = ", ".join(str(b) for b in reversed(spec.box))
        maps.append(
            f"    const CUtensorMap {name} = cpu_tensor_map({name}_data, {len(shape)}, {width}, "
            f"{spec.swizzle}, {{{dims}}}, {{{box}}});\n"
        )
        source = source.replace(
            f"const __grid_constant__ CUtensorMap {name}",
            f"const {element}* __restrict__ {name}_data",
        )
    start = source.index('extern "C" __global__')
    body = source.index("{", start) + 1
    source = source[:body] + "\n" + "".join(maps) + source[body:]
    source = WGMMA.sub(
        lambda m: (
            f"cpu_wgmma<cpu_{m[2]}, {m[1]}, '{m[3]}', {'true' if m[5] else 'false'}, "
            f"{'true' if m[4] else 'false'}>("
        ),
        source,
    )
    source = WGMMA_RA.sub(lambda m: f"cpu_wgmma_ra<cpu_{m[2]}, {m[1]}, '{m[3]}'>(", source)
    source = WGMMA_TF32.sub(
        lambda m: f"cpu_wgmma<float, {m[1]}, 'k', {'true' if m[2] else 'false'}>(", source
    )
    source = WGMMA_RA_TF32.sub(
        lambda m: f"cpu_wgmma_ra_tf32<{m[1]}, {'true' if m[2] else 'false'}>(", source
    )
    source = BAR_SYNC.sub(r"cpu_cuda_bar_\1(\3, \2);", source)
    source = BAR_RED.sub(r"\2 = cpu_cuda_bar_red_or(\3, \1, \4);", source)
    source = CVT_TF32.sub(r"\1 = cpu_cvt_rna_tf32(\2);", source)
    source = RED_ADD.sub(_atomic_adds, source)
    source = source.replace(WGMMA_COMMIT, "cpu_wgmma_commit();")
    source = OTHER_ASM.sub("", plain_flags(source))
    source = ALIGNED_SHARED.sub(r"\1 static ", source)
    fake = kernel.clone()
    fake.properties["source"] = StringAttr(source)
    return fake


def _atomic_adds(m: re.Match[str]) -> str:
    lanes = re.findall(r'"f"\((\w+)\)', m[2])
    adds = " ".join(f"atomicAdd(cpu_red + {i}, {lane});" for i, lane in enumerate(lanes))
    return f"{{ float* cpu_red = {m[1]}; {adds} }}"


_ALLOCATED = {
    "f32": (np.float32, np.nan),
    "bf16": (np.uint16, 0x7FC0),
    "f16": (np.uint16, 0x7E00),
    "i32": (np.int32, -0x5A5A5A5A),
    "i64": (np.int64, -0x5A5A5A5A5A5A5A5A),
    "i1": (np.bool_, True),
    "f8E4M3FN": (np.uint8, 0x7F),
    "f8E5M2": (np.uint8, 0x7E),
}
"""How a buffer the host function allocates is held, and the poison it starts as (NaN for the
floats)."""


def run_program_on_cpu(
    module, arrays: list[np.ndarray], timeout: float | None = None, reverse: bool = False
) -> list[np.ndarray]:
    """Runs the host function's launches in order on the CPU with the wgmma emulation, over the
    inputs (16-bit floats as their bits, runtime scalars as 0-d arrays) and the buffers it
    allocates (NaN-filled, so an element never written shows); returns the arrays it
    returns. A launch running longer than `timeout` seconds is killed
    (`subprocess.TimeoutExpired`); `reverse` runs each launch's blocks last to first
    (`run_on_cpu`)."""
    (function,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, tile.CudaKernelOp)}
    held: dict[SSAValue, np.ndarray] = {}
    for op in function.body.block.ops:
        if isinstance(op, memref.AllocOp):
            t = op.memref.type
            assert isinstance(t, MemRefType)
            storage, fill = _ALLOCATED[str(t.element_type)]
            held[op.memref] = np.full(t.get_shape(), fill, storage)
        elif isinstance(op, loop.LaunchOp):
            sources = [viewed(a) for a in op.args]
            buffers = [
                _buffer(s, arrays, held).reshape(
                    a.type.get_shape() if isinstance(a.type, MemRefType) else ()  # a scalar
                )
                for a, s in zip(op.args, sources, strict=True)
            ]
            kernel = emulated(kernels[op.callee.string_value()], buffers)
            for s, out in zip(
                sources,
                run_on_cpu(kernel, buffers, PRELUDE, timeout=timeout, reverse=reverse),
                strict=True,
            ):
                if not isinstance(s, BlockArgument):
                    held[s] = out.reshape(held[s].shape)
    returned = function.body.block.last_op.operands  # type: ignore[union-attr]
    return [held[viewed(v)] for v in returned]


def _buffer(value: SSAValue, arrays: list[np.ndarray], held: dict) -> np.ndarray:
    if isinstance(value, BlockArgument):
        return arrays[value.index]
    return held[value]


def error_on_cpu(
    text: str,
    pipeline: str,
    seed: int,
    run: Callable = run_program_on_cpu,
    lowered: tuple[ModuleOp, ModuleOp] | None = None,
) -> tuple[float, float]:
    """Lowers a one-output graph program by `pipeline` (or takes what `lower` gave for them,
    `lowered`, where the test has it already), runs its launches on the CPU by `run` (this
    emulation, or another runner of a module's launches) over fresh inputs (`device_inputs`
    at `seed`; f16 as its bits, an f16 output read back from them) and returns the output's
    error against the float64 reference and the program's tolerance."""
    program, module = lowered or lower(text, pipeline)
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=seed)
    arrays = [a.view(np.uint16) if a.dtype == np.float16 else a for a in arrays]
    (result,) = run(module, arrays)
    if str(graph.function_type.outputs.data[0].element_type) == "f16":  # type: ignore[attr-defined]
        result = result.view(np.float16)
    (error,) = errors_against_reference(graph, [result], inputs)
    return error, tolerance(graph)
