"""The CPU emulation's threads (tests/cpu_cuda.h's fibers): a missing barrier gives wrong
numbers and a barrier no thread can pass is reported as a deadlock, not a hang."""

from __future__ import annotations

import signal
import subprocess

import numpy as np
import pytest
from cpu_cuda import COMPILER, run_on_cpu

from tinyopt.dialects import tile

THREADS, ROUNDS = 64, 4

NEIGHBOURS = f"""extern "C" __global__ void __launch_bounds__({THREADS}, 1) neighbours(
        float* __restrict__ v0) {{
    __shared__ float v1[{THREADS}];
    float sum = 0.0f;
    for (int r = 0; r < {ROUNDS}; ++r) {{
        v1[threadIdx.x] = (float)(r * {THREADS} + threadIdx.x);
        __syncthreads();
        sum += v1[(threadIdx.x + 1) % {THREADS}] + v1[(threadIdx.x + {THREADS} - 1) % {THREADS}];
        __syncthreads();
    }}
    v0[threadIdx.x] = sum;
}}
"""
"""Each thread writes its slot, then reads both neighbours' slots, four times."""


SHARED = "#define __shared__ static\n"
"""A block's static shared memory: one copy, as blocks run one after another."""


def _run(source: str, name: str) -> np.ndarray:
    kernel = tile.CudaKernelOp(name, [1, 1, 1], [THREADS, 1, 1], 0, source)
    (out,) = run_on_cpu(kernel, [np.full(THREADS, np.nan, np.float32)], SHARED)
    return out


def _expected() -> np.ndarray:
    t = np.arange(THREADS)
    rounds = np.arange(ROUNDS)[:, None] * THREADS
    right, left = (t + 1) % THREADS, (t - 1) % THREADS
    return (rounds + right + rounds + left).sum(axis=0).astype(np.float32)


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_neighbours_through_shared_memory() -> None:
    np.testing.assert_array_equal(_run(NEIGHBOURS, "neighbours"), _expected())


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize("dropped", [0, 1])
def test_a_missing_barrier_gives_wrong_sums(dropped: int) -> None:
    """Without the barrier between the writes and the reads (or between the reads and the next
    round's writes) a thread reads a neighbour's slot before or after the neighbour wrote it
    this round, in one of the two orders the rounds take."""
    barrier = "        __syncthreads();\n"
    parts = NEIGHBOURS.split(barrier)
    assert len(parts) == 3
    kept = [barrier if k != dropped else "" for k in range(2)]
    source = parts[0] + kept[0] + parts[1] + kept[1] + parts[2]
    assert source.count("__syncthreads") == 1
    assert not np.array_equal(_run(source, "neighbours"), _expected())


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_a_barrier_some_threads_skip_is_a_deadlock() -> None:
    source = NEIGHBOURS.replace(
        "        __syncthreads();\n        sum +=",
        "        if (threadIdx.x % 2) __syncthreads();\n        sum +=",
    )
    with pytest.raises(subprocess.CalledProcessError) as error:
        _run(source, "neighbours")
    assert error.value.returncode == -signal.SIGABRT  # cpu_cuda_run_block's deadlock report
