"""Schedule rule for contractions (matmul, batched matmul) with fused prologue and epilogue.

The classic SGEMM ladder in one schedule: a block computes a BM×BN tile of the output, walking
K in steps of BK. Each step stages the A-side (BM×BK) and B-side (BK×BN) operands in shared
memory, each evaluated by the fused prologue (e.g. `x + bias`) as it is loaded, with vector
loads along whichever axis the operand is contiguous in. Each thread then accumulates a TM×TN
register tile from shared memory. The epilogue (bias, activation, cast) runs on the registers
and stores with vector stores. Out-of-range rows, columns and K are padded with zeros.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import DenseArrayBase, IntegerAttr, f32, i64
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter, RewritePattern
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.emit import (
    Emitter,
    LaneEmitter,
    Mapping,
    depends_on,
    inline_region,
    vector_width,
)
from tinyopt.passes.tile.gemm.contraction_cp_async import CpAsyncPipeline, copied_side, plain_load
from tinyopt.passes.tile.gemm.contraction_swizzle import swizzled, swizzled_shape
from tinyopt.passes.tile.gemm.contraction_tma import (
    PRODUCER_WARP,
    TmaPipeline,
    ring_bytes,
    tensor_map_args,
    tma_side,
)
from tinyopt.passes.tile.gemm.next_tile_prefetch import (
    PrefetchedSide,
    prefetch_tile,
    prefetched_side,
    prefetches,
)
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.knobs import Knobs

SHARED_LIMIT = 48 * 1024
"""Static shared memory a block may declare."""

DYNAMIC_SHARED_LIMIT = 227 * 1024
"""Shared memory a block may use on the H200 (dynamic, opted in)."""


@dataclass
class Contraction:
    """The parts of a contraction kernel: loops, the two operand sides, and the epilogue."""

    nest: loop.ParallelOp
    reduce: loop.ReduceOp
    a_side: list[Operation]
    a_value: SSAValue
    b_side: list[Operation]
    b_value: SSAValue
    product: Operation
    m_iv: SSAValue
    n_iv: SSAValue
    prologue: list[Operation]
    epilogue: list[Operation]

    @property
    def extents(self) -> tuple[int, int, int, int]:
        *batch, m, n = self.nest.extents
        return (batch[0] if batch else 1, m, n, self.reduce.extents[0])


def _slice(ops: Sequence[Operation], value: SSAValue) -> list[Operation]:
    """Returns the ops among `ops` that `value` needs, in order."""
    needed = {value}
    picked: list[Operation] = []
    for op in reversed(ops):
        if any(r in needed for r in op.results):
            picked.append(op)
            needed.update(op.operands)
    return picked[::-1]


def match_contraction(op: loop.KernelOp) -> Contraction | None:
    """Recognizes `parallel(b?, m, n) { reduce(k) { A(m,k) * B(k,n) }; epilogue; store }`."""
    found = contraction_reduces(op)
    if found is None or len(found[1]) != 1:
        return None
    return contraction_parts(*found)


def contraction_reduces(op: loop.KernelOp) -> tuple[loop.ParallelOp, list[loop.ReduceOp]] | None:
    """Returns the (b?, m, n) nest of a kernel and its K loops (`tinyopt.contraction` reduces),
    or None when the kernel is not one parallel nest whose only inner loops are those."""
    ops = list(op.body.block.ops)
    if len(ops) != 1 or not isinstance(nest := ops[0], loop.ParallelOp):
        return None
    if len(nest.extents) not in (2, 3):
        return None
    body_ops = list(nest.body.block.ops)
    reduces = [o for o in body_ops if isinstance(o, loop.ReduceOp)]
    if not reduces or any("tinyopt.contraction" not in r.attributes for r in reduces):
        return None
    if any(isinstance(o, loop.ParallelOp) for o in body_ops):
        return None
    return nest, reduces


def contraction_parts(nest: loop.ParallelOp, reduces: list[loop.ReduceOp]) -> Contraction | None:
    """Splits a contraction nest at its first K loop: prologue (what comes before it, none of
    it per point), the operand sides, and the epilogue after the last K loop."""
    parts = [operand_sides(nest, r) for r in reduces]
    if None in parts:
        return None
    body_ops = list(nest.body.block.ops)
    last = body_ops.index(reduces[-1])
    prologue = [o for o in body_ops[:last] if not isinstance(o, loop.ReduceOp)]
    computed = {r for o in prologue for r in o.results}
    per_point = [*nest.body.block.args, *(r for o in reduces for r in o.res)]
    if depends_on(body_ops[:last], per_point) & computed:
        return None
    *_, m_iv, n_iv = nest.body.block.args
    a_side, lhs, b_side, rhs, product = parts[0]  # type: ignore[misc]
    return Contraction(
        nest,
        reduces[0],
        a_side,
        lhs,
        b_side,
        rhs,
        product,
        m_iv,
        n_iv,
        prologue,
        body_ops[last + 1 :],
    )


def operand_sides(
    nest: loop.ParallelOp, reduce: loop.ReduceOp
) -> tuple[list[Operation], SSAValue, list[Operation], SSAValue, Operation] | None:
    """Returns (A side, A value, B side, B value, product) of a K loop `yield a * b` whose A
    side does not vary with n nor its B side with m, else None."""
    if len(reduce.extents) != 1 or len(reduce.res) != 1:
        return None
    inner = list(reduce.body.block.ops)
    yield_op = inner[-1]
    if len(inner) < 2 or not isinstance(product := inner[-2], arith.MulfOp):
        return None
    if not isinstance(yield_op, loop.YieldOp) or list(yield_op.arguments) != [product.result]:
        return None
    *_, m_iv, n_iv = nest.body.block.args
    lhs, rhs = product.lhs, product.rhs
    if lhs in depends_on(inner, [n_iv]):
        lhs, rhs = rhs, lhs
    body = inner[:-2]
    if lhs in depends_on(body, [n_iv]) or rhs in depends_on(body, [m_iv]):
        return None
    return _slice(body, lhs), lhs, _slice(body, rhs), rhs, product


def operand_types(c: Contraction) -> list[str]:
    """Returns the element types the contraction's operand sides load, sorted."""
    loads = [o for op in (*c.a_side, *c.b_side) for o in op.walk() if isinstance(o, memref.LoadOp)]
    return sorted({str(load.memref.type.element_type) for load in loads})  # type: ignore[attr-defined]


TENSOR_CORE_ONLY = ("sync", "wgmma")
"""`mma` values whose rules take only f16/bf16 contractions (explicitly set: never defaults)."""


