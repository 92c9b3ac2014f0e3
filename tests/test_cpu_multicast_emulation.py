"""TMA multicast across a thread-block cluster in the CPU emulation (tests/cpu_wgmma.py,
cpu_cuda.h): `tinyopt_tma_load_Rd_multicast` copies a box into every block of the cluster its
mask names and completes the box's bytes on the mbarrier at the same offset in each,
`tinyopt_mbarrier_arrive_cluster` arrives on another block's mbarrier, and a block waits for
the others' copies and arrivals until the whole cluster is stuck, which is then a deadlock
reported rather than a hang.

The kernels are written by hand in the printer's form: the device helpers before the kernel
(printed by backends/cuda/hopper.py, so the emulation drops them for its own), every buffer and
mbarrier in dynamic shared memory, the blocks 1024-byte aligned.
"""

from __future__ import annotations

import re
import subprocess
import time

import numpy as np
import pytest
from cpu_cuda import COMPILER, run_on_cpu
from cpu_wgmma import PRELUDE, WGMMA_COMMIT, emulated
from test_cpu_cluster_emulation import SMEM

from tinyopt.backends.cuda import hopper
from tinyopt.backends.cuda.printer import _STATEMENTS
from tinyopt.dialects import tile

pytestmark = pytest.mark.skipif(COMPILER is None, reason="g++ not found")

WGMMA_HELPER = r"""__device__ __forceinline__ void tinyopt_wgmma_m64n64k16_bf16_k(float (&d)[32], unsigned long long a, unsigned long long b) {
    asm volatile("{\n.reg .pred p;\n"
                 "setp.ne.b32 p, %34, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "%32, %33, p, 1, 1, 0, 0;\n}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
                 : "l"(a), "l"(b), "r"(1));
}"""  # noqa: E501
"""The printer's m64n64k16 bf16 wgmma helper (`hopper.wgmma_helper`), B K-major."""


def _helpers(*tma: str) -> str:
    """The printed prelude of a kernel using mbarriers, the cluster's ops, wgmma and the TMA
    loads `tma`."""
    return "\n".join(
        [
            "#include <cuda_bf16.h>",
            hopper.TENSOR_MAP_STRUCT,
            *hopper.mbarrier_helpers(),
            *hopper.cluster_mbarrier_helpers(),
            *hopper.cluster_helpers(),
            *tma,
            hopper.wgmma_desc_helper(),
            WGMMA_HELPER,
            "",
        ]
    )


SLEEP = r"""
#include <chrono>
#include <thread>
static inline void __nanosleep(unsigned ns) {
    std::this_thread::sleep_for(std::chrono::nanoseconds(ns));
}
"""
"""CUDA's `__nanosleep` for the one thread that calls it here: a block's threads are fibers of
one OS thread (cpu_cuda.h), so the whole block (its process, in a cluster) sleeps, while the
cluster's other blocks run on."""


def _run(
    source: str,
    name: str,
    grid: list[int],
    block: list[int],
    buffers: list[np.ndarray],
    maps: list[tile.TensorMapArg],
    prelude: str = "",
    timeout: float | None = None,
) -> list[np.ndarray]:
    kernel = tile.CudaKernelOp(name, grid, block, 64 * 1024, source)
    tile.set_tensor_maps(kernel, maps)
    kernel = emulated(kernel, buffers)
    return run_on_cpu(kernel, buffers, PRELUDE + SLEEP + prelude, timeout=timeout)


# (1) Each block of a cluster multicasts one box (8 rows of 32 floats, 128-byte swizzled) to
# the blocks its mask names, into slot `rank` of their shared memory.

ROWS, COLS, BOX_ROWS, BOX_COLS = 30, 40, 8, 32
BOX_BYTES = BOX_ROWS * BOX_COLS * 4
DELAY_NS = 15_000_000
"""Rank r issues its copy r·15 ms after the cluster barrier: the copies of the ranks before
it have landed in its shared memory, and completed their bytes on its mbarrier, before its
own expect_tx."""


def _box_at(cluster: int, rank: int, blocks: int) -> tuple[int, int]:
    """The (row, column) of the box of `rank` in `cluster` of `blocks` blocks, some partly or
    wholly outside the tensor (rows -4..3, 23..30, columns -8..23)."""
    return 9 * (cluster * blocks + rank) - 4, 16 * (rank % 2) - 8


