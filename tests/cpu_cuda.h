// The CUDA subset of tinyopt's mma.sync kernels, emulated on the CPU (tests/cpu_cuda.py):
// a block's CUDA threads are fibers (ucontext) on one OS thread, switched only where a thread
// waits: a barrier per block (__syncthreads) and per warp (the warp-wide ldmatrix, mma.sync and
// shuffles exchange their lanes' operands through it), named barriers and mbarrier waits. A
// thread runs on until it waits, so a wait no thread can end is found (all of them waiting, a
// round without progress) and reported as a deadlock, where threads would hang.
// cp.async copies synchronously: a kernel that overwrote a tile other warps still read would
// give wrong numbers here too.
// A kernel with `__cluster_dims__` runs its clusters one after another, the blocks of a cluster
// at once, each block a forked process (`cpu_cuda_cluster`): every global here (blockIdx, the
// block's barriers, static shared memory, the emulation's tables) is then the block's own,
// while the kernel buffers and the cluster's shared-memory arenas lie in MAP_SHARED mappings.
// A block of a cluster whose threads all wait may be waiting for another block (an arrival on
// its mbarrier, a multicast copy, the cluster barrier): it polls, giving the CPU up, until
// something changes; only when every block of the cluster waits (or has finished) with
// nothing changed since is it a deadlock (`cpu_cuda_cluster_stalled`).
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>
#include <vector>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__
#define __align__(n) alignas(n)
#define __cluster_dims__(...)

struct Dim { unsigned x, y, z; };
Dim threadIdx;  // the running fiber's, set at each switch
unsigned cpu_cuda_thread;  // x + y·bx + z·bx·by: warps are 32 consecutive ones
Dim blockIdx;
// A block's shared memory: the arena of a block outside a cluster; a block of a cluster points
// cpu_cuda_smem at its rank's arena in cpu_cuda_cluster_smem.
constexpr size_t CPU_CUDA_SMEM_BYTES = 256 * 1024;
alignas(1024) unsigned char cpu_cuda_arena[CPU_CUDA_SMEM_BYTES];
unsigned char* cpu_cuda_smem = cpu_cuda_arena;

// The cluster of the running block (the `cpu_cuda_cluster` section below): its blocks' arenas,
// CPU_CUDA_SMEM_BYTES a rank (null outside a cluster), its size (0 outside one), this block's
// rank, and the state its block processes share.
constexpr unsigned CPU_CUDA_CLUSTER_MAX = 16;
constexpr unsigned long long CPU_CUDA_CLUSTER_DONE = ~0ull;
struct CpuCudaCluster {
    // Bumped after every change one block makes that another may wait for: an arrival or
    // copy on a cluster block's mbarrier, an arrival at the cluster barrier, a block's end.
    std::atomic<unsigned long long> changes;
    // Per rank: 0 while the block goes on; 1 + `changes` as it was when a round of the block's
    // fibers began that none of them could go on in; CPU_CUDA_CLUSTER_DONE once it returned.
    std::atomic<unsigned long long> stalled[CPU_CUDA_CLUSTER_MAX];
    std::atomic<unsigned> arrived, generation;  // the cluster barrier of the blocks
};
unsigned char* cpu_cuda_cluster_smem;
unsigned cpu_cuda_cluster_size;
unsigned cpu_cuda_cluster_rank;
CpuCudaCluster* cpu_cuda_cluster_state;
// Marks a change another block of the cluster may wait for (nothing to do outside a cluster).
static inline void cpu_cuda_cluster_changed() {
    if (cpu_cuda_cluster_state) cpu_cuda_cluster_state->changes.fetch_add(1);
}
// Seconds a block of a cluster polls with nothing changing before it gives up as hung, where
// the other blocks do not all wait (CPU_CUDA_CLUSTER_TIMEOUT, default 300).
static inline double cpu_cuda_cluster_timeout() {
    const char* text = getenv("CPU_CUDA_CLUSTER_TIMEOUT");
    return text ? atof(text) : 300.0;
}

