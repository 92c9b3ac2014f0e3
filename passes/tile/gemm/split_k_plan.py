"""The split count `splitk=0` (auto) gives an f16/bf16 contraction on a small grid.

A tensor-core GEMM whose output tiles are fewer than the SMs runs in one partial wave, and its
time is one block's K loop: each K step waits on global loads the few blocks of an SM cannot
hide. Cutting K into `s` chunks (`split_k.py`) puts `s` times the blocks to work on `s` times
shorter loops, for a partial-sum workspace (written and read once) and one more launch (the
fold). The estimate, per power of two `s` up to `MOST` whose chunk keeps `MIN_STEPS` K steps:

    time(s) = waves(s) · ⌈K / s / 32⌉ · step(s)           (32: the mma.sync rule's bk)
              + (s > 1) · (FOLD_SECONDS + 8 · s · batch · M · N / WORKSPACE_BYTES_PER_SECOND)
    waves(s) = ⌈batch · ⌈M/64⌉ · ⌈N/64⌉ · s / (RESIDENT · SMs)⌉
    step(s) = STEP_SECONDS on the rule's 32×32 small-grid tiles (while its 64×64 tiles are
              fewer than the SMs), STEP_SECONDS_64 on 64×64 ones

(64×64 tiles, the small-grid tile of the mma.sync rule), over the `s` that keep the partial
kernel on that rule's small-grid tiles (fewer 128×128 tiles than SMs: past that the rule takes
128×128 blocks, and a split of 8 at 189×1344×6356 ran 2.2 times slower than a split of 4);
the cheapest wins if it is estimated `MARGIN` of the unsplit time or less. That is for the
kernels the mma.sync rule takes (the planner checks which rule does), at M > 64 (M ≤ 64 belongs
to the skinny and GEMV rules, which split K themselves). A kernel the wgmma rule takes gets
`auto_wgmma_splits` (its own step time; chunks whole TMA boxes that divide K), and under
`splitk_mode=auto` the split over a thread-block cluster where its clusters fit one wave and
its estimate, with no fold, is the cheaper (`cluster_split_estimate`). f32 is left to the
CUDA-core rule's stream-K, and a GEMM staged for wgmma (`wgmma_staged.py`) is not split.
"""

from __future__ import annotations

from collections.abc import Iterator

from tinyopt.passes.tile.gemm.contraction_match import Contraction, operand_types
from tinyopt.passes.tile.gemm.mma_sync import BK as SYNC_BK
from tinyopt.passes.tile.gemm.mma_sync import sums_products, tensor_core_type
from tinyopt.passes.tile.gemm.skinny_match import MAX_ROWS
from tinyopt.passes.tile.gemm.split_k import chunk_elements, row_elements
from tinyopt.passes.tile.gemm.wgmma_plan import BK as WGMMA_BK
from tinyopt.passes.tile.gemm.wgmma_plan import CLUSTER_SPLITS
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.target import Target

TILE = 64
"""The output tile side the wave count assumes."""

STEP_SECONDS = 0.7e-6
"""One K step of a block on an SM with few blocks: the latency of its global loads, barely
hidden (H200, 2026-12-03, benchmarks/bench_small_grids.py: 0.67-0.8 µs a step unsplit)."""

STEP_SECONDS_64 = 1.1e-6
"""The same on 64×64 tiles, each thread copying four times the elements a step: measured 1.1
to 2.5 µs a step for splits on them (ninth session, runs 3-5: 189×1344×6356, 1053×439×7301,
1260×110×3367, 1054×72×2014). 1.1 µs, the fastest, is the value under which the estimate picks
the fastest measured split of each of those shapes and of 1606×86×1925 (run 5: 1.5 µs picked a
split of 2 on 32×32 tiles at 189×1344×6356, 0.27× cuBLAS, where 4 on 64×64 tiles ran 0.58×);
1053×439×7301 stays unsplit (a split of 2 on 64×64 tiles ran 1.55 times slower)."""

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