def _multicast_kernel(dims: tuple[int, int], masks: list[int], rank: int, hint: bool) -> str:
    """A cluster of dims[0] × dims[1] blocks (a grid of two clusters along the longer side):
    each block's thread 0 inits the mbarrier (the fence, then the cluster barrier), expects
    the bytes of the boxes whose masks name it, copies its own box to the blocks of
    `masks[rank]`; then every thread waits and writes out every slot (unswizzled), the slots
    no copy reached too. The tensor map has `rank` 2 ([30, 40]) or 3 ([2, 30, 40], the
    cluster's batch); `hint`: the evict-first form."""
    cx, cy = dims
    blocks = cx * cy
    tma = hopper.tma_load_helper(rank, hint, multicast=True)
    name = hopper.tma_load_name(rank, hint, multicast=True)
    batch = ", cluster" if rank == 3 else ""
    masks_c = ", ".join(str(m) for m in masks)
    return (
        _helpers(tma) + f'extern "C" __global__ void __cluster_dims__({cx}, {cy}, 1) '
        "__launch_bounds__(64, 1) multicast_boxes(const __grid_constant__ CUtensorMap v0, "
        "float* __restrict__ v1) {\n"
        + SMEM
        + f"""    float (*v2)[{BOX_ROWS}][{BOX_COLS}] =
        reinterpret_cast<float (*)[{BOX_ROWS}][{BOX_COLS}]>(tinyopt_smem_base + 0);
    long long (*v3) = reinterpret_cast<long long (*)>(tinyopt_smem_base + {blocks * 1024});
    int block = (int)(blockIdx.x + blockIdx.y * {2 * cx if cx > 1 else 1});
    int rank = (int)(blockIdx.x % {cx} + blockIdx.y % {cy} * {cx});
    int cluster = block / {blocks};
    const unsigned short masks[{blocks}] = {{{masks_c}}};
    int sources = 0;
    for (int s = 0; s < {blocks}; ++s) sources += masks[s] >> rank & 1;
    if (threadIdx.x == 0) {{
        tinyopt_mbarrier_init(&v3[0], 1);
        tinyopt_fence_mbarrier_init();
    }}
    __syncthreads();
    tinyopt_cluster_sync();
    if (threadIdx.x == 0) {{
        __nanosleep(rank * {DELAY_NS}u);
        tinyopt_mbarrier_arrive_expect_tx(&v3[0], sources * {BOX_BYTES});
        int row = 9 * (cluster * {blocks} + rank) - 4, column = 16 * (rank % 2) - 8;
        {name}(&v2[rank][0][0], &v0, &v3[0], masks[rank], column, row{batch});
    }}
    tinyopt_mbarrier_wait(&v3[0], 0);
    for (int i = threadIdx.x; i < {blocks * BOX_ROWS * BOX_COLS}; i += 64) {{
        unsigned offset = 4 * i;
        unsigned swizzled = offset ^ (((offset >> 7) & 7) << 4);
        v1[block * {blocks * BOX_ROWS * BOX_COLS} + i] =
            *reinterpret_cast<float*>(tinyopt_smem_base + swizzled);
    }}
    tinyopt_cluster_sync();
}}
"""
    )


def _expected_boxes(tensor: np.ndarray, dims: tuple[int, int], masks: list[int]) -> np.ndarray:
    blocks = dims[0] * dims[1]
    out = np.full((2 * blocks, blocks, BOX_ROWS, BOX_COLS), np.nan, np.float32)
    for b in range(2 * blocks):
        cluster, rank = divmod(b, blocks)
        for s in range(blocks):
            if not masks[s] >> rank & 1:
                continue  # no copy reached slot s: the 0xFF fill (NaN)
            plane = tensor[cluster] if tensor.ndim == 3 else tensor
            row, column = _box_at(cluster, s, blocks)
            for i in range(BOX_ROWS):
                for j in range(BOX_COLS):
                    r, c = row + i, column + j
                    inside = 0 <= r < ROWS and 0 <= c < COLS
                    out[b, s, i, j] = plane[r, c] if inside else 0.0
    return out