// Fibers. cpu_cuda_run_block runs a block's threads in rounds, each fiber until it waits
// (cpu_cuda_poll) or returns; a round in which no fiber made progress (arrived, passed a wait,
// returned) while some are left is a deadlock, outside a cluster at once, in a cluster once
// no block of it can go on (cpu_cuda_cluster_stalled). Rounds go through the threads forwards
// and backwards by turns, so the code between two barriers runs in both orders where it runs
// more than once: a read of another thread's write with no barrier between them sees the old
// value in one of the orders.
constexpr size_t CPU_CUDA_STACK_BYTES = 1 << 20;  // reserved, touched as used
struct CpuFiber { ucontext_t context; bool done; };
CpuFiber* cpu_cuda_fibers;
unsigned cpu_cuda_running;
ucontext_t cpu_cuda_scheduler;
bool cpu_cuda_progress;
void (*cpu_cuda_entry)(void*);
void* cpu_cuda_entry_argument;
static void cpu_cuda_fiber_start() {
    cpu_cuda_entry(cpu_cuda_entry_argument);
    cpu_cuda_fibers[cpu_cuda_running].done = true;
    cpu_cuda_progress = true;
}  // returns to the scheduler (uc_link)
// A waiting fiber gives the CPU to the next one.
static inline void cpu_cuda_poll() {
    swapcontext(&cpu_cuda_fibers[cpu_cuda_running].context, &cpu_cuda_scheduler);
}
// A round of the block's fibers that began when the cluster's changes were `changes` left
// `left` of them waiting, none able to go on: the block waits for another block of its
// cluster. It is a deadlock, reported and aborted, once every other block of the cluster has
// finished or also found no thread to run in a round that began with nothing changed since;
// or, to report a hang rather than wait forever (another block spinning outside the
// emulation's waits), after cpu_cuda_cluster_timeout() seconds of such rounds with nothing
// changed in the cluster. Until then the block gives up the CPU: yields, then sleeps of
// up to 0.5 ms. `idle`: the rounds of the kind before this one since the block last went on.
static inline void cpu_cuda_cluster_stalled(unsigned long long changes, unsigned left,
                                            unsigned idle) {
    static std::chrono::steady_clock::time_point since;
    static unsigned long long seen;
    CpuCudaCluster& c = *cpu_cuda_cluster_state;
    c.stalled[cpu_cuda_cluster_rank].store(changes + 1);
    bool all = true;
    for (unsigned r = 0; r < cpu_cuda_cluster_size && all; ++r) {
        unsigned long long s = c.stalled[r].load();
        all = s == changes + 1 || s == CPU_CUDA_CLUSTER_DONE;
    }
    auto now = std::chrono::steady_clock::now();
    if (idle == 0 || changes != seen) {
        since = now;
        seen = changes;
    }
    double waited = std::chrono::duration<double>(now - since).count();
    bool found = all && c.changes.load() == changes;
    if (found || waited > cpu_cuda_cluster_timeout()) {
        fprintf(stderr, "deadlock: block (%u, %u, %u), rank %u of its cluster, has %u threads "
                "waiting and none can go on; %s\n", blockIdx.x, blockIdx.y, blockIdx.z,
                cpu_cuda_cluster_rank, left, found ? "every other block of the cluster waits "
                "too or has finished" : "nothing changed in the cluster for the timeout "
                "(CPU_CUDA_CLUSTER_TIMEOUT seconds)");
        abort();
    }
    if (idle < 64) sched_yield();
    else usleep(idle < 256 ? 50 : 500);
}
// Runs `thread(t)` for t < threads as the block's fibers (threadIdx from t and the block's
// x and y sizes bx, by).
template <typename Thread>
static inline void cpu_cuda_run_block(unsigned threads, unsigned bx, unsigned by, Thread thread) {
    static unsigned char* stacks;
    static unsigned reserved;
    if (threads > reserved) {
        if (stacks) munmap(stacks, reserved * CPU_CUDA_STACK_BYTES);
        stacks = (unsigned char*)mmap(nullptr, threads * CPU_CUDA_STACK_BYTES,
                                      PROT_READ | PROT_WRITE,
                                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (stacks == MAP_FAILED) { perror("mmap"); abort(); }
        reserved = threads;
    }
    std::vector<CpuFiber> fibers(threads);
    cpu_cuda_fibers = fibers.data();
    auto entry = [&]() { thread(cpu_cuda_running); };
    cpu_cuda_entry = [](void* e) { (*(decltype(entry)*)e)(); };
    cpu_cuda_entry_argument = &entry;
    for (unsigned t = 0; t < threads; ++t) {
        getcontext(&fibers[t].context);
        fibers[t].context.uc_stack = {stacks + t * CPU_CUDA_STACK_BYTES, 0, CPU_CUDA_STACK_BYTES};
        fibers[t].context.uc_link = &cpu_cuda_scheduler;
        fibers[t].done = false;
        makecontext(&fibers[t].context, cpu_cuda_fiber_start, 0);
    }
    for (unsigned round = 0, left = threads, idle = 0; left; ++round) {
        unsigned long long changes =
            cpu_cuda_cluster_state ? cpu_cuda_cluster_state->changes.load() : 0;
        cpu_cuda_progress = false;
        for (unsigned i = 0; i < threads; ++i) {
            unsigned t = round % 2 ? threads - 1 - i : i;
            if (fibers[t].done) continue;
            cpu_cuda_running = t;
            cpu_cuda_thread = t;
            threadIdx = {t % bx, t / bx % by, t / (bx * by)};
            swapcontext(&cpu_cuda_scheduler, &fibers[t].context);
            left -= fibers[t].done;
        }
        if (left && !cpu_cuda_progress) {
            if (cpu_cuda_cluster_state) {
                cpu_cuda_cluster_stalled(changes, left, idle++);
                continue;
            }
            fprintf(stderr, "deadlock: block (%u, %u, %u) has %u threads waiting and none can go "
                    "on\n", blockIdx.x, blockIdx.y, blockIdx.z, left);
            abort();
        }
        if (cpu_cuda_cluster_state && idle) {
            cpu_cuda_cluster_state->stalled[cpu_cuda_cluster_rank].store(0);
            idle = 0;
        }
    }
}
// A barrier of `count` fibers (std::barrier's arrive / arrive_and_wait); `done`, if given, runs
// when the last one arrives, before any goes on.
struct cpu_cuda_barrier {
    unsigned count, arrived = 0, phase = 0;
    void (*done)(void*) = nullptr;
    void* state = nullptr;
    explicit cpu_cuda_barrier(unsigned n) : count(n) {}
    unsigned arrive() {
        unsigned at = phase;
        cpu_cuda_progress = true;
        if (++arrived == count) {
            if (done) done(state);
            arrived = 0;
            ++phase;
        }
        return at;
    }
    void wait(unsigned at) {
        while (phase == at) cpu_cuda_poll();
        cpu_cuda_progress = true;
    }
    void arrive_and_wait() { wait(arrive()); }
};
cpu_cuda_barrier* cpu_cuda_block;
cpu_cuda_barrier* cpu_cuda_warp[32];
std::vector<std::span<char>>* cpu_cuda_buffers;
FILE* cpu_cuda_prefetch_log;

// The index of the kernel buffer holding address p; aborts, naming `what`, where none does.
static inline size_t cpu_cuda_buffer_of(const void* p, const char* what) {
    for (size_t k = 0; k < cpu_cuda_buffers->size(); ++k) {
        const char* base = (*cpu_cuda_buffers)[k].data();
        if (p >= base && p < base + (*cpu_cuda_buffers)[k].size()) return k;
    }
    fprintf(stderr, "%s of an address outside every buffer\n", what);
    abort();
}

// prefetch.global.L2: aborts unless the address lies in a kernel buffer; with a log open,
// writes "block buffer byte-offset" (block: x + y·gx + z·gx·gy, the caller's grid).
static inline void cpu_cuda_prefetch(const void* p, unsigned gx, unsigned gy) {
    size_t k = cpu_cuda_buffer_of(p, "prefetch");
    if (cpu_cuda_prefetch_log) {
        unsigned block = blockIdx.x + gx * (blockIdx.y + gy * blockIdx.z);
        const char* base = (*cpu_cuda_buffers)[k].data();
        fprintf(cpu_cuda_prefetch_log, "%u %zu %td\n", block, k, (const char*)p - base);
    }
}

// cp.async.bulk.prefetch.L2: aborts unless the bytes [p, p + n) lie in one kernel buffer and
// p and n are 16-byte multiples (p from the buffer's start); logged as one prefetch of p.
static inline void cpu_cuda_prefetch_bulk(const void* p, unsigned n, unsigned gx, unsigned gy) {
    std::span<char> buffer = (*cpu_cuda_buffers)[cpu_cuda_buffer_of(p, "bulk prefetch")];
    size_t offset = (const char*)p - buffer.data();
    if (offset + n > buffer.size() || offset % 16 || n % 16) {
        fprintf(stderr, "bulk prefetch past its buffer or not 16-byte aligned\n");
        abort();
    }
    cpu_cuda_prefetch(p, gx, gy);
}

static inline unsigned __cvta_generic_to_shared(const void* p) {
    return (unsigned)((const unsigned char*)p - cpu_cuda_smem);
}
static inline void __syncthreads() { cpu_cuda_block->arrive_and_wait(); }
static inline void warp_sync() { cpu_cuda_warp[cpu_cuda_thread / 32]->arrive_and_wait(); }
static inline void __syncwarp() { warp_sync(); }
static inline int lane() { return cpu_cuda_thread % 32; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }

template <typename T, int N> struct tinyopt_vec { T v[N]; };

struct __nv_bfloat16 { uint16_t bits; };
struct __half { uint16_t bits; };
static inline float to_float(__nv_bfloat16 h) {
    uint32_t b = (uint32_t)h.bits << 16; float f; memcpy(&f, &b, 4); return f;
}
static inline float to_float(__half h) { _Float16 x; memcpy(&x, &h.bits, 2); return (float)x; }
static inline __nv_bfloat16 __float2bfloat16_rn(float f) {
    if (std::isnan(f)) return {0x7fc0};
    uint32_t b; memcpy(&b, &f, 4);
    b += 0x7fff + ((b >> 16) & 1);  // round to nearest even
    return {(uint16_t)(b >> 16)};
}
static inline __half __float2half_rn(float f) { _Float16 x = (_Float16)f; __half h; memcpy(&h.bits, &x, 2); return h; }
static inline float __bfloat162float(__nv_bfloat16 h) { return to_float(h); }
// 8-bit floats (cuda_fp8.h's one-byte classes, read as `(float)x`) and the printer's
// conversions to them, rounding as tinyopt.backends.fp8 does: to the nearest of the 256
// patterns, ties to the even one; e4m3fn saturates (infinity too), e5m2 overflows to infinity.
template <int E, int M> struct cpu_fp8 {
    uint8_t __x;
    static float value(int b) {
        int exponent = (b >> M) & ((1 << E) - 1), mantissa = b & ((1 << M) - 1);
        int bias = (1 << (E - 1)) - 1;
        float magnitude = exponent ? std::ldexp(1.0f + mantissa / float(1 << M), exponent - bias)
                                   : std::ldexp(mantissa / float(1 << M), 1 - bias);
        if (exponent == (1 << E) - 1 && (E == 5 || mantissa == (1 << M) - 1))
            magnitude = E == 5 && mantissa == 0 ? INFINITY : NAN;
        return b & 0x80 ? -magnitude : magnitude;
    }
    explicit operator float() const { return value(__x); }
    static cpu_fp8 from(float x) {
        float largest = E == 4 ? 448.0f : 57344.0f;
        if (x != x) return {uint8_t(E == 4 ? 0x7F : 0x7E)};
        float a = std::fabs(x);
        int sign = std::signbit(x) ? 0x80 : 0;
        if (E == 4 && a > largest) a = largest;
        if (E == 5 && a >= 61440.0f) return {uint8_t(sign | 0x7C)};
        int best = 0;
        for (int b = 1; b < 0x80; ++b) {
            float v = value(b), d = std::fabs(v - a), e = std::fabs(value(best) - a);
            if (v == v && !std::isinf(v) && (d < e || (d == e && b % 2 == 0))) best = b;
        }
        return {uint8_t(sign | best)};
    }
};
using __nv_fp8_e4m3 = cpu_fp8<4, 3>;
using __nv_fp8_e5m2 = cpu_fp8<5, 2>;
template <int E, int M> static inline float to_float(cpu_fp8<E, M> x) { return (float)x; }
static inline __nv_fp8_e4m3 tinyopt_to_e4m3(float x) { return __nv_fp8_e4m3::from(x); }
static inline __nv_fp8_e5m2 tinyopt_to_e5m2(float x) { return __nv_fp8_e5m2::from(x); }
static inline float __half2float(__half h) { return to_float(h); }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }

