"""The split count `splitk=0` (auto) gives an f16/bf16 contraction on a small grid.

A tensor-core GEMM whose output tiles are fewer than the SMs runs in one partial wave, and its
time is one block's K loop: each K step waits on global loads the few blocks of an SM cannot
hide. Cutting K into `s` chunks (`split_k.py`) puts `s` times the blocks to work on `s` times
shorter loops, for a partial-sum workspace (written and read once) and one more launch (the
fold). The estimate, per power of two `s` up to `MOST` whose chunk keeps `MIN_STEPS` K steps:

    time(s) = waves(s) · ⌈K / s / STEP_K⌉ · STEP_SECONDS
              + (s > 1) · (FOLD_SECONDS + 8 · s · batch · M · N / WORKSPACE_BYTES_PER_SECOND)
    waves(s) = ⌈batch · ⌈M/64⌉ · ⌈N/64⌉ · s / (RESIDENT · SMs)⌉

(64×64 tiles, the small-grid tile of the mma.sync rule), over the `s` that keep the partial
kernel on that rule's small-grid tiles (fewer 128×128 tiles than SMs: past that the rule takes
128×128 blocks, and a split of 8 at 189×1344×6356 ran 2.2 times slower than a split of 4);
the cheapest wins if it is estimated `MARGIN` of the unsplit time or less. Only kernels the
mma.sync rule takes are split (the planner checks): M ≤ 64 belongs to the skinny and GEMV
rules, which split K themselves, f32 to the CUDA-core rule's stream-K, and a kernel on wgmma
(or staged for it) keeps its plan.
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

STEP_SECONDS = 0.7e-6
"""One K step of a block on an SM with few blocks: the latency of its global loads, barely
hidden (H200, 2026-12-03, benchmarks/bench_small_grids.py: 0.67-0.8 µs a step unsplit)."""

RESIDENT = 4
"""Blocks of a 64×64 tile an SM runs at the latency-bound step time before they contend."""

FOLD_SECONDS = 5e-6
"""The fold kernel's launch, ramp-up and tail, and the partial kernel's heavier index math (an
estimate: a split of 4 at 114×733×767 measured 15.1 µs where 6 steps would take 4.2)."""

WORKSPACE_BYTES_PER_SECOND = 3.0e12
"""The partial sums' f32 workspace, written by the partial kernel and read by the fold."""

MIN_STEPS = 3
"""The fewest K steps a chunk keeps (the register double-buffering needs a few to overlap; at
120×81×1955 a split of 16, 3.8 steps a chunk, ran 1.36 times faster than a split of 8)."""

MARGIN = 0.8
"""How much faster a split must be estimated to be taken (the estimate is rough: the fold's
time is a guess)."""

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
    if tiles >= target.sms:
        return 1
    best, best_time = 1, MARGIN * split_seconds(1, tiles, batch, m, n, k, target)
    large_tiles = batch * -(-m // (2 * TILE)) * -(-n // (2 * TILE))
    s = 2
    while s <= MOST and k // s >= MIN_STEPS * STEP_K and large_tiles * s < target.sms:
        time = split_seconds(s, tiles, batch, m, n, k, target)
        if time < best_time:
            best, best_time = s, time
        s *= 2
    return best


def split_seconds(s: int, tiles: int, batch: int, m: int, n: int, k: int, target: Target) -> float:
    """The estimated time of the GEMM cut into `s` chunks of K (the formula above)."""
    waves = -(-tiles * s // (RESIDENT * target.sms))
    loop = waves * -(-k // (s * STEP_K)) * STEP_SECONDS
    if s == 1:
        return loop
    return loop + FOLD_SECONDS + 8 * s * batch * m * n / WORKSPACE_BYTES_PER_SECOND