MULTICASTS = [
    # (id, cluster dims, masks by rank, tensor rank, evict-first)
    ("both_1x2", (1, 2), [0b11, 0b11], 2, False),
    ("to_the_other_only_2x1", (2, 1), [0b10, 0b01], 3, True),
    ("rank0_to_both_rank1_to_itself", (1, 2), [0b11, 0b10], 2, True),
    ("four_blocks", (1, 4), [0b1111, 0b0101, 0b1000, 0b0010], 3, False),
]


def _run_multicast(
    source: str, dims: tuple[int, int], rank: int, timeout: float | None = None
) -> tuple[np.ndarray, ...]:
    blocks = dims[0] * dims[1]
    shape = (2, ROWS, COLS) if rank == 3 else (ROWS, COLS)
    tensor = (np.arange(np.prod(shape), dtype=np.float32) + 1).reshape(shape)
    out = np.full((2 * blocks, blocks, BOX_ROWS, BOX_COLS), -1.0, np.float32)
    grid = [2 * dims[0], dims[1], 1] if dims[0] > 1 else [1, 2 * dims[1], 1]
    box = (1, BOX_ROWS, BOX_COLS) if rank == 3 else (BOX_ROWS, BOX_COLS)
    (_, got) = _run(
        source,
        "multicast_boxes",
        grid,
        [64, 1, 1],
        [tensor, out],
        [tile.TensorMapArg(0, box, 128)],
        timeout=timeout,
    )
    return tensor, got


@pytest.mark.parametrize(
    ("dims", "masks", "rank", "hint"), [c[1:] for c in MULTICASTS], ids=[c[0] for c in MULTICASTS]
)
def test_multicast_boxes_land_in_every_named_block(
    dims: tuple[int, int], masks: list[int], rank: int, hint: bool
) -> None:
    """Each block reads back the boxes of the ranks whose masks name it (zeros where the box
    lies outside the tensor, the 128-byte swizzle undone) and the 0xFF fill in the slots of
    the others, the issuing block's own included where its mask leaves it out."""
    tensor, got = _run_multicast(_multicast_kernel(dims, masks, rank, hint), dims, rank)
    np.testing.assert_array_equal(got, _expected_boxes(tensor, dims, masks))


# (2) A two-slot ring over K: each block of a 2-block cluster computes its 64 rows of
# A · Bᵀ for the cluster's 64 rows of B, loading its own A tile and half of the shared B tile,
# multicast into both blocks, as the multicast wgmma GEMM does.

STEPS = 6
"""K = 6 · 64: each of the two slots filled three times."""
SLOW_NS, LATE_NS = 20_000_000, 5_000_000
"""In rank 0, the consumer warpgroup's second thread sleeps 20 ms before its wgmmas of each
step: time for the other block's producer to overwrite the slot, were it released early. And
rank 0's producer sleeps 5 ms before it fills a slot, so that its own copies, not the other
block's, complete the slot's phase (the consumers then pass their wait in the round in which
the first of them releases the slot first, cpu_cuda.h's rounds going both ways by turns)."""