struct WarpExchange { float f[32]; int i[32][6]; const void* p[32]; long long ll[32]; };
WarpExchange cpu_cuda_exchange[32];
static inline WarpExchange& exchange() { return cpu_cuda_exchange[cpu_cuda_thread / 32]; }

static inline float __shfl_xor_sync(unsigned, float v, int offset, int) {
    WarpExchange& x = exchange();
    x.f[lane()] = v;
    warp_sync();
    float r = x.f[lane() ^ offset];
    warp_sync();
    return r;
}

template <typename T> static inline T __shfl_sync(unsigned, T v, int source) {
    WarpExchange& x = exchange();
    x.ll[lane()] = (long long)v;
    warp_sync();
    T r = (T)x.ll[source];
    warp_sync();
    return r;
}

static inline uint16_t element(const void* row, int k) { return ((const uint16_t*)row)[k]; }
static inline int pack(uint16_t lo, uint16_t hi) { return (int)((uint32_t)lo | ((uint32_t)hi << 16)); }

// ldmatrix .x4: lanes 8m..8m+7 give the rows of matrix m; lane l receives row l/4, columns
// 2(l%4) and 2(l%4)+1 of each matrix (of its transpose with .trans).
static inline void ldmatrix(int (&out)[4], const void* row, bool trans) {
    WarpExchange& x = exchange();
    x.p[lane()] = row;
    warp_sync();
    int l = lane();
    for (int m = 0; m < 4; ++m) {
        if (trans) {
            out[m] = pack(element(x.p[8 * m + 2 * (l % 4)], l / 4),
                          element(x.p[8 * m + 2 * (l % 4) + 1], l / 4));
        } else {
            const void* r = x.p[8 * m + l / 4];
            out[m] = pack(element(r, 2 * (l % 4)), element(r, 2 * (l % 4) + 1));
        }
    }
    warp_sync();
}
static inline void tinyopt_ldmatrix_x4(int& r0, int& r1, int& r2, int& r3, const void* row) {
    int out[4]; ldmatrix(out, row, false); r0 = out[0]; r1 = out[1]; r2 = out[2]; r3 = out[3];
}
static inline void tinyopt_ldmatrix_x4_trans(int& r0, int& r1, int& r2, int& r3, const void* row) {
    int out[4]; ldmatrix(out, row, true); r0 = out[0]; r1 = out[1]; r2 = out[2]; r3 = out[3];
}

