"""The FP32 contraction's plan: its tiling (`Tiles`, every knob of the rule resolved) and
the heuristics that choose it from the shape and the target."""

from __future__ import annotations

from dataclasses import dataclass, replace

from xdsl.dialects.builtin import DenseArrayBase

from tinyopt.dialects import loop
from tinyopt.passes.tile.gemm.contraction_tma import PRODUCER_WARP, ring_bytes
from tinyopt.passes.tile.gemm.contraction_match import Contraction
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.target import Target

TENSOR_CORE_ONLY = ("sync", "wgmma")
"""`mma` values whose rules take only f16/bf16 contractions (explicitly set: never defaults)."""


@dataclass(frozen=True)
class Tiles:
    """The block tile (bm, bn, bk), the per-thread register tile (tm, tn) and the pipeline;
    each field is the knob of that name (docs/knobs.md)."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    pad: int
    split: int
    stages: int
    group: int
    copy: str = "ld"
    ws: int = 0
    swizzle: int = 0
    pairswap: int = 0
    """1: B's columns are staged pairwise swapped (column c at c ^ 1), see `serpentine`."""
    vec: int = 4
    minblocks: int = 1
    interleave: str = "off"
    prefetch: str = "off"
    streamk: str = "off"

    @property
    def threads(self) -> int:
        """Threads that compute (the register tiles)."""
        return (self.bm // self.tm) * (self.bn // self.tn)

    @property
    def block_threads(self) -> int:
        """Threads of the block: the computing threads, and a producer warp with TMA, ws=1."""
        return self.threads + (PRODUCER_WARP if self.copy == "tma" and self.ws else 0)

    @property
    def shared_bytes(self) -> int:
        """Bytes of the staged sides; a copied side is `[BK][outer + pad]` or `[outer][BK +
        pad]`, so count the larger."""
        if self.copy == "ld":
            return 4 * self.stages * self.bk * (self.bm + self.pad + self.bn + self.pad)
        if self.copy == "tma":
            return ring_bytes(self.stages, self.bk, self.bm, self.bn)
        bk, pad = self.bk, self.pad
        larger = [max(bk * (outer + pad), outer * (bk + pad)) for outer in (self.bm, self.bn)]
        return 4 * self.stages * sum(larger)

    def shared_limit(self, target: Target) -> int:
        """Static shared memory for `ld`; the async engines go dynamic past 48 KiB."""
        return target.static_shared if self.copy == "ld" else target.dynamic_shared


K_VECTOR = 4
"""K values one 16-byte fragment read of a K-major tile gives (f32)."""

CANDIDATES = ((128, 128, 8, 8), (64, 64, 8, 8), (32, 64, 4, 4))
"""Block and register tiles the heuristic tries, largest (most reuse) first."""

UNROLL_FMAS = 2048
"""The most FMAs (bk·tm·tn per K step) a register-staged double-buffered K loop unrolls by two
to: unrolled, each step's shared-memory addresses are constant offsets (no buffer index math),
and the body stays no larger than the single-step bodies of bk=16 tm=16 or bk=32 8×8 tiles."""


def serpentine(tm: int, tn: int) -> list[tuple[int, int]]:
    """Returns the order of a thread's tm×tn FMAs: row by row, every other row backwards.

    An FMA stalls when its accumulator and the operand the reuse cache does not hold sit in
    one of the two register banks. Along a row the A value stays in the reuse cache; column
    j's accumulator and B value have the same parity unless B is staged pairwise swapped
    (`pairswap`), which puts B's value in lane j ^ 1 (2026-12-01: benchmarks/RESULTS.md, "Why
    the default SGEMM lost to cuBLAS …").
    """
    return [(i, j) for i in range(tm) for j in (range(tn) if i % 2 == 0 else reversed(range(tn)))]


def row_major(tm: int, tn: int) -> list[tuple[int, int]]:
    """Returns the tm×tn FMAs row by row: the order without `pairswap` (measured faster there,
    2026-12-01: benchmarks/RESULTS.md, "Timings (same runs, …")."""
    return [(i, j) for i in range(tm) for j in range(tn)]


SMALL_GRID_TMA = {"bm": 64, "bn": 64, "tm": 8, "tn": 4, "bk": 32, "stages": 2}
"""The tile `copy=auto` takes with TMA on small grids (measured 2026-12-01:
benchmarks/RESULTS.md, "`copy=auto`: TMA on small grids (runs 1, 2, 5)")."""

SMALL_GRID_BLOCKS = 64
"""The fewest 64×64 blocks `copy=auto` gives TMA (512², the smallest grid measured)."""

TILE_KNOBS = ("bm", "bn", "bk", "tm", "tn", "stages", "split")
"""Knobs that pin the tile: when one is set, `copy=auto` keeps register staging."""


def _blocks(batch: int, m: int, n: int, bm: int, bn: int) -> int:
    """Returns the blocks of bm×bn tiles a batch×m×n output takes."""
    return batch * -(-m // bm) * -(-n // bn)


def resolve_copy(knobs: Knobs, batch: int, m: int, n: int, sms: int, b_k_major: bool) -> Knobs:
    """Returns the knobs with `copy=auto` decided: TMA with the `SMALL_GRID_TMA` tile where
    128×128 tiles would give fewer than two blocks per SM, its own tiles number at least
    `SMALL_GRID_BLOCKS`, no tile knob is set and B is N-contiguous (`[K, N]`); `ld` elsewhere.
    A K-contiguous B (a torch linear's `[N, K]` weight) ran 2.5–3.5× slower through TMA than
    register staging (measured 2026-12-02: benchmarks/RESULTS.md, "The FP32 linear layout")."""
    if knobs.copy != "auto":
        return knobs
    tma = SMALL_GRID_TMA
    small = (
        _blocks(batch, m, n, 128, 128) < 2 * sms
        and _blocks(batch, m, n, tma["bm"], tma["bn"]) >= SMALL_GRID_BLOCKS
    )
    if not small or b_k_major or any(getattr(knobs, name) for name in TILE_KNOBS):
        return replace(knobs, copy="ld")
    return replace(knobs, copy="tma", **tma)


FULL_ENOUGH = 0.8
"""The share of the two-blocks-per-SM slots a candidate's grid must fill, where it gives
fewer than two blocks per SM but more than one, to be taken over the next smaller tile
without stream-K: 128×128 tiles at 256 blocks (0.97 of 264 slots) ran 1.33× faster than
64×64 ones, at 192 blocks (0.73) 0.84× (measured 2026-12-02 on the H200:
benchmarks/RESULTS.md, "The FP32 tile choice between one and two waves")."""


PAIRED_THREADS = 256
"""Blocks of this many threads are capped at two per SM (`blocks_per_sm`) wherever the grid
has more blocks than SMs; smaller blocks are not, so only their grid can fill the SMs."""


STREAM_K_BK = 16
"""The K step `_fills` counts stream-K's shares in: the register-staged tiles' (`bk` below)."""

STREAM_K_STEPS = 12
"""The fewest K steps each block of a stream-K wave must get for `_fills` to count on stream-K
where the grid alone does not fill the SMs. Measured on the H200 (2026-12-03,
benchmarks/RESULTS.md, "twelfth session", run 6): 231x1024x4096 on 16 tiles of 128x128, 15.5
steps a block, ran 1.41x cuBLAS against 1.19x on the 32x64 tiles; at 64 rows, 7.75 steps a
block lost to the 32x64 tiles (eleventh session, `row_block`)."""


def _fills(
    batch: int, m: int, n: int, bm: int, bn: int, threads: int, sms: int, k_steps: int
) -> bool:
    """Whether a grid of bm×bn blocks keeps the SMs busy: it has two blocks per SM; or, for
    `PAIRED_THREADS` blocks, more than one per SM and either fills `FULL_ENOUGH` of the slots
    or has its K steps shared over one whole wave (stream-K, `k_steps` > 0: the K steps of a
    tile); or, shared so, its tiles hold at least `FULL_ENOUGH` of their rows and columns and
    the wave's blocks (as many per SM as `blocks_per_sm` allows) get at least
    `STREAM_K_STEPS` K steps each.

    Stream-K at 128 128×128 tiles (0.97 per SM) ran 1.14-1.20× faster than at the 512
    64×64 tiles the grid alone would ask for, at 512×4096×4096 and 512×4096×14336
    (2026-12-03, benchmarks/RESULTS.md, "eleventh session", run 1). At 64 tiles of 128×128
    (231×4096×4096, ×14336) stream-K ran 1.24× cuBLAS against 0.67-0.69× on the 512 32×64
    tiles the grid chose, and at 160 rows (where 128-row tiles are 62% padding) 192 tiles of
    64×64 ran 1.33-1.42× against 1.10-1.13× (twelfth session, run 6). Tiles mostly padding
    lose: 128-row tiles over 64 rows ran 0.44-0.65× cuBLAS against 0.78-1.15× for 32×64."""
    blocks = _blocks(batch, m, n, bm, bn)
    if blocks >= 2 * sms:
        return True
    if threads == PAIRED_THREADS and blocks > sms and (k_steps or blocks >= FULL_ENOUGH * 2 * sms):
        return True
    if not k_steps:
        return False
    held = m * n / (_blocks(1, m, n, bm, bn) * bm * bn)
    slots = sms * max(1, REGISTER_FILE_THREADS // threads)
    return held >= FULL_ENOUGH and blocks * k_steps >= STREAM_K_STEPS * slots


def choose_tiles(
    knobs: Knobs, batch: int, m: int, n: int, target: Target, k: int = 0
) -> Tiles | str:
    """Picks the largest candidate tile that keeps every SM busy with two blocks (`_fills`;
    with `k` > 0, counting on stream-K to share the `k` reduction of a grid that alone does
    not fill the SMs); knobs override (measured 2026-11-29: benchmarks/RESULTS.md,
    "Measurements moved from code docstrings"; 2026-12-02: "The FP32 tile choice between one
    and two waves"; 2026-12-03, "twelfth session")."""
    k_steps = -(-k // (knobs.bk or STREAM_K_BK))
    for bm, bn, tm, tn in CANDIDATES:
        threads = (bm // tm) * (bn // tn)
        if _fills(batch, m, n, bm, bn, threads, target.sms, k_steps):
            break
    bm, bn = knobs.bm or bm, knobs.bn or bn
    tm, tn = knobs.tm or min(tm, bm // 4), knobs.tn or min(tn, bn // 4)
    split = knobs.split or (2 if tm >= 8 and tn >= 8 else 1)
    group = knobs.group if knobs.group else (8 if -(-m // bm) >= 16 else 0)
    stages = knobs.stages or (2 if knobs.copy == "ld" else 3)
    pad = 0 if knobs.swizzle else knobs.pad
    tiles = Tiles(
        bm,
        bn,
        knobs.bk or (16 if knobs.copy == "ld" else 8),
        tm,
        tn,
        pad,
        split,
        stages,
        group,
        knobs.copy,
        knobs.ws,
        knobs.swizzle,
        # Only the register-staged copy can permute what it stores; the fragment reads must be
        # 16-byte vectors for the swap to separate register banks (see `serpentine`).
        knobs.pairswap if knobs.copy == "ld" and (tn // split) % 4 == 0 else 0,
    )
    if not knobs.bk and tiles.shared_bytes > tiles.shared_limit(target):
        # bk=16 for register staging (measured 2026-12-01: benchmarks/RESULTS.md, "Timings
        # (same runs, …"); 8 where 16 does not fit.
        tiles = replace(tiles, bk=8)
    return tile_refusal(tiles, target) or tiles


ROW_BLOCK = {"bm": 64, "bn": 128, "tm": 8, "tn": 8}
"""The tile for 33-64 rows (`row_block`) where its stream-K wave gets `ROW_BLOCK_WIDE_STEPS`:
one 64-row block over all of them, 128 threads of 8×8 register tiles."""
ROW_BLOCK_NARROW = {"bm": 64, "bn": 64, "tm": 8, "tn": 4}
"""The tile for 33-64 rows with fewer steps a block: 128 threads of 8×4 register tiles."""

ROW_BLOCK_STEPS = 16
"""The fewest K steps of a 64×64 tile each block of the stream-K wave must get for `row_block`
to apply."""
ROW_BLOCK_WIDE_STEPS = 64
"""The fewest K steps of a 64×64 tile (32 of a 64×128 one) each block of the stream-K wave must
get for the 64×128 `ROW_BLOCK`: a block's share of its tile pays the pipeline's fill and the
stream-K fix-up once, so wider tiles, half as many steps a block, need more of them. Measured on
the H200 (64 rows, × cuBLAS in the same run, 64×128 of 8×8 against 64×64 of 8×4; steps of a
64×64 tile a block of 528): 4096×14336 (108) 1.08 against 0.95 and 14336×4096 (108) 0.93
against 0.85 (2026-12-05, RESULTS.md twenty-fourth session); 4096×4096 (31) 0.95 against 0.98
and 8192×2048 (31) 89.1 µs against 77.1 (twenty-sixth session)."""


def row_block(knobs: Knobs, batch: int, m: int, n: int, k: int, target: Target) -> Tiles | None:
    """Returns the `ROW_BLOCK` tiling for 33-64 rows where no tile knob is set, or None.

    32-row blocks read every weight twice at these rows; one 64-row block reads it once, and
    stream-K (four blocks per SM) fills the SMs where its wave gets at least `ROW_BLOCK_STEPS`
    K steps a block. Measured on the H200 (2026-12-03, benchmarks/RESULTS.md, "eleventh
    session", runs 1 and 3; the eighth session's tuner found it first): at 64 rows 1.23-1.46×
    the 32×64 tiles' speed at 4096×4096, 14336×4096 and 4096×14336 (31-108 steps a block),
    0.85× at 1024×4096 (8 steps a block), which keeps 32×64; `vec=2` and interleaved copies,
    which the tuner had added, changed nothing measurable (within 2%). Those were 64×64 blocks
    of 8×4 (`ROW_BLOCK_NARROW`), kept below `ROW_BLOCK_WIDE_STEPS`; above it `ROW_BLOCK`."""
    tiles = _row_block_tiles(knobs, batch, m, n, target)
    steps = _row_block_steps(tiles, batch, m, n, k, target) if tiles else 0
    if steps < ROW_BLOCK_STEPS:
        return None
    if steps >= ROW_BLOCK_WIDE_STEPS:
        return tiles
    return _row_block_tiles(knobs, batch, m, n, target, ROW_BLOCK_NARROW)


def starved_row_block(knobs: Knobs, batch: int, m: int, n: int, k: int, target: Target) -> bool:
    """Whether 33-64 rows, no tile knob set, are too little work for the CUDA-core rule's
    `row_block`: its stream-K wave would get fewer than `ROW_BLOCK_STEPS` K steps a block, so
    the rule falls back to 32-row tiles that read every weight twice (the 3xTF32 rule takes
    such GEMMs under `mma=auto`: `wgmma_3xtf32.py`)."""
    tiles = _row_block_tiles(knobs, batch, m, n, target)
    return tiles is not None and _row_block_steps(tiles, batch, m, n, k, target) < ROW_BLOCK_STEPS


def _row_block_tiles(
    knobs: Knobs, batch: int, m: int, n: int, target: Target, tile: dict[str, int] = ROW_BLOCK
) -> Tiles | None:
    """The row block's tiles of `tile` where 33-64 rows and the knobs leave the tile to it,
    else None."""
    if any(getattr(knobs, name) for name in (*TILE_KNOBS, "minblocks")):
        return None
    if not 32 < m <= 64 or knobs.streamk == "off" or knobs.copy != "ld":
        return None
    tiles = choose_tiles(replace(knobs, **tile), batch, m, n, target)
    return None if isinstance(tiles, str) else tiles


def _row_block_steps(tiles: Tiles, batch: int, m: int, n: int, k: int, target: Target) -> float:
    """The K steps of 64×64 tiles each block of the row block's stream-K wave gets."""
    slots = target.sms * REGISTER_FILE_THREADS // tiles.threads
    return _blocks(batch, m, n, tiles.bm, 64) * -(-k // tiles.bk) / slots


def tile_refusal(t: Tiles, target: Target) -> str | None:
    """Why a tiling cannot run, or None."""
    if t.swizzle and t.copy != "cp_async":
        return (
            f"swizzle=1 applies to the shared ring of copy=cp_async, got copy={t.copy} "
            "(the registers-staged `ld` layout is conflict-free with pad; TMA's boxes land dense)"
        )
    if t.tm % t.split or t.tn % t.split:
        return f"split={t.split} must divide tm={t.tm} and tn={t.tn}"
    if not 32 <= t.threads <= 1024:
        return f"(bm/tm)*(bn/tn) = {t.threads} threads; a block needs 32 to 1024"
    if t.block_threads > 1024:
        return (
            f"copy=tma ws=1 adds a producer warp to (bm/tm)*(bn/tn) = {t.threads} "
            "threads, more than the 1024 a block may have (use ws=0 or a smaller block tile)"
        )
    if t.shared_bytes > (limit := t.shared_limit(target)):
        how = "declare statically" if t.copy == "ld" else "use"
        return (
            f"bm={t.bm} bn={t.bn} bk={t.bk} stages={t.stages} needs "
            f"{t.shared_bytes} bytes of shared memory, more than the {limit} "
            f"a block may {how}"
        )
    return None


STREAM_K_ATTR = "tinyopt.stream_k"
"""Loop-kernel attribute set by `stream_k.shared_k_kernels` (docs/ir.md): [blocks, tiles]; the
kernel's last two buffers are then the partial-sum workspace (`[blocks, tm·tn, threads]` for
the contraction rule, `[blocks, bn/2, consumer threads]` for wgmma's `streamk=tail`) and the
blocks' i32 flags `[blocks]`."""

UNROLLED_HELPERS = 8
"""The most shares after a tile's first whose partial sums stream-K adds in unrolled code;
past it a loop adds them (measured 2026-12-02: benchmarks/RESULTS.md, "Stream-K handoffs")."""


def two_steps_per_iteration(t: Tiles) -> bool:
    """Whether the double-buffered K loop runs two K steps per iteration (`UNROLL_FMAS`)."""
    return 2 * t.bk * t.tm * t.tn <= UNROLL_FMAS


def stream_k_unit(t: Tiles, k: int) -> int:
    """Returns the K steps stream-K hands out at a time: 2 where the K loop runs two steps per
    iteration and every tile has an even count, so no piece ends half-way through an
    iteration (whose second step would then need a branch), else 1."""
    steps = -(-k // t.bk)
    return 2 if steps % 2 == 0 and two_steps_per_iteration(t) else 1


def stream_k_blocks(op: loop.KernelOp) -> tuple[int, int]:
    """Returns a loop kernel's stream-K blocks and the tiles they share, (0, 0) when it is not
    stream-K."""
    attr = op.attributes.get(STREAM_K_ATTR)
    if not isinstance(attr, DenseArrayBase):
        return 0, 0
    blocks, tiles = attr.get_values()
    return int(blocks), int(tiles)


REGISTER_FILE_THREADS = 512
"""Threads an SM's 64K registers hold at 128 registers each: `blocks_per_sm` allocates for
this many threads of blocks per SM."""


CAPPED_ACCUMULATORS = 64
"""The largest register tile (tm·tn) measured without spills at 128 registers a thread (8×8)."""


def blocks_per_sm(knobs: Knobs, t: Tiles) -> int:
    """Returns the blocks per SM the registers are allocated for (`minblocks`), which is also
    the blocks per SM of a stream-K wave: 128 registers a thread, two blocks of 256 threads,
    four of 128 or eight of 64 (measured 2026-11-29: benchmarks/RESULTS.md, "2026-11-29: SGEMM
    ladder (issue 3, in progress)"; 2026-12-02, "The FP32 tile choice between one and two
    waves": a grid of 256 such blocks ran 1.33× faster capped at two per SM than at one, and
    stream-K over four 128-thread blocks per SM 1.1–2× faster than over one on skinny GEMMs;
    eight 64-thread blocks hold their 8×8 tiles in 128 registers without local memory, SASS on
    NVRTC 13). One for other blocks (a TMA producer warp's) and for register tiles of more than
    `CAPPED_ACCUMULATORS` (a 16×8 tile spills under the cap)."""
    if knobs.minblocks:
        return knobs.minblocks
    capped = t.block_threads in (64, 128, 256) and t.tm * t.tn <= CAPPED_ACCUMULATORS
    return REGISTER_FILE_THREADS // t.block_threads if capped else 1


def interleaves(
    interleave: str, t: Tiles, c: Contraction, stream_k: bool, prefetching: bool
) -> bool | str:
    """Returns whether the register-staged K loop copies A's and B's next slices in turn
    (`interleave`), or why `interleave=on` cannot apply. `auto` is `on` for unbatched kernels
    whose tiles divide the shape and for kernels that prefetch the next tile, not with stream-K
    (measured 2026-12-01/02: benchmarks/RESULTS.md, "The K step's copies interleaved
    (`interleave`, runs 4–6)" and "`tile{prefetch}` and `interleave` together (runs 8–12)")."""
    batch, m, n, k = c.extents
    loop = t.copy == "ld" and t.stages == 2
    if interleave == "on" and not loop:
        return (
            "interleave=on applies to the register-staged double-buffered K loop "
            f"(copy=ld, stages=2; here copy={t.copy}, stages={t.stages})"
        )
    if interleave != "auto":
        return interleave == "on"
    whole = m % t.bm == 0 and n % t.bn == 0 and k % t.bk == 0
    return loop and not stream_k and (batch == 1 and whole or prefetching)
