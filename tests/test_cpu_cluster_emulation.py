"""Thread-block clusters in the CPU emulation (tests/cpu_cuda.py, cpu_cuda.h): a kernel with
`__cluster_dims__` runs its clusters one after another, the blocks of a cluster at once, each
with its own shared memory, blockIdx and barriers; `tinyopt_cluster_sync` is a barrier of every
thread of the cluster and `tinyopt_cluster_load_f32x4` reads 16 bytes of another block's shared
memory (distributed shared memory). The kernels are written by hand in the printer's form (its
device helpers before the kernel, dynamic shared memory only) and run through the wgmma
emulation (`cpu_wgmma.emulated`, its PRELUDE), as the cluster GEMMs will be.
"""

from __future__ import annotations

import subprocess

import numpy as np
import pytest
from cpu_cuda import COMPILER, run_on_cpu
from cpu_wgmma import PRELUDE, emulated

from tinyopt.dialects import tile

HELPERS = r"""#include <cuda_bf16.h>
__device__ __forceinline__ void tinyopt_cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ void tinyopt_cluster_load_f32x4(float* out, const void* local,
                                                           unsigned rank) {
    unsigned address;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(address) : "r"((unsigned)__cvta_generic_to_shared(local)), "r"(rank));
    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(out[0]), "=f"(out[1]), "=f"(out[2]), "=f"(out[3])
                 : "r"(address) : "memory");
}

"""
"""The printed kernels' device helpers (before the kernel, so the emulation drops them)."""

SMEM = (
    "    extern __shared__ __align__(1024) unsigned char tinyopt_smem[];\n"
    "    unsigned char* tinyopt_smem_base = tinyopt_smem + ((1024 - "
    "(unsigned)__cvta_generic_to_shared(tinyopt_smem) % 1024) % 1024);\n"
)
"""The printer's dynamic shared memory, its base 1024-byte aligned."""

SLEEP = r"""
#include <chrono>
#include <thread>
static inline void __nanosleep(unsigned ns) {
    if (cpu_cuda_thread == 0) std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
}
"""
"""CUDA's `__nanosleep`, which the emulation header does not have: the tests' blocks write
their shared memory at times apart. A block's threads run one after another from thread 0
(cpu_cuda.h's fibers), so thread 0's sleep delays the whole block."""

THREADS, CLUSTER, GRID_Z = 64, 4, 8
DELAY_NS = 20_000_000
"""Rank r of a cluster writes its shared memory r·20 ms after it starts."""

REDUCE = (
    HELPERS + f'extern "C" __global__ void __cluster_dims__(1, 1, {CLUSTER}) '
    f"__launch_bounds__({THREADS}, 1) cluster_reduce(float* __restrict__ v0) {{\n"
    + SMEM
    + f"""    float (*v1)[4] = reinterpret_cast<float (*)[4]>(tinyopt_smem_base + 1024);
    unsigned rank = blockIdx.z % {CLUSTER};
    __nanosleep(rank * {DELAY_NS}u);
    for (int i = 0; i < 4; ++i)
        v1[threadIdx.x][i] = (float)(blockIdx.z * 1000 + threadIdx.x * 4 + i);
    tinyopt_cluster_sync();
    float sum[4] = {{0.0f, 0.0f, 0.0f, 0.0f}};
    for (unsigned q = 0; q < {CLUSTER}; ++q) {{
        if (q == rank) continue;
        float got[4];
        tinyopt_cluster_load_f32x4(got, &v1[threadIdx.x][0], q);
        for (int i = 0; i < 4; ++i) sum[i] += got[i];
    }}
    for (int i = 0; i < 4; ++i) v0[(blockIdx.z * {THREADS} + threadIdx.x) * 4 + i] = sum[i];
    tinyopt_cluster_sync();
}}
"""
)
"""Each block writes 4 values a thread to its dynamic shared memory, and sums the same 4 of
every other block of its cluster (1×1×4 clusters, grid z = 8) into global memory."""


def _kernel(source: str, name: str, grid: list[int], block: list[int]) -> tile.CudaKernelOp:
    return tile.CudaKernelOp(name, grid, block, 4096, source)


def _run(source: str, name: str, grid: list[int], block: list[int], buffers: list[np.ndarray]):
    kernel = emulated(_kernel(source, name, grid, block), buffers)
    return run_on_cpu(kernel, buffers, PRELUDE + SLEEP)