// mma.sync m16n8k16, A row-major, B column-major, fp32 accumulators (PTX ISA fragment layouts).
template <typename T>
static inline void mma(float& d0, float& d1, float& d2, float& d3, int a0, int a1, int a2, int a3,
                       int b0, int b1, float c0, float c1, float c2, float c3) {
    WarpExchange& x = exchange();
    int l = lane();
    int regs[6] = {a0, a1, a2, a3, b0, b1};
    memcpy(x.i[l], regs, sizeof regs);
    warp_sync();
    float a[16][16], b[16][8];
    auto lo = [](int v) { return to_float(T{(uint16_t)(v & 0xffff)}); };
    auto hi = [](int v) { return to_float(T{(uint16_t)((uint32_t)v >> 16)}); };
    for (int from = 0; from < 32; ++from) {
        int g = from / 4, t = from % 4;
        const int* r = x.i[from];
        for (int h = 0; h < 2; ++h) {
            a[g][2 * t + 8 * h] = lo(r[2 * h]);
            a[g][2 * t + 8 * h + 1] = hi(r[2 * h]);
            a[g + 8][2 * t + 8 * h] = lo(r[2 * h + 1]);
            a[g + 8][2 * t + 8 * h + 1] = hi(r[2 * h + 1]);
            b[2 * t + 8 * h][g] = lo(r[4 + h]);
            b[2 * t + 8 * h + 1][g] = hi(r[4 + h]);
        }
    }
    warp_sync();
    int g = l / 4, t = l % 4;
    auto dot = [&](int i, int j) {
        double s = 0;
        for (int k = 0; k < 16; ++k) s += (double)a[i][k] * b[k][j];
        return (float)s;
    };
    d0 = c0 + dot(g, 2 * t); d1 = c1 + dot(g, 2 * t + 1);
    d2 = c2 + dot(g + 8, 2 * t); d3 = c3 + dot(g + 8, 2 * t + 1);
}
#define MMA_ARGS float& d0, float& d1, float& d2, float& d3, int a0, int a1, int a2, int a3, \
    int b0, int b1, float c0, float c1, float c2, float c3