WGMMA_STEP_SECONDS = 0.22e-6
"""One K step of a wgmma block on a grid of fewer blocks than SMs (H200, 2026-12-03, ninth
session run 3: 256×256×8192, 128×1024×8192 and 384×128×16384 at 0.20-0.23 µs a step)."""

MIN_WGMMA_STEPS = 4
"""The fewest K steps a wgmma chunk keeps (its ring of TMA slots fills over the first few)."""

MOST = 64
"""The largest split (the `splitk` knob's)."""


def small_grid(c: Contraction, knobs: Knobs, target: Target) -> bool:
    """Whether a split could pay: an f16/bf16 contraction on tensor cores, or an f32 one the
    3xTF32 rule may take, whose output, in the largest blocks (128×256), leaves SMs idle."""
    on_3xtf32 = knobs.mma in ("auto", "3xtf32") and operand_types(c) == ["f32"] and sums_products(c)
    on_16_bit = knobs.mma in ("auto", "sync", "wgmma") and tensor_core_type(c) is not None
    if not (on_3xtf32 or on_16_bit):
        return False
    batch, m, n, _ = c.extents
    return batch * -(-m // 128) * -(-n // 256) < target.sms


def auto_splits(c: Contraction, target: Target) -> int:
    """The split count `splitk=0` gives a `small_grid` contraction `c` on the mma.sync rule:
    1 where M ≤ 64, its tiles fill the SMs or no split pays by the estimate."""
    batch, m, n, k = c.extents
    if m <= MAX_ROWS:
        return 1
    tiles = batch * -(-m // TILE) * -(-n // TILE)
    if tiles >= target.sms:
        return 1
    best, best_time = 1, MARGIN * split_seconds(1, tiles, batch, m, n, k, target)
    large_tiles = batch * -(-m // (2 * TILE)) * -(-n // (2 * TILE))
    s = 2
    while s <= MOST and k // s >= MIN_STEPS * SYNC_BK and large_tiles * s < target.sms:
        time = split_seconds(s, tiles, batch, m, n, k, target)
        if time < best_time:
            best, best_time = s, time
        s *= 2
    return best


def sync_seconds(c: Contraction, target: Target) -> float:
    """The estimate above of contraction `c` on the mma.sync rule, split as `auto_splits` would
    (its K steps' latency and the fold; not its FLOPs)."""
    batch, m, n, k = c.extents
    tiles = batch * -(-m // TILE) * -(-n // TILE)
    return split_seconds(auto_splits(c, target), tiles, batch, m, n, k, target)


SPLIT_TF32_STEP_SECONDS = 6 * WGMMA_STEP_SECONDS
"""A 64-wide K step of the 3xTF32 rule (`wgmma_3xtf32.py`): two 32-wide steps of 12 TF32
wgmmas each where a 16-bit step issues 4 of twice the width, at half the rate per element,
plus the split (an estimate, not measured)."""


def auto_wgmma_splits(
    c: Contraction, bm: int, columns: int, target: Target, step: float = WGMMA_STEP_SECONDS
) -> int:
    """The split count `splitk=0` gives contraction `c` on the wgmma rule's bm×`columns`
    blocks (its plan): where they are fewer than the SMs, the power of two `s` whose estimate

        chunk / 64 · WGMMA_STEP_SECONDS + (s > 1) · (fold and workspace, as above)

    is cheapest (and `MARGIN` of the unsplit one or less), over the `s` whose blocks fit one
    wave of one block per SM and whose chunks are whole multiples of 64 (the wgmma rule reads K
    in 64-element TMA boxes: `split_k.chunk_elements`, the last chunk reaching past K where
    they do not divide it) with `MIN_WGMMA_STEPS` steps or more, none of them empty. Any M: at
    M ≤ 64 a kernel the wgmma rule takes is its to split. `step`: the time of a 64-wide K step
    (the 3xTF32 rule's is `SPLIT_TF32_STEP_SECONDS`). Chunks reaching past K (before,
    only splits dividing K were taken) measured on an H100 (benchmarks/RESULTS.md,
    twenty-seventh session run 3): 21 bf16 linears whose K the former rule cut less far or not
    at all, 17-384 rows, 1.10-3.40× as fast (0.28-0.85× cuBLAS → 0.76-1.03×); 6 f32 ones of
    33-64 rows, newly on 3xTF32, 1.13-3.78×."""
    return wgmma_split_estimate(c, bm, columns, target, step)[0]


def wgmma_split_estimate(
    c: Contraction, bm: int, columns: int, target: Target, step: float = WGMMA_STEP_SECONDS
) -> tuple[int, float]:
    """`auto_wgmma_splits`'s split and its estimated time (`MARGIN` of the unsplit time where
    it is 1)."""
    batch, m, n, k = c.extents
    blocks = batch * -(-m // bm) * -(-n // columns)
    best, best_time = 1, MARGIN * -(-k // WGMMA_BK) * step
    for s, chunk in wgmma_splits(c, blocks, target):
        time = chunk // WGMMA_BK * step + fold_seconds(s, batch, m, n)
        if time < best_time:
            best, best_time = s, time
    return best, best_time


CLUSTER_SUM_SECONDS = 3.5e-6
"""What a cluster split adds to its blocks' K loops (the cluster launch, two cluster barriers,
each block's share of the others' partial tiles read through distributed shared memory), in
the terms of the two-pass estimate (`fold_seconds`, `WGMMA_STEP_SECONDS`). Fitted on an H100
(2026-12-06, benchmarks/RESULTS.md thirty-sixth session run 2, 32 small-grid bf16 linears
under both splits): the k/v linear at 64 rows ran faster over 16 clusters of 4 (16 steps each)
than in two passes of 8 chunks (8 steps), 12.5 against 13.2 µs, which the estimate says for a
value below 4.6 µs; 128×1024×4096 ran slower over 32 clusters of 2 (32 steps) than in two
passes of 4 (16 steps), 15.0 against 13.6, which it says above 2.9 µs. At equal chunks the
cluster saved 1-2 µs (17×3872×11864 47.5 against 49.8, 48×2944×14256 45.5 against 47.2)."""


def cluster_split_estimate(
    c: Contraction, bm: int, columns: int, target: Target, step: float = WGMMA_STEP_SECONDS
) -> tuple[int, float]:
    """The split over a cluster of blocks (`splitk_mode=cluster`, `wgmma_cluster.py`) `splitk=0`
    weighs against the two-pass one, and its estimated time: of the splits `wgmma_splits`
    allows, 2, 4 or 8, those whose clusters all run in one wave at one block an SM
    (`Target.cluster_slots`: a cluster spilling into a second wave doubled its time, H100,
    benchmarks/RESULTS.md thirty-first session), at `chunk / 64 · step + CLUSTER_SUM_SECONDS`;
    (1, inf) where none does."""
    batch, m, n, _ = c.extents
    tiles = batch * -(-m // bm) * -(-n // columns)
    best, best_time = 1, float("inf")
    for s, chunk in wgmma_splits(c, tiles, target):
        if s > CLUSTER_SPLITS[-1] or tiles > target.cluster_slots(s):
            continue
        time = chunk // WGMMA_BK * step + CLUSTER_SUM_SECONDS
        if time < best_time:
            best, best_time = s, time
    return best, best_time


def wgmma_splits(c: Contraction, blocks: int, target: Target) -> Iterator[tuple[int, int]]:
    """The splits s > 1 of contraction `c` a grid of `blocks` wgmma blocks may take, with their
    chunks of K: powers of two up to `MOST` whose blocks fit one wave of one block an SM, each
    chunk whole 64-element boxes (`split_k.chunk_elements`) of `MIN_WGMMA_STEPS` steps or more."""
    s = 2
    while s <= MOST and blocks * s <= target.sms:
        chunk = chunk_elements(c.extents[3], s, row_elements(c))
        if chunk % WGMMA_BK or chunk // WGMMA_BK < MIN_WGMMA_STEPS:
            return
        yield s, chunk
        s *= 2


L2_BYTES_PER_SECOND = 5.0e12
"""What a grid of wgmma blocks streams from L2 (their A and B tiles, re-read by every block of
a row or column), fitted on an H100 (benchmarks/RESULTS.md, twenty-eighth session run 4): 64×64
blocks on 72-128 SMs took 0.25-0.40 µs a K step, 16 KiB a step each, and 128×128 blocks split
four ways 0.6-1.0 µs, 32 KiB a step each."""

SQUARE_STEP_SECONDS = 2 * WGMMA_STEP_SECONDS
"""A K step of a 128×128 block on a small grid: four times a 64×64 block's products in about
twice its time (same run: 0.45-0.5 µs a step unsplit or split in two)."""

SQUARE_MARGIN = 0.85
"""How much cheaper 128×128 blocks split over K must be estimated than 64×64 ones for the
small grid to take them (`square_split`)."""

SQUARE_MIN_STEPS = 72
"""The fewest K steps (of 64) a GEMM takes 128×128 blocks split over K for its small grid
with: below, the fold's fixed cost is not paid back (H100, twenty-eighth session run 5:
128×4096×4096, 64 steps, ran 1.00 → 0.86× cuBLAS; 1000×480×4792, 75 steps, 0.70 → 0.74)."""


def small_grid_seconds(c: Contraction, bm: int, bn: int, s: int, step: float) -> float:
    """The estimated time of contraction `c` on bm×bn wgmma blocks with K cut into `s` chunks,
    one wave of one block an SM: its K steps at `step` each or its tiles' bytes through L2,
    whichever takes longer (each block reads bm + bn rows of 128 bytes a step), plus the fold.
    Measured against, same run (H100): 512×520×15608 60.7 µs on 64×64 blocks (61 estimated),
    43.3 split in four on 128×128 (38); 1000×472×6728 41.5 (40) and 32.2 (30); 1000×480×4792
    30.3 (29) and 26.0 (24)."""
    batch, m, n, k = c.extents
    blocks = batch * -(-m // bm) * -(-n // bn) * s
    steps = -(-chunk_elements(k, s, row_elements(c)) // WGMMA_BK)
    through_l2 = blocks * steps * (bm + bn) * 128 / L2_BYTES_PER_SECOND
    fold = fold_seconds(s, batch, m, n) if s > 1 else 0.0
    return max(steps * step, through_l2) + fold


def square_split(c: Contraction, target: Target) -> int:
    """Where a small grid of more than `MAX_ROWS` rows takes 64×64 wgmma blocks that cannot be
    split over K within one wave (twice their count is more than the SMs) and K holds
    `SQUARE_MIN_STEPS` steps or more, the split of K over 128×128 blocks that fills the SMs if
    it is estimated `SQUARE_MARGIN` of the cheapest 64×64 split or less (`small_grid_seconds`),
    else 1. Those 64×64 blocks run all of K unsplit, their steps short of products for the
    bytes they read: the grid runs at L2's pace, where 128×128 blocks read half the bytes for
    their products and the split fills the SMs. Measured on an H100, old plan against new in one
    run (benchmarks/RESULTS.md, twenty-eighth session run 5), × cuBLAS: 80×4088×8592 0.85 →
    1.01, 200×1728×7952 0.78 → 0.97, 512×520×15608 0.54 → 0.77, 1000×472×6728 0.63 → 0.79,
    1000×480×4792 0.70 → 0.74, 128×4096×14336 0.99 → 1.03, 598×554×7456 1.68 → 1.77. Where
    64×64 blocks split themselves (128×424×11952, 128×1024×8192, 582×341×6392, 585×371×11360)
    the 128×128 split lost (1.05 → 0.90, 1.00 → 0.90, 1.67 → 1.48, 1.82 → 1.64), as it did at
    64 K steps (128×4096×4096, 1.00 → 0.86)."""
    batch, m, n, k = c.extents
    narrow_blocks = batch * -(-m // 64) * -(-n // 64)
    if m <= MAX_ROWS or 2 * narrow_blocks <= target.sms or k // WGMMA_BK < SQUARE_MIN_STEPS:
        return 1

    def best(bm: int, bn: int, step: float) -> tuple[float, int]:
        splits = wgmma_splits(c, batch * -(-m // bm) * -(-n // bn), target)
        return min(
            (small_grid_seconds(c, bm, bn, s, step), s) for s in [1, *(s for s, _ in splits)]
        )

    narrow, _ = best(64, 64, WGMMA_STEP_SECONDS)
    square, splits = best(128, 128, SQUARE_STEP_SECONDS)
    return splits if splits > 1 and square <= SQUARE_MARGIN * narrow else 1


SWAP_STEP_SECONDS = 1.0e-6
"""A 32-wide K step of a block of the swapped 3xTF32 plan (128 rows of B by 64 of A, 24
TF32 wgmmas and the split of its fragments; H100, RESULTS.md twenty-ninth session run 3:
64×4096×14336 on 112 blocks, 128 steps each, in 133 µs)."""

SWAP_BLOCK_SECONDS = 2e-6
"""A block's fixed cost beside its steps: its ring filling before the first step and its
epilogue (an estimate)."""


def swap_splits(c: Contraction, bm: int, bn: int, target: Target) -> int:
    """The split count `splitk=0` gives the swapped 3xTF32 plan (bm rows of B, bn of A a
    block; one block an SM): the `s` up to `MOST` whose estimate

        ⌈blocks · s / SMs⌉ · (steps(s) · SWAP_STEP_SECONDS + SWAP_BLOCK_SECONDS)
            + (s > 1) · fold_seconds(s)

    is least, over the `s` whose chunks (`split_k.chunk_elements`, whole 64-element boxes)
    keep `MIN_WGMMA_STEPS` steps of 32 and leave none empty. Unlike `auto_wgmma_splits`
    the blocks may take several waves: a grid of 74 blocks on 132 SMs (45×15072×9352) leaves
    58 idle unsplit, and in 7 chunks fills four waves nearly whole."""
    batch, m, n, k = c.extents
    blocks = batch * -(-n // bm) * -(-m // bn)

    def seconds(s: int) -> float:
        chunk = chunk_elements(k, s, WGMMA_BK)
        waves = -(-blocks * s // target.sms)
        loop = waves * (-(-chunk // 32) * SWAP_STEP_SECONDS + SWAP_BLOCK_SECONDS)
        return loop + (fold_seconds(s, batch, m, n) if s > 1 else 0.0)

    best, best_time = 1, MARGIN * seconds(1)
    for s in range(2, MOST + 1):
        chunk = chunk_elements(k, s, WGMMA_BK)
        if chunk < MIN_WGMMA_STEPS * 32:
            break
        if chunk % WGMMA_BK:
            continue  # whole boxes would leave a chunk empty
        if (time := seconds(s)) < best_time:
            best, best_time = s, time
    return best


def fold_seconds(s: int, batch: int, m: int, n: int) -> float:
    """The fold's launch and the f32 workspace's bytes, written once and read once."""
    return FOLD_SECONDS + 8 * s * batch * m * n / WORKSPACE_BYTES_PER_SECOND


def split_seconds(s: int, tiles: int, batch: int, m: int, n: int, k: int, target: Target) -> float:
    """The estimated time of the GEMM cut into `s` chunks of K (the formula above)."""
    waves = -(-tiles * s // (RESIDENT * target.sms))
    step = STEP_SECONDS if tiles * s < target.sms else STEP_SECONDS_64
    loop = waves * -(-k // (s * SYNC_BK)) * step
    return loop if s == 1 else loop + fold_seconds(s, batch, m, n)