def _expected_sums() -> np.ndarray:
    z = np.arange(GRID_Z)[:, None, None]
    t = np.arange(THREADS)[None, :, None]
    i = np.arange(4)[None, None, :]
    values = (z * 1000 + t * 4 + i).astype(np.float64)  # [block z, thread, i]
    cluster = values.reshape(GRID_Z // CLUSTER, CLUSTER, THREADS, 4).sum(axis=1)
    return (np.repeat(cluster, CLUSTER, axis=0) - values).astype(np.float32)


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_cluster_sums_through_distributed_shared_memory():
    out = np.full((GRID_Z, THREADS, 4), np.nan, np.float32)
    (got,) = _run(REDUCE, "cluster_reduce", [1, 1, GRID_Z], [THREADS, 1, 1], [out])
    np.testing.assert_array_equal(got, _expected_sums())


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_without_the_cluster_barrier_the_sums_are_wrong():
    """The same kernel with `tinyopt_cluster_sync` doing nothing: rank 0 reads the other ranks'
    shared memory tens of ms before they write it, and finds the 0xFF fill (NaN), so the test
    above passes only because the barrier waits for the whole cluster."""
    source = REDUCE.replace("    tinyopt_cluster_sync();\n", "")
    assert source.count("tinyopt_cluster_sync()") == 1  # only the helper's definition is left
    out = np.full((GRID_Z, THREADS, 4), np.nan, np.float32)
    (got,) = _run(source, "cluster_reduce", [1, 1, GRID_Z], [THREADS, 1, 1], [out])
    assert np.isnan(got[::CLUSTER]).all()  # rank 0 of each cluster


RANKS = (
    HELPERS + 'extern "C" __global__ void __cluster_dims__(2, 2, 2) __launch_bounds__(64, 1) '
    "cluster_ranks(float* __restrict__ v0, float* __restrict__ v1) {\n"
    "    __shared__ float v2[64];\n"
    + SMEM
    + """    float (*v3)[4] = reinterpret_cast<float (*)[4]>(tinyopt_smem_base + 0);
    unsigned rank = blockIdx.x % 2 + blockIdx.y % 2 * 2 + blockIdx.z % 2 * 4;
    unsigned linear = blockIdx.x + 4 * (blockIdx.y + 2 * blockIdx.z);
    v2[threadIdx.x] = (float)linear;
    if (threadIdx.x == 0) {
        v3[0][0] = (float)blockIdx.x; v3[0][1] = (float)blockIdx.y;
        v3[0][2] = (float)blockIdx.z; v3[0][3] = (float)rank;
    }
    asm volatile("bar.sync %0, 64;" :: "r"((unsigned)1) : "memory");
    tinyopt_cluster_sync();
    if (threadIdx.x < 8) {
        float got[4];
        tinyopt_cluster_load_f32x4(got, &v3[0][0], threadIdx.x);
        for (int i = 0; i < 4; ++i) v0[(linear * 8 + threadIdx.x) * 4 + i] = got[i];
    }
    __syncthreads();
    v1[linear * 64 + threadIdx.x] = v2[(threadIdx.x + 1) % 64];
    tinyopt_cluster_sync();
}
"""
)
"""2×2×2 clusters on a 4×2×2 grid (2 clusters of 8 blocks): each block reads every rank's
(blockIdx, rank) from that rank's shared memory, and reads back a static `__shared__` array
that every block of the cluster writes at once (a block's own)."""


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_cluster_ranks_and_per_block_state():
    seen = np.full((16, 8, 4), np.nan, np.float32)
    own = np.full((16, 64), np.nan, np.float32)
    got, kept = _run(RANKS, "cluster_ranks", [4, 2, 2], [64, 1, 1], [seen, own])
    expected = np.empty_like(seen)
    for linear in range(16):
        x, y, z = linear % 4, linear // 4 % 2, linear // 8
        for rank in range(8):
            bx, by, bz = x - x % 2 + rank % 2, y - y % 2 + rank // 2 % 2, z - z % 2 + rank // 4
            expected[linear, rank] = [bx, by, bz, rank]
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(kept, np.repeat(np.arange(16, dtype=np.float32)[:, None], 64, 1))


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_a_failing_block_stops_its_cluster():
    """A load from a rank past the cluster aborts its block; the others, waiting at the cluster
    barrier for it, are stopped and the run fails rather than hangs."""
    source = REDUCE.replace(
        "tinyopt_cluster_load_f32x4(got, &v1[threadIdx.x][0], q)",
        "tinyopt_cluster_load_f32x4(got, &v1[threadIdx.x][0], q + 4 * (rank == 1))",
    )
    out = np.full((GRID_Z, THREADS, 4), np.nan, np.float32)
    with pytest.raises(subprocess.CalledProcessError):
        _run(source, "cluster_reduce", [1, 1, GRID_Z], [THREADS, 1, 1], [out])


PREFETCHING = (
    'extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(32, 1) '
    "cluster_prefetch(float* __restrict__ v0) {\n"
    "    if (threadIdx.x == 0) {\n"
    '        asm volatile("prefetch.global.L2 [%0];" :: "l"(v0 + 4 * blockIdx.x));\n'
    "    }\n"
    "    tinyopt_cluster_sync();\n"
    "    v0[4 * blockIdx.x + threadIdx.x % 4] = (float)blockIdx.x;\n"
    "}\n"
)
"""A prefetch by each block of 2×1×1 clusters, logged by block (run without the wgmma
emulation, which drops the prefetch's inline PTX), and a write of each block's index."""


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_cluster_blocks_log_their_prefetches(tmp_path):
    log = tmp_path / "prefetches.txt"
    out = np.zeros(16, np.float32)
    kernel = _kernel(PREFETCHING, "cluster_prefetch", [4, 1, 1], [32, 1, 1])
    (got,) = run_on_cpu(kernel, [out], prefetch_log=log)
    np.testing.assert_array_equal(got, np.repeat(np.arange(4, dtype=np.float32), 4))
    assert sorted(log.read_text().splitlines()) == [f"{b} 0 {16 * b}" for b in range(4)]