static inline void tinyopt_mma_bf16(MMA_ARGS) { mma<__nv_bfloat16>(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3); }
static inline void tinyopt_mma_f16(MMA_ARGS) { mma<__half>(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1, c0, c1, c2, c3); }
static inline int tinyopt_pack_bf16(float lo, float hi) { return pack(__float2bfloat16_rn(lo).bits, __float2bfloat16_rn(hi).bits); }
static inline int tinyopt_pack_f16(float lo, float hi) { return pack(__float2half_rn(lo).bits, __float2half_rn(hi).bits); }
static inline int tinyopt_pack_bf16(__nv_bfloat16 lo, __nv_bfloat16 hi) { return pack(lo.bits, hi.bits); }
static inline int tinyopt_pack_f16(__half lo, __half hi) { return pack(lo.bits, hi.bits); }
static inline void tinyopt_cp_async_16(void* dst, const void* src, bool valid) {
    if (valid) memcpy(dst, src, 16); else memset(dst, 0, 16);
}
// A load's L2 cache policy changes no value: the evict-first load is a plain 16-byte copy.
static inline void tinyopt_ld_16_evict_first(void* dst, const void* src) { memcpy(dst, src, 16); }
static inline float tinyopt_exp2_approx(float x) { return exp2f(x); }
// PTX max.NaN / min.NaN: a NaN operand gives NaN (fmaxf / fminf return the other one).
static inline float tinyopt_fmax_nan(float a, float b) { return a != a || b != b ? NAN : fmaxf(a, b); }
static inline float tinyopt_fmin_nan(float a, float b) { return a != a || b != b ? NAN : fminf(a, b); }
// CUDA's approximate intrinsics (math.h declares its own __expf): the exact operations here.
#define __expf(x) expf(x)
#define __fdividef(a, b) ((a) / (b))
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
// Split-K's partial sums added into the output, and stream-K's fence before it sets a flag.
// Lock-free (a compare-and-swap loop), so the blocks of a cluster, processes, add atomically too.
static inline float atomicAdd(float* p, float v) { return std::atomic_ref<float>(*p).fetch_add(v); }
#define __threadfence() std::atomic_thread_fence(std::memory_order_seq_cst)