@dataclass(frozen=True)
class Tiles:
    """The block tile (bm, bn, bk), the per-thread register tile (tm, tn) and the pipeline.

    `split` = 2 splits each thread's register tile into two halves half a block apart in each
    dimension, so a warp's shared-memory fragment reads cover contiguous 16-byte vectors;
    `stages` = 2 double-buffers shared memory, loading the next K step into registers while the
    current one is computed; `group` > 0 launches blocks in groups of that many block rows so
    that neighbouring blocks share A and B tiles in L2; `copy` is the copy engine
    (`ld`: through registers; `cp_async`: a `stages`-deep ring filled by cp.async; `tma`: a
    ring filled by TMA, issued by a producer warp when `ws` = 1).
    """

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
    """1: the cp.async ring is XOR-swizzled (contraction_swizzle.py) instead of padded."""
    pairswap: int = 0
    """1: B's columns are staged pairwise swapped (column c at c ^ 1), see `serpentine`."""

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
        return (
            4
            * self.stages
            * sum(
                max(self.bk * (outer + self.pad), outer * (self.bk + self.pad))
                for outer in (self.bm, self.bn)
            )
        )

    @property
    def shared_limit(self) -> int:
        """Static shared memory for `ld`; the async engines go dynamic past 48 KiB."""
        return SHARED_LIMIT if self.copy == "ld" else DYNAMIC_SHARED_LIMIT


K_VECTOR = 4
"""K values one 16-byte fragment read of a K-major tile gives (f32)."""

CANDIDATES = ((128, 128, 8, 8), (64, 64, 8, 8), (32, 64, 4, 4))
"""Block and register tiles the heuristic tries, largest (most reuse) first."""

SMS = 132

UNROLL_FMAS = 2048
"""The most FMAs (bk·tm·tn per K step) a register-staged double-buffered K loop unrolls by two
to: unrolled, each step's shared-memory addresses are constant offsets (no buffer index math),
and the body stays no larger than the single-step bodies of bk=16 tm=16 or bk=32 8×8 tiles."""


def serpentine(tm: int, tn: int) -> list[tuple[int, int]]:
    """Returns the order of a thread's tm×tn FMAs: row by row, every other row backwards.

    Why (register banks, measured on the H200: ncu's dispatch stalls follow this count): an
    FMA reads its accumulator and the operand the reuse cache does not hold from a register
    file of two banks (register number mod 2), and stalls when both are in one bank. Along a
    row the A value stays in the reuse cache (turning at a row's end keeps the B value too);
    the accumulators of a row are aligned quads (for 16-byte stores) and so are B's fragment
    registers (16-byte shared loads), so column j's accumulator and B value have the same
    parity — every FMA conflicts — unless B is staged pairwise swapped (`pairswap`): then
    B's value for column j lands in lane j ^ 1, the other bank.
    """
    return [(i, j) for i in range(tm) for j in (range(tn) if i % 2 == 0 else reversed(range(tn)))]


def row_major(tm: int, tn: int) -> list[tuple[int, int]]:
    """Returns the tm×tn FMAs row by row: the order without `pairswap` (alone, the serpentine
    order measured slower there: 0.91× cuBLAS against 0.94× at 4096³)."""
    return [(i, j) for i in range(tm) for j in range(tn)]


SMALL_GRID_TMA = {"bm": 64, "bn": 64, "tm": 8, "tn": 4, "bk": 32, "stages": 2}
"""The tile `copy=auto` takes with TMA (and a producer warp) on small grids. Measured on the
H200 against cuBLAS in the same run (benchmarks/RESULTS.md, sixth session): 1024³ 1.18×, where
register staging's 32×64 tiles gave 0.85×; 2048³ 0.90× against 0.78×; 3 × 1000³ 1.05× against
1.02×; at 512³ (64 blocks) its neighbours 0.86–0.96× against 0.75×."""

SMALL_GRID_BLOCKS = 64
"""The fewest 64×64 blocks `copy=auto` gives TMA (512², the smallest grid measured)."""

TILE_KNOBS = ("bm", "bn", "bk", "tm", "tn", "stages", "split")
"""Knobs that pin the tile: when one is set, `copy=auto` keeps register staging."""


