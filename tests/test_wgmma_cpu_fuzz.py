"""A slice of tests/fuzz/wgmma_cpu_fuzz.py in CI: six random f16/bf16 GEMM programs under
random wgmma knobs (seed 181), run on the CPU emulation against float64, their plans taking
the 192-row blocks (one wave, and persistent), 128×192 blocks and the sector-staging copies
(one of a shared A), and no plan with fewer wgmma kernels than under `align=off`.
`python tests/fuzz/wgmma_cpu_fuzz.py -n 60 --seed N` runs more.
"""

from __future__ import annotations

import pytest
from cpu_cuda import COMPILER
from fuzz.wgmma_cpu_fuzz import run

SEED, COUNT = 181, 6


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_random_wgmma_gemms_match_float64_on_cpu() -> None:
    outcomes, exercised, failures = run(SEED, COUNT)
    assert not failures, "\n\n".join(failures)
    assert outcomes["ok"] == COUNT, outcomes
    # the generator's seed still reaches the planning paths it is here for
    assert {"tall", "tall_persistent", "128x192", "pad"} <= set(exercised), exercised