def _ring_kernel(dims: tuple[int, int]) -> str:
    """256 threads: warpgroup 0's thread 0 produces (waits for the slot's release by both
    blocks' consumers, expects 16 KB, loads the block's A tile and its half of B, multicast to
    both), warpgroup 1 consumes (waits for the slot, 4 wgmmas, commit, wait_group, then its
    first thread releases the slot in both blocks, one arrival each)."""
    cx, cy = dims
    linear = "blockIdx.x" if cx > 1 else "blockIdx.y"
    return (
        _helpers(hopper.tma_load_helper(2), hopper.tma_load_helper(2, multicast=True))
        + f'extern "C" __global__ void __cluster_dims__({cx}, {cy}, 1) '
        "__launch_bounds__(256, 1) multicast_ring(const __grid_constant__ CUtensorMap v0, "
        "const __grid_constant__ CUtensorMap v1, float* __restrict__ v2) {\n"
        + SMEM
        + f"""    __nv_bfloat16 (*v3)[64][64] =
        reinterpret_cast<__nv_bfloat16 (*)[64][64]>(tinyopt_smem_base + 0);
    __nv_bfloat16 (*v4)[64][64] =
        reinterpret_cast<__nv_bfloat16 (*)[64][64]>(tinyopt_smem_base + 16384);
    long long (*v5) = reinterpret_cast<long long (*)>(tinyopt_smem_base + 32768);
    long long (*v6) = reinterpret_cast<long long (*)>(tinyopt_smem_base + 33792);
    int v7 = (int)threadIdx.x;
    int v8 = (int){linear};
    int v9 = v8 % 2;
    int v10 = v8 / 2;
    if (v7 == 0) {{
        for (int s = 0; s < 2; ++s) {{
            tinyopt_mbarrier_init(&v5[s], 1);
            tinyopt_mbarrier_init(&v6[s], 2);
        }}
        tinyopt_fence_mbarrier_init();
    }}
    __syncthreads();
    tinyopt_cluster_sync();
    if (v7 / 128 == 0) {{
        if (v7 == 0) {{
            for (int i = 0; i < {STEPS}; ++i) {{
                int s = i % 2;
                tinyopt_mbarrier_wait(&v6[s], (i / 2 + 1) % 2);
                if (v9 == 0) __nanosleep({LATE_NS}u);
                tinyopt_mbarrier_arrive_expect_tx(&v5[s], 16384);
                tinyopt_tma_load_2d(&v3[s][0][0], &v0, &v5[s], i * 64, v8 * 64);
                tinyopt_tma_load_2d_multicast(&v4[s][32 * v9][0], &v1, &v5[s], 3, i * 64,
                                              v10 * 64 + 32 * v9);
            }}
        }}
    }} else {{
        int w = v7 - 128;
        float d[32];
        for (int j = 0; j < 32; ++j) d[j] = 0.0f;
        for (int i = 0; i < {STEPS}; ++i) {{
            int s = i % 2;
            tinyopt_mbarrier_wait(&v5[s], (i / 2) % 2);
            if (v9 == 0 && w == 1) __nanosleep({SLOW_NS}u);
            asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
            for (int k = 0; k < 4; ++k)
                tinyopt_wgmma_m64n64k16_bf16_k(d, tinyopt_wgmma_desc(&v3[s][0][16 * k], 16, 1024),
                                               tinyopt_wgmma_desc(&v4[s][0][16 * k], 16, 1024));
            asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
            asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
            if (w == 0) {{
                tinyopt_mbarrier_arrive_cluster(&v6[s], 0);
                tinyopt_mbarrier_arrive_cluster(&v6[s], 1);
            }}
        }}
        int warp = w / 32, lane = w % 32;
        for (int j = 0; j < 32; ++j) {{
            int row = 16 * warp + lane / 4 + 8 * (j / 2 % 2);
            int column = 8 * (j / 4) + 2 * (lane % 4) + j % 2;
            v2[(v8 * 64 + row) * 64 + column] = d[j];
        }}
    }}
    tinyopt_cluster_sync();
}}
"""
    )


CLUSTERS = 2