// Thread-block clusters. cpu_cuda_cluster_start makes the cluster's arenas (CPU_CUDA_SMEM_BYTES
// a rank) and its shared state (CpuCudaCluster: the barrier of the blocks, the changes and
// stalls the deadlock check reads), both process-shared; cpu_cuda_cluster runs one cluster:
// each block forked with its blockIdx, its rank and its arena, the arenas filled with 0xFF
// bytes first (NaN floats: a read of another block's shared memory before it was written
// shows), and the run stopped where a block fails.
unsigned cpu_cuda_cluster_threads;

// `bytes` (at least one) of a MAP_SHARED mapping, which forked blocks write for the parent.
static inline void* cpu_cuda_shared(size_t bytes) {
    void* p = mmap(nullptr, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                   -1, 0);
    if (p == MAP_FAILED) { perror("mmap"); abort(); }
    return p;
}
static inline std::span<char> cpu_cuda_shared_copy(const std::vector<char>& from) {
    char* to = (char*)cpu_cuda_shared(from.size());
    memcpy(to, from.data(), from.size());
    return {to, from.size()};
}
static inline void cpu_cuda_cluster_start(unsigned blocks, unsigned threads) {
    if (blocks > CPU_CUDA_CLUSTER_MAX) { fprintf(stderr, "a cluster of %u blocks\n", blocks); abort(); }
    cpu_cuda_cluster_size = blocks;
    cpu_cuda_cluster_smem = (unsigned char*)cpu_cuda_shared(blocks * CPU_CUDA_SMEM_BYTES);
    // lock-free atomics in a shared mapping work across the processes
    static_assert(std::atomic<unsigned long long>::is_always_lock_free);
    cpu_cuda_cluster_state = new (cpu_cuda_shared(sizeof(CpuCudaCluster))) CpuCudaCluster{};
    cpu_cuda_cluster_threads = threads;
}
// block(x, y, z) for the cluster whose first block is (x0, y0, z0), cluster dims cx, cy, cz:
// the block of rank r = x%cx + (y%cy)·cx + (z%cz)·cx·cy gets arena r.
template <typename Block>
static inline void cpu_cuda_cluster(unsigned x0, unsigned y0, unsigned z0, unsigned cx,
                                    unsigned cy, unsigned cz, Block block) {
    unsigned blocks = cx * cy * cz;
    memset(cpu_cuda_cluster_smem, 0xFF, blocks * CPU_CUDA_SMEM_BYTES);
    CpuCudaCluster& c = *cpu_cuda_cluster_state;
    c.changes = 0;
    for (unsigned r = 0; r < CPU_CUDA_CLUSTER_MAX; ++r) c.stalled[r] = 0;
    c.arrived = 0;
    fflush(nullptr);  // nothing buffered before the fork is written twice
    std::vector<pid_t> running;
    for (unsigned r = 0; r < blocks; ++r) {
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); abort(); }
        if (pid == 0) {
#ifdef __linux__
            prctl(PR_SET_PDEATHSIG, SIGKILL);  // a block does not outlive a killed run
#endif
            cpu_cuda_cluster_rank = r;
            cpu_cuda_smem = cpu_cuda_cluster_smem + r * CPU_CUDA_SMEM_BYTES;
            block(x0 + r % cx, y0 + r / cx % cy, z0 + r / (cx * cy));
            c.stalled[r] = CPU_CUDA_CLUSTER_DONE;
            cpu_cuda_cluster_changed();
            fflush(nullptr);
            _exit(0);
        }
        running.push_back(pid);
    }
    bool failed = false;
    while (!running.empty()) {
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) { perror("waitpid"); abort(); }
        std::erase(running, pid);
        if (!failed && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            failed = true;  // the others may wait at a cluster barrier for it: stop them
            fprintf(stderr, "a block of the cluster at block (%u, %u, %u) failed\n", x0, y0, z0);
            for (pid_t other : running) kill(other, SIGKILL);
        }
    }
    if (failed) exit(1);
}
// The cluster's barrier of its blocks, which each block's last thread at tinyopt_cluster_sync
// passes: it counts itself in and polls (its block's other threads all wait at the block's
// barrier meanwhile) until the cluster's last block arrives and starts the next generation.
static inline void cpu_cuda_cluster_barrier() {
    CpuCudaCluster& c = *cpu_cuda_cluster_state;
    unsigned generation = c.generation.load();
    if (c.arrived.fetch_add(1) + 1 == cpu_cuda_cluster_size) {
        c.arrived.store(0);
        c.generation.fetch_add(1);
    }
    cpu_cuda_cluster_changed();
    while (c.generation.load() == generation) cpu_cuda_poll();
    cpu_cuda_progress = true;
}
// barrier.cluster.arrive.release + barrier.cluster.wait.acquire: every thread of every block
// of the cluster (the block's threads, then its last one with the other blocks).
static inline void tinyopt_cluster_sync() {
    if (!cpu_cuda_cluster_state) {
        fprintf(stderr, "tinyopt_cluster_sync in a kernel without __cluster_dims__\n");
        abort();
    }
    static cpu_cuda_barrier threads = [] {
        cpu_cuda_barrier b(cpu_cuda_cluster_threads);
        b.done = [](void*) { cpu_cuda_cluster_barrier(); };
        return b;
    }();
    threads.arrive_and_wait();
}
// mapa.shared::cluster: the address at the same offset as `local` (this block's dynamic
// shared memory; `bytes` from it must lie in it too) in the arena of the block of cluster rank
// `rank`; `local` itself for the block's own rank (any address). Outside a cluster, a block
// is the one rank 0 of its own. Aborts, naming `what`, for a rank past the cluster, an
// address outside dynamic shared memory (static `__shared__` variables are the process's own
// here: no other block can reach them), or a block that has returned (its shared memory gone,
// on the GPU: a cluster barrier before the blocks return keeps it while others use it).
static inline unsigned char* cpu_cuda_cluster_address(const void* local, unsigned rank,
                                                      size_t bytes, const char* what) {
    if (rank == cpu_cuda_cluster_rank) return (unsigned char*)local;
    ptrdiff_t offset = (const unsigned char*)local - cpu_cuda_smem;
    bool inside = offset >= 0 && (size_t)offset + bytes <= CPU_CUDA_SMEM_BYTES;
    if (rank >= (cpu_cuda_cluster_size ? cpu_cuda_cluster_size : 1) || !inside) {
        fprintf(stderr, "%s of rank %u at shared offset %td: outside the cluster (%u blocks) or "
                "its dynamic shared memory\n", what, rank, offset,
                cpu_cuda_cluster_size ? cpu_cuda_cluster_size : 1);
        abort();
    }
    if (cpu_cuda_cluster_state->stalled[rank].load() == CPU_CUDA_CLUSTER_DONE) {
        fprintf(stderr, "%s of rank %u, a block that has returned\n", what, rank);
        abort();
    }
    return cpu_cuda_cluster_smem + rank * CPU_CUDA_SMEM_BYTES + offset;
}
// ld.shared::cluster.v4.f32 of the address mapa gives for `local` (this block's shared memory,
// 16-byte aligned) in the block of cluster rank `rank`.
static inline void tinyopt_cluster_load_f32x4(float* out, const void* local, unsigned rank) {
    ptrdiff_t offset = (const unsigned char*)local - cpu_cuda_smem;
    if (!cpu_cuda_cluster_smem || rank >= cpu_cuda_cluster_size || offset < 0 ||
        offset + 16 > (ptrdiff_t)CPU_CUDA_SMEM_BYTES || offset % 16) {
        fprintf(stderr, "tinyopt_cluster_load_f32x4 of rank %u at shared offset %td: outside the "
                "cluster, its shared memory, or not 16-byte aligned\n", rank, offset);
        abort();
    }
    memcpy(out, cpu_cuda_cluster_smem + rank * CPU_CUDA_SMEM_BYTES + offset, 16);
}
