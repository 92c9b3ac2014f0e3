"""A slice of tests/fuzz/wgmma_cpu_fuzz.py in CI: six random f16/bf16 GEMM programs under
random wgmma knobs (seed 181), run on the CPU emulation against float64, their plans taking
the 192-row blocks (one wave, and persistent), 128×192 blocks and the sector-staging copies
(one of a shared A), and no plan with fewer wgmma kernels than under `align=off`; and four of
its `--multicast` cases (seed MULTICAST_SEED): blocks paired by TMA multicast of B and of A,
one wave and persistent, odd rows or columns of tiles, persistent pairs walking several pairs
of tiles, FP8 with block scales, `multicast=auto` pairing a linear off sectors; and four of its
`--ragged` cases (seed RAGGED_SEED): block widths off 64-column chunks, N-major B on persistent
blocks, 192-row blocks sharing A by multicast, a K-major B with a bias, blocks run last to first;
and five of its `--tma-store` cases (seed TMA_STORE_SEED): the TMA-store epilogue on persistent
128×256, 192×192 and 64-row blocks, 128×192 blocks, and without a producer warpgroup, blocks run
last to first.
`python tests/fuzz/wgmma_cpu_fuzz.py -n 60 --seed N [--multicast | --ragged | --tma-store]`
runs more.
"""

from __future__ import annotations

import pytest
from cpu_cuda import COMPILER
from fuzz.wgmma_cpu_fuzz import run

SEED, COUNT = 181, 6
MULTICAST_SEED, MULTICAST_COUNT = 125, 4
RAGGED_SEED, RAGGED_COUNT = 4021, 4
TMA_STORE_SEED, TMA_STORE_COUNT = 4721, 5


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_random_wgmma_gemms_match_float64_on_cpu() -> None:
    outcomes, exercised, failures = run(SEED, COUNT)
    assert not failures, "\n\n".join(failures)
    assert outcomes["ok"] == COUNT, outcomes
    # the generator's seed still reaches the planning paths it is here for
    assert {"tall", "tall_persistent", "128x192", "pad"} <= set(exercised), exercised


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_random_multicast_wgmma_gemms_match_float64_on_cpu() -> None:
    outcomes, _, failures = run(MULTICAST_SEED, MULTICAST_COUNT, multicast=True)
    assert not failures, "\n\n".join(failures)
    assert outcomes["ok"] == MULTICAST_COUNT, outcomes
    # every case multicasts: A and B, one wave and persistent, odd rows or columns of tiles,
    # persistent pairs walking several pairs of tiles, and the automatic rule pairing one
    kernels = {key for key, count in outcomes.items() if count and key.startswith("kernels")}
    assert {"kernels a one tile", "kernels a persistent", "kernels b persistent"} <= kernels
    assert outcomes["no multicast"] == 0, outcomes
    assert outcomes["odd a"] and outcomes["odd b"] and outcomes["walks a"], outcomes
    assert outcomes["auto cases paired"] == 1, outcomes


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_random_ragged_width_wgmma_gemms_match_float64_on_cpu() -> None:
    outcomes, exercised, failures = run(RAGGED_SEED, RAGGED_COUNT, ragged=True)
    assert not failures, "\n\n".join(failures)
    assert outcomes["ok"] == RAGGED_COUNT, outcomes
    assert exercised["ragged"] == RAGGED_COUNT, exercised
    assert exercised["multicast_a"] and exercised["tall_persistent"], exercised


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_random_tma_store_wgmma_gemms_match_float64_on_cpu() -> None:
    outcomes, exercised, failures = run(TMA_STORE_SEED, TMA_STORE_COUNT, tma_store=True)
    assert not failures, "\n\n".join(failures)
    assert outcomes["ok"] == TMA_STORE_COUNT, outcomes
    assert {"tall_persistent", "128x192"} <= set(exercised), exercised