def _blocks(batch: int, m: int, n: int, bm: int, bn: int) -> int:
    """Returns the blocks of bm×bn tiles a batch×m×n output takes."""
    return batch * -(-m // bm) * -(-n // bn)


def resolve_copy(knobs: Knobs, batch: int, m: int, n: int) -> Knobs:
    """Returns the knobs with `copy=auto` decided.

    TMA with the `SMALL_GRID_TMA` tile where 128×128 tiles would give fewer than two blocks
    per SM (register staging then takes smaller tiles, 64×64 or 32×64), its own 64×64 tiles
    number at least `SMALL_GRID_BLOCKS`, and every tile knob is the heuristic's; `ld`
    elsewhere. Where TMA cannot copy the operands, `ScheduleContraction` falls back to `ld`.
    """
    if knobs.copy != "auto":
        return knobs
    tma = SMALL_GRID_TMA
    small = (
        _blocks(batch, m, n, 128, 128) < 2 * SMS
        and _blocks(batch, m, n, tma["bm"], tma["bn"]) >= SMALL_GRID_BLOCKS
    )
    if not small or any(getattr(knobs, name) for name in TILE_KNOBS):
        return replace(knobs, copy="ld")
    return replace(knobs, copy="tma", **tma)


def choose_tiles(knobs: Knobs, batch: int, m: int, n: int) -> Tiles:
    """Picks the largest candidate tile that still gives every SM two blocks; knobs override.

    Measured on the H200 (benchmarks/RESULTS.md): at 1024³ the 32×64 tile (512 blocks) beat
    128×128 (64 blocks) by 1.8×; at 4096³ and batched shapes 128×128 is best.
    """
    for bm, bn, tm, tn in CANDIDATES:
        if _blocks(batch, m, n, bm, bn) >= 2 * SMS:
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
    if not knobs.bk and tiles.shared_bytes > tiles.shared_limit:
        # The default K step for register staging is 16 (half the barriers of 8; measured at
        # 4096³: 0.98× → 0.99× cuBLAS, 64 × 512³ 0.98× → 1.00×); 8 where 16 does not fit.
        tiles = replace(tiles, bk=8)
    if knobs.swizzle and knobs.copy != "cp_async":
        raise DiagnosticException(
            f"tile: swizzle=1 applies to the shared ring of copy=cp_async, got copy={knobs.copy} "
            "(the registers-staged `ld` layout is conflict-free with pad; TMA's boxes land dense)"
        )
    if tm % split or tn % split:
        raise DiagnosticException(f"tile: split={split} must divide tm={tm} and tn={tn}")
    if not 32 <= tiles.threads <= 1024:
        raise DiagnosticException(
            f"tile: (bm/tm)*(bn/tn) = {tiles.threads} threads; a block needs 32 to 1024"
        )
    if tiles.block_threads > 1024:
        raise DiagnosticException(
            f"tile: copy=tma ws=1 adds a producer warp to (bm/tm)*(bn/tn) = {tiles.threads} "
            "threads, more than the 1024 a block may have (use ws=0 or a smaller block tile)"
        )
    if tiles.shared_bytes > tiles.shared_limit:
        how = "declare statically" if tiles.copy == "ld" else "use"
        raise DiagnosticException(
            f"tile: bm={bm} bn={bn} bk={tiles.bk} stages={tiles.stages} needs "
            f"{tiles.shared_bytes} bytes of shared memory, more than the {tiles.shared_limit} "
            f"a block may {how}"
        )
    return tiles


class ScheduleContraction(RewritePattern):
    """Tiles a contraction kernel over blocks, shared memory and per-thread registers."""

    def __init__(self, knobs: Knobs) -> None:
        self.knobs = knobs

    def match_and_rewrite(self, op, rewriter: PatternRewriter, /) -> None:
        if not isinstance(op, loop.KernelOp) or (c := match_contraction(op)) is None:
            return
        if self.knobs.mma in TENSOR_CORE_ONLY:
            # The tensor-core rules come first and took every contraction they can; one that
            # reaches this rule would silently run on CUDA cores although the user asked.
            raise DiagnosticException(
                f"tile: mma={self.knobs.mma} applies to sums of products of f16 or bf16 "
                f"operands (one type); kernel @{op.sym_name.data} reads "
                f"{' and '.join(operand_types(c))} (leave mma=none for CUDA cores)"
            )
        batch, m, n, _ = c.extents
        knobs = resolve_copy(self.knobs, batch, m, n)
        if knobs.copy == "tma" and self.knobs.copy == "auto":
            try:
                self._schedule(op, c, knobs, rewriter)
                return
            except DiagnosticException:
                # TMA cannot copy an operand (a fused prologue, rows that are not 16-byte
                # multiples): the defaulted copy engine falls back to register staging.
                knobs = replace(self.knobs, copy="ld")
        self._schedule(op, c, knobs, rewriter)

    def _schedule(
        self, op: loop.KernelOp, c: Contraction, knobs: Knobs, rewriter: PatternRewriter
    ) -> None:
        """Emits the tiled kernel for `knobs` (copy engine decided) and swaps it in."""
        batch, m, n, _ = c.extents
        t = choose_tiles(knobs, batch, m, n)
        grid = (-(-n // t.bn), -(-m // t.bm), batch)
        min_blocks = blocks_per_sm(knobs, t, grid)
        stream_blocks, stream_tiles = stream_k_blocks(op) if knobs.copy == "ld" else (0, 0)
        whole_tiles = grid[0] * grid[1] * grid[2] - stream_tiles
        launch = (stream_blocks + whole_tiles, 1, 1) if stream_blocks else grid
        kernel, em, mapping = new_kernel(op, launch, (t.block_threads, 1, 1))
        kernel.attributes["tile.min_blocks"] = IntegerAttr(min_blocks, i64)
        emitter = _ContractionEmitter(em, c, t, knobs.vec or 4, mapping, grid, op.sym_name.data)
        emitter.stream_blocks, emitter.stream_tiles = stream_blocks, stream_tiles
        k_iv = c.reduce.body.block.args[0]
        sides = [
            prefetched_side(c.a_side, c.a_value, k_iv, c.m_iv, m, t.bm),
            prefetched_side(c.b_side, c.b_value, k_iv, c.n_iv, n, t.bn),
        ]
        tiles, resident = grid[0] * grid[1] * grid[2], SMS * min_blocks
        stream_k = bool(stream_blocks)
        threads, name = t.block_threads, op.sym_name.data
        if prefetches(
            knobs, t.copy, t.stages, stream_k, sides, batch, tiles, resident, threads, name
        ):
            emitter.prefetch_sides, emitter.prefetch_ahead = sides, resident
        prefetching = bool(emitter.prefetch_sides)
        emitter.interleave = interleaves(knobs, t, c, stream_blocks, prefetching)
        if stream_blocks:
            *_, workspace, flags = op.body.block.args
            emitter.stream_buffers = (mapping[workspace], mapping[flags])
        emitter.emit()
        replace_kernel(rewriter, op, kernel)


STREAM_K_ATTR = "tinyopt.stream_k"
"""Loop-kernel attribute set by `stream_k.stream_k_kernels`: [blocks, tiles], the number of
blocks (one wave at most) sharing the K steps of the first `tiles` tiles (the others run one
block each); the kernel's last two buffers are then the partial-sum workspace
`[blocks, tm·tn, threads]` and the blocks' i32 flags `[blocks]`."""


UNROLLED_HELPERS = 8
"""The most shares after a tile's first whose partial sums stream-K adds in unrolled code, each
behind its own guard; past it a loop over the shares holding the rest of the tile adds them
(unrolled, the 65×136×2056 ladder kernel, 128 shares, was 35803 lines of CUDA that NVRTC took
320 s to compile; the loop changes the register assignment of the K loop, which measured well
unrolled: FFMAs reading one bank twice at 2560×2560×8192, 20% unrolled, 55% with the loop)."""


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


def blocks_per_sm(knobs: Knobs, t: Tiles, grid: tuple[int, int, int]) -> int:
    """Returns the blocks per SM the registers are allocated for (`minblocks`).

    Two 256-thread blocks per SM keep the FMA pipes fed while one waits at a barrier
    (measured: +65% at 4096³), so registers are capped at 128 there — unless the grid is too
    small to give any SM a second block. Smaller blocks keep ptxas's choice: under the same cap
    their extra index arithmetic spills."""
    two_per_sm = t.block_threads == 256 and grid[0] * grid[1] * grid[2] >= 2 * SMS
    return knobs.minblocks or (2 if two_per_sm else 1)


def interleaves(
    knobs: Knobs, t: Tiles, c: Contraction, stream_blocks: int, prefetching: bool
) -> bool:
    """Returns whether the register-staged K loop copies A's and B's next slices in turn
    (`interleave`); raises the diagnostic saying why where `interleave=on` cannot apply.

    Either way ptxas caps the kernel at 128 registers (two blocks per SM) and, short of them,
    moves accumulators between registers, so which FMAs read two registers of one bank (the
    dispatch stalls of `serpentine`) changes from kernel to kernel. `auto` takes `on` where it
    measured faster on the H200 (2026-12-01, TFLOP/s, off → on; × cuBLAS): 4096³ 50.9 → 51.7
    (0.995 → 1.010), 4096×4224×4096 52.7 → 53.1, 8192³ 51.7 → 52.4; and in the kernels that
    prefetch the next tile (`prefetching`: batches of more than a wave), where the FFMAs
    reading one bank twice stay at 21% (51% interleaved without the prefetch) — 2026-12-02,
    × cuBLAS, prefetch alone → with interleave: 64 × 512³ 0.998 → 1.011, 256 × 512³ 1.014 →
    1.026, 16 × 1024² × 512 1.009 → 1.021, 8 × 1024³ 0.988 → 1.005, 256 × 256³ 1.183 →
    1.189, 40 × 260 × 270 × 100 0.683 → 0.742. `off` where it lost: batches without the
    prefetch (64 × 512³ 48.3 → 46.1, 256 × 256³ 45.4 → 43.3), stream-K 4096³ 50.3 → 47.4."""
    batch, m, n, k = c.extents
    loop = t.copy == "ld" and t.stages == 2
    if knobs.interleave == "on" and not loop:
        raise DiagnosticException(
            "tile: interleave=on applies to the register-staged double-buffered K loop "
            f"(copy=ld, stages=2; here copy={t.copy}, stages={t.stages})"
        )
    if knobs.interleave != "auto":
        return knobs.interleave == "on"
    whole = m % t.bm == 0 and n % t.bn == 0 and k % t.bk == 0
    return loop and not stream_blocks and (batch == 1 and whole or prefetching)


@dataclass
class _Staging:
    """How one operand side is copied into shared memory [BK][outer]: axis, width, chunks."""

    side: list[Operation]
    value: SSAValue
    outer_iv: SSAValue
    outer0: SSAValue
    outer_extent: int
    along_k: bool
    width: int
    chunks: int
    per_thread: int
    regs: SSAValue
    smem: SSAValue


class _ContractionEmitter:
    """Emits the tiled contraction for one block."""

    def __init__(
        self,
        em: Emitter,
        c: Contraction,
        t: Tiles,
        vec: int,
        mapping: Mapping,
        grid: tuple[int, int, int],
        name: str,
    ) -> None:
        self.em, self.c, self.t, self.vec, self.mapping = em, c, t, vec, mapping
        self.grid, self.name = grid, name
        self.batch, self.m, self.n, self.k = c.extents
        self.steps = -(-self.k // t.bk)
        """K steps per tile."""

    def emit(self) -> None:
        em, c, t = self.em, self.c, self.t
        mapping = self.mapping
        for op in c.prologue:
            em.op(op.clone(value_mapper=mapping))
        tid = em.value(tile.ThreadIdOp("x"))
        self.tx, self.ty = em.rem(tid, t.bn // t.tn), em.div(tid, t.bn // t.tn)
        self.tid = tid
        block_m, block_n = self._block_coordinates()
        self.m0, self.n0 = em.mul(block_m, t.bm), em.mul(block_n, t.bn)
        if len(c.nest.extents) == 3:
            mapping[c.nest.body.block.args[0]] = em.value(tile.BlockIdOp("z"))
        if t.copy == "cp_async":
            self._copied_pipeline()
            return
        if t.copy == "tma":
            self._tma_pipeline()
            return
        a = self._staging(c.a_side, c.a_value, c.m_iv, self.m0, self.m, t.bm)
        b = self.b = self._staging(c.b_side, c.b_value, c.n_iv, self.n0, self.n, t.bn)
        acc = self._accumulators()
        if self.stream_blocks:
            self._stream_k(a, b, acc)
            return
        if t.stages == 1:
            with em.for_loop(0, self.steps, 1) as (step, _, _):
                for s in (a, b):
                    self._load(s, step)
                    self._fill(s, em.index(0))
                em.op(tile.BarrierOp())
                self._accumulate(a.smem, b.smem, em.index(0), acc)
                em.op(tile.BarrierOp())
                em.op(scf.YieldOp())
        else:
            prefetch = self._prefetch_next_tile if self.prefetch_sides else None
            self._double_buffered(a, b, acc, 0, self.steps, prefetch=prefetch)
        self._epilogue(acc)

    interleave = False
    """Whether the double-buffered K loop copies A's and B's next slices in turn (`interleaves`)."""
    stream_blocks = 0
    """Blocks sharing the K steps (stream-K, `passes/tile/gemm/stream_k.py`), or 0."""
    stream_tiles = 0
    """The tiles those blocks share, the first in launch order; one block runs each other."""
    stream_buffers: tuple[SSAValue, SSAValue]
    """Stream-K's partial-sum workspace and flags."""
    prefetch_sides: Sequence[PrefetchedSide | None] = ()
    """A's and B's plain loads where the K loop prefetches the next tile (`prefetches`)."""
    prefetch_ahead = 0
    """How many blocks later in launch order the tile that takes this block's slot starts."""

    def _double_buffered(
        self,
        a: _Staging,
        b: _Staging,
        acc: SSAValue,
        first: SSAValue | int,
        stop: SSAValue | int,
        even: bool = False,
        rotation: SSAValue | None = None,
        prefetch: Callable[[], None] | None = None,
    ) -> None:
        """The K loop over steps first..stop with double-buffered shared memory: each step
        loads the next step's slices into registers while it computes from one buffer, then
        fills the other; one barrier per step. `even`: stop - first is known to be even.
        `rotation`: step s copies K step (s + rotation) mod steps (stream-K's order).
        `prefetch`: emitted first in the last iteration, two steps before the loop ends where
        the count allows (constant bounds only)."""
        em, t = self.em, self.t
        two = two_steps_per_iteration(t)

        def prefetch_if_last(step: SSAValue) -> None:
            if prefetch is None:
                return
            assert isinstance(first, int) and isinstance(stop, int)
            last = first + (stop - 1 - first) // 2 * 2 if two else max(stop - 2, first)
            with em.when([em.value(arith.CmpiOp(step, em.index(last), "eq"))]):
                prefetch()

        def k_step(step: SSAValue) -> SSAValue:
            return step if rotation is None else em.rem(em.add(step, rotation), self.steps)

        start = em.index(first) if isinstance(first, int) else first
        for s in (a, b):
            self._load(s, k_step(start))
            self._fill(s, em.index(0))
        em.op(tile.BarrierOp())
        if isinstance(stop, int):
            last = em.index(max(stop - 1, 0))
        else:
            last = em.value(arith.SubiOp(stop, em.index(1)))

        def one_step(step: SSAValue, current: SSAValue, other: SSAValue) -> None:
            # The last step loads its own K slice again (clamped: in range) and fills the
            # buffer nobody reads any more, so the step has no branch around the copy.
            following = k_step(em.value(arith.MinSIOp(em.add(step, 1), last)))
            # Which sides' next slices are copied around which of the step's K values: both
            # around all, or (`interleave`) each around half, in registers half a step only.
            half = t.bk // 2
            together = [((a, b), (0, t.bk))]
            copies = [((a,), (0, half)), ((b,), (half, t.bk))] if self.interleave else together
            for sides, k_range in copies:
                for s in sides:
                    self._load(s, following)
                self._accumulate(a.smem, b.smem, current, acc, k_range=k_range)
                for s in sides:
                    self._fill(s, other)
            em.op(tile.BarrierOp())

        if two:
            # Two steps per iteration, so each reads and fills its buffers at constant
            # offsets; with an odd count the last iteration's second step is skipped.
            with em.for_loop(first, stop, 2) as (step, _, _):
                prefetch_if_last(step)
                one_step(step, em.index(0), em.index(1))
                second = em.add(step, 1)
                if isinstance(stop, int) and isinstance(first, int):
                    odd = bool((stop - first) % 2)
                else:
                    odd = not even
                with em.when([em.less(second, stop)] if odd else []):
                    one_step(second, em.index(1), em.index(0))
                em.op(scf.YieldOp())
        else:
            with em.for_loop(first, stop, 1) as (step, _, _):
                prefetch_if_last(step)
                counted = (
                    step
                    if isinstance(first, int) and first == 0
                    else em.value(arith.SubiOp(step, start))
                )
                current = em.rem(counted, 2)
                one_step(step, current, em.value(arith.SubiOp(em.index(1), current)))
                em.op(scf.YieldOp())

    def _prefetch_next_tile(self) -> None:
        """Prefetches into L2 the first K steps of the tile launched `prefetch_ahead` blocks
        after this one, which will take this block's slot (`next_tile_prefetch.py`)."""
        em, t, c = self.em, self.t, self.c
        columns, rows, batches = self.grid
        per_batch = columns * rows
        bx, by = em.value(tile.BlockIdOp("x")), em.value(tile.BlockIdOp("y"))
        linear = em.add(em.mul(by, columns), bx)
        if batches > 1:
            linear = em.add(em.mul(em.value(tile.BlockIdOp("z")), per_batch), linear)
        following = em.add(linear, self.prefetch_ahead)
        with em.when([em.less(following, per_batch * batches)]):
            local, *origins = self._tile_origin(following, dict(self.mapping))
            k_iv = c.reduce.body.block.args[0]
            sides = [(s, o) for s, o in zip(self.prefetch_sides, origins) if s is not None]
            prefetch_tile(em, local, self.tid, t.threads, k_iv, self.k, t.bk, sides)

    def _stream_k(self, a: _Staging, b: _Staging, acc: SSAValue) -> None:
        """Runs this block's work (`passes/tile/gemm/stream_k.py`). Blocks below `stream_blocks`
        share the first `stream_tiles` tiles' K steps: steps begin..end of the sequence tile
        0's steps, tile 1's, …, `segments` tile pieces at most; a tile's K steps are rotated
        so that blocks running at once copy the same K slices. A piece that starts a tile runs
        the epilogue, after adding the partial sums of the blocks holding the rest of the
        tile; one that does not writes its own partial sums to the workspace and sets this
        block's flag. Each later block runs one of the remaining tiles whole."""
        em = self.em
        blocks = self.stream_blocks
        block = em.value(tile.BlockIdOp("x"))
        whole_tiles = self.batch * self.grid[0] * self.grid[1] - self.stream_tiles
        if whole_tiles:
            with em.when([em.value(arith.CmpiOp(block, em.index(blocks), "sge"))]):
                later = em.value(arith.SubiOp(block, em.index(blocks)))
                here_a, here_b = self._at_tile(a, b, em.add(later, self.stream_tiles))
                self._double_buffered(here_a, here_b, acc, 0, self.steps)
                self._epilogue(acc)
        with em.when([em.less(block, blocks)] if whole_tiles else []):
            self._shared_steps(a, b, acc, block)

    def _shared_steps(self, a: _Staging, b: _Staging, acc: SSAValue, block_id: SSAValue) -> None:
        """Runs stream-K block `block_id`'s share of the shared tiles' K steps (`_stream_k`)."""
        em, t = self.em, self.t
        blocks = self.stream_blocks
        steps = self.steps
        unit = stream_k_unit(t, self.k)
        units = self.stream_tiles * steps // unit
        workspace, flags = self.stream_buffers
        # Shares are numbered against the launch order, so a block that waits (for the shares
        # after its own) waits only on blocks launched before it: the handoffs cannot deadlock
        # even where a later block is not resident yet.
        block = em.value(arith.SubiOp(em.index(blocks - 1), block_id))

        def first_step_of(block: SSAValue) -> SSAValue:
            return em.mul(em.div(em.mul(block, units), blocks), unit)

        def share_holding(step: SSAValue) -> SSAValue:
            """The share whose steps include `step`: the last whose first step is ≤ it."""
            after = em.mul(em.add(em.div(step, unit), 1), blocks)
            return em.div(em.value(arith.SubiOp(after, em.index(1))), units)

        first_step = first_step_of(block)
        end = first_step_of(em.add(block, 1))
        first_tile = em.div(first_step, steps)
        most, least = -(-units // blocks) * unit, units // blocks * unit
        segments = -(-most // steps) + 1
        # Shares that may hold a piece of one tile after its first: each holds ≥ `least` steps.
        helpers = -(-(steps - 1) // least)
        first_thread = em.value(arith.CmpiOp(self.tid, em.index(0), "eq"))
        cells = [(i, j) for i in range(t.tm) for j in range(t.tn)]
        with em.for_loop(0, segments, 1) as (segment, _, _):
            tile_index = em.add(first_tile, segment)
            base = em.mul(tile_index, steps)
            start = em.value(arith.MaxSIOp(first_step, base))
            stop = em.value(arith.MinSIOp(end, em.add(base, steps)))
            with em.when([em.less(start, stop)]):
                # The block holding the tile's middle step copies K step τ mod steps at its
                # τ-th step, as every block does in its whole tiles: blocks running at once
                # read the same K slices of A and B, which stay in L2 (unrotated, each block
                # was at its own K offset and the L2 hit rate at 4096³ fell from 82% to 39%).
                behind = em.rem(first_step_of(share_holding(em.add(base, steps // 2))), steps)
                rotation = em.rem(em.value(arith.SubiOp(em.index(steps), behind)), steps)
                here_a, here_b = self._at_tile(a, b, tile_index)
                self._reset(acc)
                k_first = em.value(arith.SubiOp(start, base))
                k_stop = em.value(arith.SubiOp(stop, base))
                self._double_buffered(
                    here_a, here_b, acc, k_first, k_stop, even=unit == 2, rotation=rotation
                )
                starts_tile = em.value(arith.CmpiOp(k_first, em.index(0), "eq"))

                def add_partial_sums(helper: SSAValue) -> None:
                    with em.when([first_thread]):
                        em.op(tile.FlagWaitOp(flags, helper))
                    em.op(tile.BarrierOp())
                    for e, (i, j) in enumerate(cells):
                        index = [em.index(i), em.index(j)]
                        part = em.value(
                            memref.LoadOp.get(workspace, [helper, em.index(e), self.tid])
                        )
                        mine = em.value(memref.LoadOp.get(acc, index))
                        self._store(em.value(arith.AddfOp(mine, part)), acc, index)

                with em.when([starts_tile]):
                    if helpers > UNROLLED_HELPERS:
                        # The shares after this one up to the one holding the tile's last step.
                        last = share_holding(em.add(base, steps - 1))
                        with em.for_loop(em.add(block, 1), em.add(last, 1), 1) as (helper, _, _):
                            add_partial_sums(helper)
                            em.op(scf.YieldOp())
                    else:
                        with em.when([em.less(k_stop, steps)]):
                            for h in range(helpers):
                                helper = em.add(block, h + 1)
                                later = em.less(first_step_of(helper), em.add(base, steps))
                                with em.when([later]):
                                    add_partial_sums(helper)
                    self._epilogue(acc)
                with em.when([em.value(arith.CmpiOp(k_first, em.index(0), "ne"))]):
                    for e, (i, j) in enumerate(cells):
                        value = em.value(memref.LoadOp.get(acc, [em.index(i), em.index(j)]))
                        self._store(value, workspace, [block, em.index(e), self.tid])
                    em.op(tile.ThreadFenceOp())
                    em.op(tile.BarrierOp())
                    with em.when([first_thread]):
                        em.op(tile.FlagSetOp(flags, block))
            em.op(scf.YieldOp())

    def _at_tile(self, a: _Staging, b: _Staging, tile_index: SSAValue) -> tuple[_Staging, _Staging]:
        """Points the block at the `tile_index`-th tile in launch order (batches outermost):
        its batch, origin (m0, n0) and the two sides' staging there."""
        self.mapping, self.m0, self.n0 = self._tile_origin(tile_index, self.mapping)
        here_a, here_b = replace(a, outer0=self.m0), replace(b, outer0=self.n0)
        self.b = here_b
        return here_a, here_b

    def _tile_origin(
        self, tile_index: SSAValue, mapping: Mapping
    ) -> tuple[Mapping, SSAValue, SSAValue]:
        """Returns `mapping` with the batch of the `tile_index`-th tile in launch order
        (batches outermost), and that tile's origin (m0, n0)."""
        em, t, c = self.em, self.t, self.c
        per_batch = self.grid[0] * self.grid[1]
        if len(c.nest.extents) == 3:
            mapping[c.nest.body.block.args[0]] = em.div(tile_index, per_batch)
        row, column = self._tile_coordinates(em.rem(tile_index, per_batch))
        return mapping, em.mul(row, t.bm), em.mul(column, t.bn)

    def _accumulators(self) -> SSAValue:
        """Allocates the tm×tn register tile, set to the reduction's identity."""
        t = self.t
        acc = self.em.value(tile.AllocOp(tile.memref_in([t.tm, t.tn], f32, tile.REGISTERS)))
        self._reset(acc)
        return acc

    def _reset(self, acc: SSAValue) -> None:
        """Sets the register tile to the reduction's identity."""
        t, c = self.t, self.c
        init = self.mapping.get(c.reduce.init[0], c.reduce.init[0])
        self._each(t.tm, lambda i: self._each(t.tn, lambda j: self._store(init, acc, [i, j])))

    def _copied_pipeline(self) -> None:
        """The K loop with both sides copied global → shared by cp.async into a ring."""
        em, t, c = self.em, self.t, self.c
        k_iv = c.reduce.body.block.args[0]
        sides = []
        for which, side, value, iv, origin, extent, size in (
            ("A", c.a_side, c.a_value, c.m_iv, self.m0, self.m, t.bm),
            ("B", c.b_side, c.b_value, c.n_iv, self.n0, self.n, t.bn),
        ):
            load = plain_load(side, value, self.name, t.copy, which)
            sides.append(
                copied_side(
                    load, k_iv, self.k, iv, origin, extent, size, t.bk, self.vec, self.name, t.copy
                )
            )
        shapes = [s.shape(t.stages, t.bk, t.pad) for s in sides]
        if t.swizzle:
            shapes = [swizzled_shape(shape) for shape in shapes]
        dynamic = sum(4 * math.prod(shape) for shape in shapes) > SHARED_LIMIT
        for s, shape in zip(sides, shapes, strict=True):
            s.smem = em.value(tile.AllocOp(tile.memref_in(shape, f32, tile.SHARED), dynamic))
        acc = self._accumulators()
        a, b = sides
        pipeline = CpAsyncPipeline(
            em, self.mapping, self.tid, t.threads, k_iv, self.k, t.bk, t.stages, t.swizzle
        )
        pipeline.emit(
            sides,
            lambda slot: self._accumulate(a.smem, b.smem, slot, acc, a.k_major, b.k_major),
        )
        self._epilogue(acc)

    def _tma_pipeline(self) -> None:
        """The K loop with both sides copied by TMA into an mbarrier ring (contraction_tma.py)."""
        em, t, c = self.em, self.t, self.c
        k_iv = c.reduce.body.block.args[0]
        batch_ivs = list(c.nest.body.block.args[:-2])
        sides = [
            tma_side(
                plain_load(side, value, self.name, t.copy, which),
                k_iv,
                iv,
                batch_ivs,
                origin,
                size,
                self.name,
                which,
            )
            for which, side, value, iv, origin, size in (
                ("A", c.a_side, c.a_value, c.m_iv, self.m0, t.bm),
                ("B", c.b_side, c.b_value, c.n_iv, self.n0, t.bn),
            )
        ]
        kernel = em.block.parent_op()
        assert kernel is not None
        tile.set_tensor_maps(kernel, tensor_map_args(sides, t.bk, self.name))
        for s in sides:
            shape = s.shape(t.stages, t.bk)
            s.smem = em.value(tile.AllocOp(tile.memref_in(shape, f32, tile.SHARED), True))
        acc = self._accumulators()
        a, b = sides
        pipeline = TmaPipeline(
            em, self.mapping, list(em.block.args), self.tid, t.threads, self.k, t.bk, t.stages, t.ws
        )
        pipeline.emit(
            sides,
            lambda slot: self._accumulate(a.smem, b.smem, slot, acc, a.k_major, b.k_major),
            lambda: self._epilogue(acc),
        )

    def _block_coordinates(self) -> tuple[SSAValue, SSAValue]:
        """Returns (block row, block column), grouped by `group` block rows when asked."""
        em, t = self.em, self.t
        if self.stream_blocks:  # set per tile (`_stream_k`)
            return em.index(0), em.index(0)
        bx, by = em.value(tile.BlockIdOp("x")), em.value(tile.BlockIdOp("y"))
        columns, rows = self.grid[0], self.grid[1]
        if not t.group or t.group >= rows:
            return by, bx
        return self._tile_coordinates(em.add(em.mul(by, columns), bx))

    def _tile_coordinates(self, linear: SSAValue) -> tuple[SSAValue, SSAValue]:
        """Returns (row, column) of the `linear`-th tile of a batch in launch order: row-major,
        or with `group` down the rows of each group of `group` block rows first."""
        em, t = self.em, self.t
        columns, rows = self.grid[0], self.grid[1]
        if not t.group or t.group >= rows:
            return em.div(linear, columns), em.rem(linear, columns)
        per_group = t.group * columns
        first_row = em.mul(em.div(linear, per_group), t.group)
        height = em.value(
            arith.MinSIOp(em.value(arith.SubiOp(em.index(rows), first_row)), em.index(t.group))
        )
        within = em.rem(linear, per_group)
        row = em.add(first_row, em.value(arith.RemUIOp(within, height)))
        column = em.value(arith.DivUIOp(within, height))
        return row, column

    def _store(self, value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue]) -> None:
        self.em.op(memref.StoreOp.get(value, buffer, list(indices)))

    def _each(self, count: int, body) -> None:
        """Emits a fully unrolled loop `for i in 0..count` (register indices must be constant)."""
        em = self.em
        with em.for_loop(0, count, 1, unroll=True) as (i, _, _):
            body(i)
            em.op(scf.YieldOp())

    def _staging(
        self,
        side: list[Operation],
        value: SSAValue,
        outer_iv: SSAValue,
        outer0: SSAValue,
        outer_extent: int,
        tile_outer: int,
    ) -> _Staging:
        """Chooses how a side is staged: vectors along whichever axis its loads are contiguous."""
        em, t, c = self.em, self.t, self.c
        k_iv = c.reduce.body.block.args[0]
        along_k = vector_width(side, k_iv, t.bk, self.vec)
        along_k = along_k if self.k % along_k == 0 else 1
        along_outer = vector_width(side, outer_iv, tile_outer, self.vec)
        along_outer = along_outer if outer_extent % along_outer == 0 else 1
        width = max(along_k, along_outer)
        chunks = tile_outer * t.bk // width
        per_thread = -(-chunks // t.threads)
        regs = em.value(tile.AllocOp(tile.memref_in([per_thread, width], f32, tile.REGISTERS)))
        smem = em.value(
            tile.AllocOp(tile.memref_in([t.stages, t.bk, tile_outer + t.pad], f32, tile.SHARED))
        )
        return _Staging(
            side,
            value,
            outer_iv,
            outer0,
            outer_extent,
            along_outer <= along_k,
            width,
            chunks,
            per_thread,
            regs,
            smem,
        )

    def _chunk(self, s: _Staging, index: int) -> tuple[SSAValue, SSAValue, SSAValue]:
        """Returns (chunk number, k offset, outer offset) of this thread's `index`-th chunk."""
        em, t = self.em, self.t
        fast_extent = (t.bk if s.along_k else s.smem.type.get_shape()[2] - t.pad) // s.width
        e = em.add(self.tid, index * t.threads)
        if t.threads % fast_extent == 0:
            # Every chunk of this thread sits in the same column, `threads / fast_extent` rows
            # apart: the offsets are constants, so all chunks share one address register.
            fast = em.mul(em.rem(self.tid, fast_extent), s.width)
            slow = em.add(em.div(self.tid, fast_extent), index * (t.threads // fast_extent))
        else:
            fast = em.mul(em.rem(e, fast_extent), s.width)
            slow = em.div(e, fast_extent)
        return (e, fast, slow) if s.along_k else (e, slow, fast)

    def _load(self, s: _Staging, step: SSAValue) -> None:
        """Evaluates the side (prologue included) on this thread's chunks into registers."""
        em, t, c = self.em, self.t, self.c
        k_iv = c.reduce.body.block.args[0]
        k0 = em.mul(step, t.bk)
        for index in range(s.per_thread):
            e, kk, oo = self._chunk(s, index)
            k, o = em.add(k0, kk), em.add(s.outer0, oo)
            tile_outer = s.smem.type.get_shape()[2] - t.pad
            # Guards only where a tile can run past the data: none when the shape divides.
            checks = [
                *([em.less(k, self.k)] if self.k % t.bk else []),
                *([em.less(o, s.outer_extent)] if s.outer_extent % tile_outer else []),
                *([em.less(e, s.chunks)] if (index + 1) * t.threads > s.chunks else []),
            ]
            local = dict(self.mapping) | {k_iv: k, s.outer_iv: o}
            fast_iv, start = (k_iv, k) if s.along_k else (s.outer_iv, o)

            def side_lanes(local=local, fast_iv=fast_iv, start=start) -> list[SSAValue]:
                lanes = LaneEmitter(em, fast_iv, start, s.width).emit(
                    [*s.side, loop.YieldOp(s.value)], local
                )
                return [lane[0] for lane in lanes]

            if not checks:
                values = side_lanes()
            else:
                with em.if_(em.all_of(checks), [f32] * s.width) as (then_block, else_block, if_op):
                    with em.into(then_block):
                        em.op(scf.YieldOp(*side_lanes()))
                    assert else_block is not None
                    with em.into(else_block):
                        em.op(scf.YieldOp(*[em.f32(0.0)] * s.width))
                values = list(if_op.results)
            for lane, v in enumerate(values):
                self._store(v, s.regs, [em.index(index), em.index(lane)])

    def _fill(self, s: _Staging, buffer: SSAValue) -> None:
        """Writes this thread's loaded chunks from registers into shared buffer `buffer`."""
        em, t = self.em, self.t
        for index in range(s.per_thread):
            e, kk, oo = self._chunk(s, index)
            values = [
                em.value(memref.LoadOp.get(s.regs, [em.index(index), em.index(lane)]))
                for lane in range(s.width)
            ]
            partial = (index + 1) * t.threads > s.chunks
            swapped = self.t.pairswap and s is self.b
            with em.when([em.less(e, s.chunks)] if partial else []):
                if s.along_k or s.width == 1:
                    column = em.value(arith.XOrIOp(oo, em.index(1))) if swapped else oo
                    for lane, v in enumerate(values):
                        self._store(v, s.smem, [buffer, em.add(kk, lane), column])
                else:
                    if swapped:
                        values = [values[lane ^ 1] for lane in range(s.width)]
                    em.op(tile.VectorStoreOp(values, s.smem, [buffer, kk, oo]))

    def _shared(self, index: list[SSAValue], row_length: int) -> list[SSAValue]:
        """Returns where element `index` of a staged tile is (swizzled with `swizzle=1`)."""
        return swizzled(self.em, index, row_length) if self.t.swizzle else index

    def _fragment(
        self, smem: SSAValue, buffer: SSAValue, kk: SSAValue, start: SSAValue, count: int, half: int
    ) -> list[SSAValue]:
        """Reads a thread's `count` operand values at `start` (+ `half` for the split layout)."""
        em = self.em
        parts = self.t.split
        per_part = count // parts
        width = 4 if per_part % 4 == 0 else 1
        values: list[SSAValue] = []
        for part in range(parts):
            base = em.add(start, part * half)
            for offset in range(0, per_part, width):
                index = self._shared([buffer, kk, em.add(base, offset)], half * parts)
                if width == 1:
                    values.append(em.value(memref.LoadOp.get(smem, index)))
                else:
                    lanes = em.op(tile.VectorLoadOp(smem, index, width)).results
                    if self.t.pairswap and smem is self.b.smem:
                        lanes = [lanes[lane ^ 1] for lane in range(width)]
                    values.extend(lanes)
        return values

    def _rows(
        self, smem: SSAValue, buffer: SSAValue, k0: SSAValue, start: SSAValue, count: int, half: int
    ) -> list[list[SSAValue]]:
        """Reads a thread's `count` operand rows of a K-major tile `[outer][BK]` at K
        `k0..k0+3`, one 16-byte vector per row; returns the values by K, then by row."""
        em = self.em
        per_part = count // self.t.split
        rows = []
        for part in range(self.t.split):
            for offset in range(per_part):
                row = em.add(em.add(start, part * half), offset)
                index = self._shared([buffer, row, k0], self.t.bk)
                rows.append(em.op(tile.VectorLoadOp(smem, index, K_VECTOR)).results)
        return [[row[sub] for row in rows] for sub in range(K_VECTOR)]

    def _accumulate(
        self,
        a_smem: SSAValue,
        b_smem: SSAValue,
        buffer: SSAValue,
        acc: SSAValue,
        a_k_major: bool = False,
        b_k_major: bool = False,
        k_range: tuple[int, int] | None = None,
    ) -> None:
        """Accumulates one staged K step. A `[BK][outer]` side gives 16-byte vectors along its
        outer dimension per K; a K-major `[outer][BK]` side (copied as it lies in memory) gives
        them along K, so the loop then walks K in groups of 4 and reads those rows once."""
        em, t, c = self.em, self.t, self.c
        group = K_VECTOR if a_k_major or b_k_major else 1
        a_start, b_start = em.mul(self.ty, t.tm // t.split), em.mul(self.tx, t.tn // t.split)
        k_first, k_stop = k_range or (0, t.bk)
        with em.for_loop(k_first, k_stop, group, unroll=True) as (k0, _, _):
            a_rows = (
                self._rows(a_smem, buffer, k0, a_start, t.tm, t.bm // t.split)
                if a_k_major
                else None
            )
            b_rows = (
                self._rows(b_smem, buffer, k0, b_start, t.tn, t.bn // t.split)
                if b_k_major
                else None
            )
            for sub in range(group):
                kk = em.add(k0, sub)
                a = (
                    a_rows[sub]
                    if a_rows
                    else self._fragment(a_smem, buffer, kk, a_start, t.tm, t.bm // t.split)
                )
                b = (
                    b_rows[sub]
                    if b_rows
                    else self._fragment(b_smem, buffer, kk, b_start, t.tn, t.bn // t.split)
                )
                order = serpentine(t.tm, t.tn) if t.pairswap else row_major(t.tm, t.tn)
                for i, j in order:
                    where = [em.index(i), em.index(j)]
                    old = em.value(memref.LoadOp.get(acc, where))
                    product = em.value(
                        c.product.clone(value_mapper={c.a_value: a[i], c.b_value: b[j]})
                    )
                    (new,) = inline_region(em, c.reduce.combine, [old, product], self.mapping)
                    em.op(memref.StoreOp.get(new, acc, where))
            em.op(scf.YieldOp())

    def _row_of(self, i: int) -> SSAValue:
        """Returns the output row of register row `i` (the split layout puts halves apart)."""
        em, t = self.em, self.t
        per_part = t.tm // t.split
        part, offset = divmod(i, per_part)
        local = em.add(em.mul(self.ty, per_part), part * (t.bm // t.split) + offset)
        return em.add(self.m0, local)

    def _epilogue(self, acc: SSAValue) -> None:
        em, t, c = self.em, self.t, self.c
        per_part = t.tn // t.split
        width = vector_width(c.epilogue, c.n_iv, per_part, 4)
        width = width if self.n % width == 0 else 1
        result = c.reduce.res[0]
        for i in range(t.tm):
            m = self._row_of(i)
            for j0 in range(0, t.tn, width):
                part, offset = divmod(j0, per_part)
                local_n = em.add(em.mul(self.tx, per_part), part * (t.bn // t.split) + offset)
                n = em.add(self.n0, local_n)
                ragged = self.m % t.bm or self.n % t.bn
                with em.when([em.less(m, self.m), em.less(n, self.n)] if ragged else []):
                    values = [
                        em.value(memref.LoadOp.get(acc, [em.index(i), em.index(j0 + lane)]))
                        for lane in range(width)
                    ]
                    local = dict(self.mapping) | {c.m_iv: m}
                    LaneEmitter(em, c.n_iv, n, width).emit(
                        c.epilogue, local, [{result: v} for v in values]
                    )
