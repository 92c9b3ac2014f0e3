"""The split count `splitk=0` (auto) gives an f16/bf16 contraction on a small grid.

A tensor-core GEMM whose output tiles are fewer than the SMs runs in one partial wave, and its
time is one block's K loop: each K step waits on global loads the few blocks of an SM cannot
hide. Cutting K into `s` chunks (`split_k.py`) puts `s` times the blocks to work on `s` times
shorter loops, for a partial-sum workspace (written and read once) and one more launch (the
fold). The estimate, per power of two `s` up to `MOST`:

    time(s) = ⌈K / s / STEP_K⌉ · STEP_SECONDS                      (one block's K loop)
              + (s > 1) · (FOLD_SECONDS + 2 · 4 · s · batch · M · N / WORKSPACE_BYTES_PER_SECOND)

over the `s` whose blocks still fit one wave (`batch · ⌈M/64⌉ · ⌈N/64⌉ · s ≤ SMs`, 64×64
tiles: the small-grid tile of the mma.sync rule) and whose chunk keeps at least `MIN_STEPS`
K steps; the cheapest wins. Grids of at least one wave of such tiles, M ≤ 64 (the skinny and
GEMV rules, which split K themselves) and f32 (the CUDA-core rule's stream-K) are not split.
"""

from __future__ import annotations

from tinyopt.passes.tile.gemm.contraction_match import Contraction
from tinyopt.passes.tile.gemm.mma_sync import tensor_core_type
from tinyopt.passes.tile.gemm.skinny_match import MAX_ROWS
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.target import Target

TILE = 64
"""The output tile side the wave count assumes."""

STEP_K = 32
"""K per step of the mma.sync K loop (its `bk`)."""

STEP_SECONDS = 0.5e-6
"""One K step of a block on an SM with few blocks: the latency of its global loads, barely
hidden (an estimate; see benchmarks/RESULTS.md for the measured split counts)."""

FOLD_SECONDS = 3e-6
"""The fold kernel's launch, ramp-up and tail (an estimate)."""

WORKSPACE_BYTES_PER_SECOND = 3.0e12
"""The partial sums' f32 workspace, written by the partial kernel and read by the fold."""

MIN_STEPS = 4
"""The fewest K steps a chunk keeps (the register double-buffering needs a few to overlap)."""

MOST = 64
"""The largest split (the `splitk` knob's)."""


def auto_splits(c: Contraction, knobs: Knobs, target: Target) -> int:
    """The split count `splitk=0` gives contraction `c`: 1 where it is no small-grid f16/bf16
    GEMM or no split pays by the estimate."""
    if knobs.mma not in ("auto", "sync") or tensor_core_type(c) is None:
        return 1
    batch, m, n, k = c.extents
    if m <= MAX_ROWS:
        return 1
    tiles = batch * -(-m // TILE) * -(-n // TILE)
    best, best_time = 1, split_seconds(1, batch, m, n, k)
    s = 2
    while s <= MOST and tiles * s <= target.sms and k // s >= MIN_STEPS * STEP_K:
        time = split_seconds(s, batch, m, n, k)
        if time < best_time:
            best, best_time = s, time
        s *= 2
    return best


def split_seconds(s: int, batch: int, m: int, n: int, k: int) -> float:
    """The estimated time of the GEMM cut into `s` chunks of K (the formula above)."""
    loop = -(-k // (s * STEP_K)) * STEP_SECONDS
    if s == 1:
        return loop
    return loop + FOLD_SECONDS + 8 * s * batch * m * n / WORKSPACE_BYTES_PER_SECOND