def _bf16(x: np.ndarray) -> np.ndarray:
    """Small integers as bf16 bits (exact)."""
    return (x.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def _run_ring(source: str, dims: tuple[int, int], prelude: str = "") -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(7)
    blocks = 2 * CLUSTERS
    a = rng.integers(-2, 3, (64 * blocks, 64 * STEPS))
    b = rng.integers(-2, 3, (64 * CLUSTERS, 64 * STEPS))
    out = np.full((64 * blocks, 64), np.nan, np.float32)
    grid = [blocks, 1, 1] if dims[0] > 1 else [1, blocks, 1]
    maps = [tile.TensorMapArg(0, (64, 64), 128), tile.TensorMapArg(1, (32, 64), 128)]
    (_, _, got) = _run(
        source, "multicast_ring", grid, [256, 1, 1], [_bf16(a), _bf16(b), out], maps, prelude
    )
    expected = np.concatenate(
        [a[128 * q : 128 * (q + 1)] @ b[64 * q : 64 * (q + 1)].T for q in range(CLUSTERS)]
    )
    return got, expected.astype(np.float32)


@pytest.mark.parametrize("dims", [(1, 2), (2, 1)], ids=["1x2", "2x1"])
def test_a_ring_of_multicast_slots_released_across_the_cluster(dims: tuple[int, int]) -> None:
    """Each slot is refilled (by both producers, the B halves multicast) only after both
    blocks' consumers released it, one arrival each from one thread after wait_group: every
    product is exact (small integers)."""
    got, expected = _run_ring(_ring_kernel(dims), dims)
    np.testing.assert_array_equal(got, expected)


def test_a_slot_released_before_the_warpgroup_issued_its_wgmma_is_overwritten() -> None:
    """The same ring with the warpgroup's commit no barrier: the releasing thread gets past
    its wait_group before the (sleeping) second thread issued its wgmmas, the other block
    refills the slot meanwhile, and rank 0's products come out wrong. So the test above
    passes only because `wgmma.commit_group` holds the warpgroup's threads together."""
    source = _ring_kernel((1, 2))
    assert WGMMA_COMMIT in source  # `emulated` makes it cpu_wgmma_commit(), defined away here
    got, expected = _run_ring(source, (1, 2), "#define cpu_wgmma_commit()\n")
    rank0 = np.arange(64 * 2 * CLUSTERS) // 64 % 2 == 0
    assert not np.array_equal(got[rank0], expected[rank0])


def test_the_printed_commit_is_the_one_emulated() -> None:
    """`cpu_wgmma.emulated` finds the printer's `wgmma.commit_group` statement."""
    assert _STATEMENTS[tile.WgmmaCommitOp] == WGMMA_COMMIT


# (3) A wait that no block of the cluster can end fails the run with a report, not a hang.

EXPECT = f"tinyopt_mbarrier_arrive_expect_tx(&v3[0], sources * {BOX_BYTES});"
FINAL_SYNC = "    tinyopt_cluster_sync();\n}\n"
STUCK = "every other block of the cluster waits too or has finished"
TIMEOUT = "nothing changed in the cluster for the timeout (CPU_CUDA_CLUSTER_TIMEOUT seconds)"


@pytest.mark.parametrize(
    ("other", "why"),
    [("waits", STUCK), ("finished", STUCK), ("spins", TIMEOUT)],
    ids=["other_waits", "other_finished", "other_spins"],
)
def test_a_wait_no_block_of_the_cluster_ends_is_a_deadlock(
    other: str, why: str, capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rank 0 expects the bytes of one box more than the cluster copies to it. Rank 1 then
    waits at the cluster barrier for it (`waits`), or has returned (`finished`): the deadlock
    is found as soon as both blocks have no thread to run. Or rank 1 spins on a flag outside
    the emulation's waits (`spins`), which the emulation cannot tell from work: the run fails
    after CPU_CUDA_CLUSTER_TIMEOUT seconds without a change in the cluster."""
    source = _multicast_kernel((1, 2), [0b11, 0b11], 2, False)
    assert EXPECT in source and source.endswith(FINAL_SYNC)
    source = source.replace(EXPECT, EXPECT.replace("sources", "(sources + (rank == 0))"))
    if other == "finished":
        source = source[: -len(FINAL_SYNC)] + "}\n"
    elif other == "spins":
        spin = "    if (rank == 1) while (*(volatile float*)&v1[0] != 1.0f) __nanosleep(1000000);\n"
        source = source[: -len(FINAL_SYNC)] + spin + FINAL_SYNC
    # the timeout: long past the second a found deadlock takes, but for the spinning block's
    monkeypatch.setenv("CPU_CUDA_CLUSTER_TIMEOUT", "1" if other == "spins" else "60")
    start = time.monotonic()
    with pytest.raises(subprocess.CalledProcessError):
        _run_multicast(source, (1, 2), 2, timeout=120)
    assert time.monotonic() - start < 40  # g++ included
    err = capfd.readouterr().err
    # either block may find the deadlock first where both wait; its parent then stops the other
    found = re.search(
        r"deadlock: block \(0, (\d), 0\), rank (\d) of its cluster, has 64 threads "
        r"waiting and none can go on; (.*)",
        err,
    )
    assert found and found[1] == found[2] and found[3] == why, err
    assert found[1] == "0" or other == "waits", err
