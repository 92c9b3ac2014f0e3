"""Schedule rule for flash-attention kernels on tensor cores: `mma.sync` m16n8k16, FA2 style.

Taken for the kernels the `flash-attention` rewrite builds (a `loop.reduce` tagged
`tinyopt.flash_attention` over the keys j, state (m, l, acc)) when q, k and v are read as f16
or bf16, the head dims are multiples of 16 up to 256 and the `attn` knob is `sync`. A block owns
BM query rows of one batch index and walks the keys in tiles of BN: K and V double-buffered in
shared memory (by `cp.async` where a side is a plain load), S = Q·Kᵀ and P·V by `mma.sync` with
P kept in registers, the online softmax in registers in base 2, a causal mask applied only on
the diagonal tiles. docs/flash_attention.md (`attn=sync`) describes the schedule, its masks,
resources and numerics.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

from xdsl.dialects import arith, memref, scf
from xdsl.dialects import math as fmath
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, ModuleOp, f32, i1, i32, i64
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop, tile
from tinyopt.passes.loop_rewrites.flash_attention import backward_slice
from tinyopt.passes.loop_rewrites.online_softmax import LOWEST_F32
from tinyopt.passes.tile.emit import (
    Emitter,
    LaneEmitter,
    Mapping,
    depends_on,
    element_bytes,
    is_contiguous,
    vector_width,
)
from tinyopt.passes.tile.gemm.mma_sync import MMA_K, MMA_M, MMA_N
from tinyopt.passes.tile.gemm.wgmma_plan import ATOM
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.rule import Rule
from tinyopt.passes.tile.attention.attention_match import Attention, match_flash_attention
from tinyopt.passes.tile.attention.key_limit import (
    KeyLimit,
    kernel_scalar_bounds,
    key_limit,
    tile_seen_keys,
)

WARP = 32
WARPS = 4
"""Warps per block unless the knob `awarps` says otherwise."""
ROWS_PER_WARP = 32
"""Query rows per warp unless the knob `arows` says otherwise (two m16 tiles)."""
BN = 64
"""Keys per staged K/V tile."""
SLOTS = 2
"""K and V tiles are double-buffered: the next tile's copies fly while this one is used."""
PAD = 8
"""Shared-row padding in 16-bit elements (16 bytes): conflict-free, aligned `ldmatrix` rows."""
SWIZZLE_CHUNKS = 8
"""16-byte chunks a swizzled tile's row permutes (`tile_column`): the 8 rows an `ldmatrix`
reads at one column land on 8 chunk positions of a 128-byte line, so rows need no padding and
each starts 32-byte aligned (a 16-byte pad leaves every other row's 32-byte sectors split
across two granules of shared memory, and each `cp.async` sector is then fetched twice from
L2: benchmarks/RESULTS.md, twenty-eighth session)."""
Q_REGISTER_DIM = 64
"""Largest q·k head dim whose Q fragments stay in registers for the whole key loop."""
APPROXIMATE = arith.FastMathFlagsAttr([arith.FastMathFlag.APPROX_FUNC])
"""`math.exp2` may be approximate (printed as `ex2.approx.ftz`)."""
LOG2E = 1.4426950408889634
"""log2(e): exp(x) = exp2(x·log2 e)."""
EXP2_CUBIC = (0.9999251961708069, 0.6958335041999817, 0.2260671854019165, 0.07802450656890869)
"""c0…c3 of c0 + c1·f + c2·f² + c3·f³ ≈ 2^f on [0, 1): a fit of least relative error (by
reweighted least squares over Chebyshev nodes, made for this file), at most 7.5e-5: below the
bf16 (3.9e-3) and f16 (4.9e-4) rounding P gets before P·V."""
LOWEST_BASE2 = LOWEST_F32 / LOG2E
"""The lowest score whose product with log2 e is finite (about −2.36·10³⁸); below it x·log2 e
is −inf and the score would count as masked."""


def _low_scores(a: Attention) -> bool:
    """Tells whether the score may be a finite constant below LOWEST_BASE2 that must not count
    as masked: it selects one in place of the score (`masked_fill(~mask, finfo.min)`, which a
    row whose every key is masked averages over; decompose's boolean mask fills with
    `MASKED_SCORE`, above LOWEST_BASE2). A constant only added to the score (a causal mask)
    may count as masked: every row also holds a score it does not lower. A mask read from
    memory is not looked at (docs/flash_attention.md, numerics)."""
    for op in a.ops_of(a.yielded[0], [a.qk.res[0]]):
        for o in op.walk():
            if isinstance(o, arith.SelectOp):
                values = [_float_constant(v) for v in (o.lhs, o.rhs)]
                if None in values and any(
                    v is not None and -float("inf") < v < LOWEST_BASE2 for v in values
                ):
                    return True
    return False


def _float_constant(value: SSAValue) -> float | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, FloatAttr):
        return owner.value.value.data
    return None


def _scale(a: Attention) -> float | None:
    """Returns c when the score is the dot product times a constant c > 0, plus at most the
    causal mask; the softmax then folds c into its exponent and takes the maximum of the dot
    products (c > 0 keeps the order)."""
    score = a.yielded[0]
    if a.causal_mask is not None:
        add, score = a.causal_mask
        if add.result != a.yielded[0]:
            return None
    product, dot = score.owner, a.qk.res[0]
    if not isinstance(product, arith.MulfOp) or dot not in product.operands:
        return None
    factor = product.rhs if product.lhs == dot else product.lhs
    constant = factor.owner
    if not isinstance(constant, arith.ConstantOp) or not isinstance(constant.value, FloatAttr):
        return None
    c = constant.value.value.data
    return c if 0 < c < float("inf") else None


def shared_bytes(rows: int, head_qk: int, head_v: int, element: int) -> int:
    """The shared memory a block requests: Q's `rows` rows and the two-slot K and V tiles, rows
    padded by `PAD`, each buffer 1024-byte aligned, plus 1024 bytes of slack (the layout of
    dynamic shared memory, backends/cuda/hopper.py)."""
    tiles = (rows * (head_qk + PAD), SLOTS * BN * (head_qk + PAD), SLOTS * BN * (head_v + PAD))
    return sum(-(-n * element // ATOM) * ATOM for n in tiles) + ATOM


def _flat(values: list[list[list[SSAValue]]]) -> list[SSAValue]:
    return [v for tile_values in values for regs in tile_values for v in regs]


@dataclass(frozen=True)
class AttentionPlan:
    arows: int
    """Query rows per warp (16 or 32)."""
    awarps: int
    """Warps per block (4 or 8)."""


class AttentionSync(Rule[Attention, AttentionPlan]):
    """Schedules a flash-attention kernel with f16/bf16 operands on tensor cores (FA2 style)."""

    name = "attention"
    reads = "attn arows awarps"
    plan_type = AttentionPlan
    selector = ("attn", "sync")

    def match(self, kernel: loop.KernelOp) -> Attention | str:
        return match_flash_attention(kernel)

    def plan(self, kernel: loop.KernelOp, a: Attention, knobs: Knobs) -> AttentionPlan | str:
        plan = AttentionPlan(knobs.arows or ROWS_PER_WARP, knobs.awarps or WARPS)
        return self.check(kernel, a, plan) or plan

    def check(self, kernel: loop.KernelOp, a: Attention, plan: AttentionPlan) -> str | None:
        if plan.arows not in (16, 32) or plan.awarps not in (4, 8):
            return f"arows must be 16 or 32 and awarps 4 or 8, got {plan.arows} and {plan.awarps}"
        rows, head_qk, head_v = plan.arows * plan.awarps, a.qk.extents[0], a.nest.extents[-1]
        needed = shared_bytes(rows, head_qk, head_v, element_bytes(a.element))
        if needed > self.target.dynamic_shared:
            return (
                f"attn=sync stages {rows} query rows (arows={plan.arows} awarps={plan.awarps}) "
                f"and two {BN}-key K and V tiles at head dims {head_qk}/{head_v} in {needed} "
                f"bytes of shared memory, more than {self.target.dynamic_shared}: fewer rows"
            )
        return None

    def emit(
        self, kernel: loop.KernelOp, a: Attention, plan: AttentionPlan, rewriter: PatternRewriter
    ) -> None:
        *batch, s_q, _ = a.nest.extents
        warps = plan.awarps
        rows = plan.arows * warps
        grid = (-(-s_q // rows), prod(batch), 1)
        new, em, mapping = new_kernel(kernel, grid, (warps * WARP, 1, 1))
        if warps * WARP > 128 and rows // warps == MMA_M:
            # Two blocks per SM: 128 registers per thread, about what 16 rows per warp take
            # (measured 2026-11-29: benchmarks/RESULTS.md, "Measurements moved from
            # docs/knobs.md (2026-12-02)").
            new.attributes["tile.min_blocks"] = IntegerAttr(2, i64)
        emitter = _AttentionEmitter(em, a, mapping, warps, rows // warps // MMA_M)
        module = kernel.get_toplevel_object()
        assert isinstance(module, ModuleOp)
        emitter.limit = key_limit(a, kernel_scalar_bounds(module, kernel))
        emitter.emit()
        replace_kernel(rewriter, kernel, new)


@dataclass
class _Side:
    """A staged operand: its loop-level ops and value, the index of its rows and columns."""

    ops: list[Operation]
    value: SSAValue
    row_iv: SSAValue
    col_iv: SSAValue
    cols: int
    smem: SSAValue
    copied: memref.LoadOp | None = None
    """The load `cp.async` copies, when the side is that load (else it goes through registers)."""


def copied_load(side: _Side, element: Attribute) -> memref.LoadOp | None:
    """Returns the one load a side is, when `cp.async` can copy it: the element type unchanged
    (only widened by `extf`), rows contiguous along the side's columns; else None."""
    loads = [op for op in side.ops if isinstance(op, memref.LoadOp)]
    if len(loads) != 1 or (load := loads[0]).res.type != element:
        return None
    for op in side.ops:
        widened = isinstance(op, arith.ExtFOp) and op.input == load.res
        # Index arithmetic, its compares and selects (a chunk cut at run time).
        index_math = op.results and all(
            r.type == i1 or isinstance(r.type, IndexType) for r in op.results
        )
        if op is not load and not widened and not index_math:
            return None
    if side.value != load.res and not isinstance(side.value.owner, arith.ExtFOp):
        return None
    if not is_contiguous(load.indices, side.col_iv, depends_on(side.ops, [side.col_iv])):
        return None
    return load if vector_width([load], side.col_iv, side.cols, 8) == 8 else None


class _AttentionEmitter:
    """Emits the flash-attention block schedule."""

    def __init__(
        self, em: Emitter, a: Attention, mapping: Mapping, warps: int, m_tiles: int
    ) -> None:
        self.em, self.a, self.mapping = em, a, mapping
        self.m_tiles, self.threads = m_tiles, warps * WARP
        self.bm = warps * m_tiles * MMA_M
        *self.batch_extents, self.s_q, self.head_v = a.nest.extents
        self.s_k = a.reduce.extents[0]
        self.head_qk = a.qk.extents[0]
        self.scale = _scale(a)
        self.exact = _low_scores(a)
        self.bn = BN
        """Keys of the tile being computed (the wgmma schedule narrows an item's last one)."""
        self.ring_keys = BN
        """Keys a K/V ring slot holds: `bn` but for a narrowed tile."""
        self.key_count: SSAValue | None = None
        """A decode partial kernel's number of keys at run time (its loop stops there), or
        None: every key up to the reduction's extent."""
        self.limit: KeyLimit | None = None
        """Where the score proves the keys past a bound of the runtime scalars masked (a cache
        of L valid keys), the key loop stops at the bound (`key_limit.py`)."""
        self.fma_tiles: frozenset[int] = frozenset()
        """The n8 tiles of S whose exp2 runs on the FMA units (`exp2_on_fma`), not MUFU."""
        self.swizzled: set[SSAValue] = set()
        """The key rings stored swizzled (`tile_column`), not padded."""

    @property
    def ragged_end(self) -> bool:
        """Whether the last key tile runs past the keys (the tiles that may hold keys past
        the end mask them): never in a narrowed tile where the ring's tiles do not."""
        return self.s_k % self.ring_keys != 0

    def key_end(self) -> SSAValue | int:
        """The end of the key loop: the runtime key count (evaluated from the block's indices
        and the kernel's scalars), the keys a runtime bound lets any row see (at least one),
        or the reduction's extent."""
        if self.key_count is None and self.limit is not None:
            return tile_seen_keys(self.em, self.limit, self.a, self.mapping, self.q0, self.bm)
        if self.key_count is None:
            return self.s_k
        local = dict(self.mapping)
        for op in self.a.ops_of(self.key_count):
            self.em.op(op.clone(value_mapper=local))
        return local[self.key_count]

    def alloc(self, shape: Sequence[int], element: Attribute, space: int) -> SSAValue:
        return self.em.value(
            tile.AllocOp(tile.memref_in(shape, element, space), space == tile.SHARED)
        )

    def load(self, buffer: SSAValue, *indices: int) -> SSAValue:
        return self.em.value(memref.LoadOp.get(buffer, [self.em.index(i) for i in indices]))

    def tile_column(self, smem: SSAValue, row: SSAValue, col: SSAValue | int) -> SSAValue:
        """Where column `col` of row `row` of a key ring's tile is stored: in place, or in a
        swizzled ring (`swizzled`) at its 16-byte chunk XOR the row's low three bits (an
        element keeps its place in its chunk)."""
        em = self.em
        col = em.index(col) if isinstance(col, int) else col
        if smem not in self.swizzled:
            return col
        key = em.mul(em.rem(row, SWIZZLE_CHUNKS), 8)
        return em.value(arith.XOrIOp(col, key))

    def store(self, value: SSAValue, buffer: SSAValue, *indices: int) -> None:
        self.em.op(memref.StoreOp.get(value, buffer, [self.em.index(i) for i in indices]))

    def f(self, op: Operation) -> SSAValue:
        return self.em.value(op)

    def combine(self, kind: type[Operation], values: Sequence[SSAValue]) -> SSAValue:
        """Returns values folded pairwise as a balanced tree of a binary float op."""
        values = list(values)
        while len(values) > 1:
            values = [
                self.f(kind(values[k], values[k + 1])) if k + 1 < len(values) else values[k]
                for k in range(0, len(values), 2)
            ]
        return values[0]

    def quad(self, values: Sequence[SSAValue], kind: type[Operation]) -> list[SSAValue]:
        """Combines each value across the 4 lanes of a quad (the lanes holding one row)."""
        block = Block(arg_types=[f32] * (2 * len(values)))
        n = len(values)
        results = [kind(block.args[k], block.args[n + k]) for k in range(n)]
        for op in results:
            block.add_op(op)
        block.add_op(tile.YieldOp(*[op.results[0] for op in results]))
        return list(self.em.op(tile.WarpReduceOp(list(values), Region(block), 4)).results)

    def o_index(self, mt: int, dt: int, r: int) -> tuple[int, ...]:
        """Where accumulator r of O's m16n8 tile (mt, dt) lies in `self.o`."""
        return (mt, dt, r)

    def p_fragment(self, p: list[list[SSAValue]], kk: int) -> list[SSAValue]:
        """Returns the A fragment of keys 16kk..16kk+15 of one m16 tile of probabilities: its
        two m16n8 accumulator tiles, rounded and packed pairwise (the accumulator layout of two
        n8 tiles is the A-fragment layout of one k16 step)."""
        lo, hi = p[2 * kk], p[2 * kk + 1]
        pairs = ((lo[0], lo[1]), (lo[2], lo[3]), (hi[0], hi[1]), (hi[2], hi[3]))
        return [self.f(tile.PackOp(x, y, self.a.element)) for x, y in pairs]

    def row(self, mt: int, half: int) -> SSAValue:
        """Returns the query row this lane holds in m-tile `mt` (half 0: row g, 1: g + 8)."""
        em = self.em
        return em.add(em.add(self.q0, self.row_w), em.add(self.g, mt * MMA_M + 8 * half))

    def a_fragment(self, smem: SSAValue, mt: int, kk: int) -> list[SSAValue]:
        """Loads the A fragment of m-tile `mt`, columns kk..kk+15, of the block's q rows."""
        em = self.em
        row = em.add(em.add(self.row_w, mt * MMA_M), em.add(self.lo8, self.r8))
        index = [row, em.add(kk, self.hi8)]
        return list(em.op(tile.LdMatrixOp(smem, index, False)).results)

    def emit(self) -> None:
        em, a = self.em, self.a
        self.tid = em.value(tile.ThreadIdOp("x"))
        lane, warp = em.rem(self.tid, WARP), em.div(self.tid, WARP)
        self.g, self.t = em.div(lane, 4), em.rem(lane, 4)
        self.r8 = em.rem(lane, 8)
        self.lo8 = em.mul(em.rem(em.div(lane, 8), 2), 8)
        self.hi8 = em.mul(em.div(lane, 16), 8)
        query_tile = em.value(tile.BlockIdOp("x"))
        if a.causal:
            # Blocks start in blockIdx order; with a causal mask the last query tiles have the
            # most keys, so they go first and the short ones fill the tail of the grid.
            last = em.index(-(-self.s_q // self.bm) - 1)
            query_tile = em.value(arith.SubiOp(last, query_tile))
        self.q0 = em.mul(query_tile, self.bm)
        self.row_w = em.mul(warp, self.m_tiles * MMA_M)
        flat = em.value(tile.BlockIdOp("y"))
        for iv, index in zip(a.batch, em.delinearize(flat, self.batch_extents) if a.batch else []):
            self.mapping[iv] = index
        element = a.element
        self.q_smem = self.alloc([self.bm, self.head_qk + PAD], element, tile.SHARED)
        k_smem = self.alloc([SLOTS, BN, self.head_qk + PAD], element, tile.SHARED)
        v_smem = self.alloc([SLOTS, BN, self.head_v + PAD], element, tile.SHARED)
        q = _Side(a.ops_of(a.q_value), a.q_value, a.i, a.e, self.head_qk, self.q_smem)
        k = _Side(a.ops_of(a.k_value), a.k_value, a.j, a.e, self.head_qk, k_smem)
        value = a.yielded[2]
        v = _Side(a.ops_of(value), value, a.j, a.d, self.head_v, v_smem)
        for side in (k, v):
            side.copied = copied_load(side, element)
        end = self.key_end()
        if a.causal:
            first_unseen = em.add(self.q0, self.bm)
            end = em.index(end) if isinstance(end, int) else end
            end = em.value(arith.MinSIOp(end, first_unseen))
        self.stage(q, self.q0, self.s_q, self.bm)
        zero = em.index(0)
        self.issue(k, zero, zero)
        self.issue(v, zero, zero)
        self.commit(k, v)
        em.op(tile.BarrierOp())
        q_frags = None
        if self.head_qk <= Q_REGISTER_DIM:
            q_frags = [
                [self.a_fragment(self.q_smem, mt, kk) for kk in range(0, self.head_qk, MMA_K)]
                for mt in range(self.m_tiles)
            ]
        self.m = self.alloc([self.m_tiles, 2], f32, tile.REGISTERS)
        self.l = self.alloc([self.m_tiles, 2], f32, tile.REGISTERS)
        self.o = self.alloc([self.m_tiles, self.head_v // MMA_N, 4], f32, tile.REGISTERS)
        minus_inf, fzero = em.f32(float("-inf")), em.f32(0.0)
        for mt in range(self.m_tiles):
            for h in range(2):
                self.store(minus_inf, self.m, mt, h)
                self.store(fzero, self.l, mt, h)
            for dt in range(self.head_v // MMA_N):
                for r in range(4):
                    self.store(fzero, self.o, mt, dt, r)
        with em.for_loop(0, end, BN) as (j0, _, _):
            slot = em.rem(em.div(j0, BN), SLOTS)
            ahead = em.add(j0, BN)
            next_slot = em.rem(em.div(ahead, BN), SLOTS)
            # K(t) and V(t) have landed, and every warp is past tile t-1: its slots are free
            # for K(t+1) and V(t+1), which fly during the whole of tile t.
            self.wait(k, v)
            with em.when([em.less(ahead, end)]):
                self.issue(k, ahead, next_slot)
            self.commit(k, v)
            scores = self.scores(q_frags, k_smem, slot)
            probs = self.softmax(self.masked(scores, j0))
            with em.when([em.less(ahead, end)]):
                self.issue(v, ahead, next_slot)
            self.commit(k, v)
            self.multiply_v(probs, v_smem, slot)
            em.op(scf.YieldOp())
        self.epilogue()

    def wait(self, *sides: _Side) -> None:
        """Waits for this thread's copies (one group in flight), then for every thread."""
        if any(side.copied for side in sides):
            self.em.op(tile.CpAsyncWaitOp(0))
        self.em.op(tile.BarrierOp())

    def commit(self, *sides: _Side) -> None:
        """Closes this thread's copies of one key tile (K and V) into a group."""
        if any(side.copied for side in sides):
            self.em.op(tile.CpAsyncCommitOp())

    def issue(self, side: _Side, origin: SSAValue, slot: SSAValue) -> None:
        """Fills ring slot `slot` of a key side with rows origin..origin+bn: by `cp.async`
        when the side is a plain load, else evaluated and stored (visible after a barrier)."""
        if side.copied is None:
            self.stage(side, origin, self.s_k, self.bn, [slot])
            return
        em, load = self.em, side.copied
        per_row = side.cols // 8
        chunks = self.bn * per_row
        # Unrolled, each thread's chunks in one column a fixed number of rows apart where the
        # block's threads cover whole rows, so the addresses are the first plus constants.
        steps = -(-chunks // self.threads)
        if self.threads % per_row == 0:
            col = em.mul(em.rem(self.tid, per_row), 8)
            first = em.div(self.tid, per_row)
            spots = [(em.add(first, k * self.threads // per_row), col) for k in range(steps)]
        else:
            flats = [em.add(self.tid, k * self.threads) for k in range(steps)]
            spots = [(em.div(f, per_row), em.mul(em.rem(f, per_row), 8)) for f in flats]
        for step, (row, col) in enumerate(spots):
            partial = (step + 1) * self.threads > chunks
            with em.when([em.less(row, self.bn)] if partial else []):
                index = em.add(origin, row)
                valid = em.less(index, self.s_k) if self.ragged_end else None
                if valid is not None:
                    index = em.value(arith.SelectOp(valid, index, em.index(0)))
                local = dict(self.mapping) | {side.row_iv: index, side.col_iv: col}
                for op in side.ops:
                    if op is load:
                        break
                    em.op(op.clone(value_mapper=local))
                src = [local.get(i, i) for i in load.indices]
                dst = [slot, row, self.tile_column(side.smem, row, col)]
                em.op(tile.CpAsyncOp(local[load.memref], src, side.smem, dst, 8, valid))

    def stage(
        self, side: _Side, origin: SSAValue, extent: int, rows: int, slot: Sequence[SSAValue] = ()
    ) -> None:
        """Evaluates a side over `rows` rows from `origin` into shared memory (at `slot` of a
        ring), rounded to the element type, with 16-byte vectors along its columns; rows past
        `extent` are 0."""
        em, element = self.em, self.a.element
        width = vector_width(side.ops, side.col_iv, side.cols, 8)
        per_row = side.cols // width
        with em.for_loop(self.tid, rows * per_row, self.threads) as (flat, _, _):
            col = em.mul(em.rem(flat, per_row), width)
            row = em.div(flat, per_row)
            index = em.add(origin, row)
            with em.if_(em.less(index, extent), [element] * width) as (then, other, if_op):
                with em.into(then):
                    local = dict(self.mapping) | {side.row_iv: index}
                    lanes = LaneEmitter(em, side.col_iv, col, width).emit(
                        [*side.ops, loop.YieldOp(side.value)], local
                    )
                    em.op(scf.YieldOp(*[self.narrow(lane[0]) for lane in lanes]))
                assert other is not None
                with em.into(other):
                    zero = em.value(arith.ConstantOp(FloatAttr(0.0, element)))  # type: ignore[arg-type]
                    em.op(scf.YieldOp(*[zero] * width))
            at = [*slot, row, self.tile_column(side.smem, row, col)]
            if width == 1:
                em.op(memref.StoreOp.get(if_op.results[0], side.smem, at))
            else:
                em.op(tile.VectorStoreOp(list(if_op.results), side.smem, at))
            em.op(scf.YieldOp())

    def narrow(self, value: SSAValue) -> SSAValue:
        """Returns a side value as the element type: the loaded value when it was only widened."""
        if isinstance(value.owner, arith.ExtFOp) and value.owner.input.type == self.a.element:
            return value.owner.input
        return self.em.value(arith.TruncFOp(value, self.a.element))

    def scores(
        self, q_frags: list[list[list[SSAValue]]] | None, k_smem: SSAValue, slot: SSAValue
    ) -> list[list[list[SSAValue]]]:
        """Returns the warp's 32×bn dot products as [m-tile][bn/8] m16n8 accumulators (4 per
        lane); each K fragment feeds both m-tiles."""
        em = self.em
        zero = em.f32(0.0)
        acc = [[[zero] * 4 for _ in range(self.bn // MMA_N)] for _ in range(self.m_tiles)]
        for step in range(self.head_qk // MMA_K):
            kk = step * MMA_K
            a_regs = [
                q_frags[mt][step] if q_frags else self.a_fragment(self.q_smem, mt, kk)
                for mt in range(self.m_tiles)
            ]
            for jj in range(self.bn // (2 * MMA_N)):
                row = em.add(em.add(jj * 2 * MMA_N, self.hi8), self.r8)
                index = [slot, row, self.tile_column(k_smem, row, em.add(kk, self.lo8))]
                regs = em.op(tile.LdMatrixOp(k_smem, index, False)).results
                for mt in range(self.m_tiles):
                    for half in range(2):
                        n = 2 * jj + half
                        b_regs = regs[2 * half : 2 * half + 2]
                        mma = tile.MmaSyncOp(self.a.element, a_regs[mt], b_regs, acc[mt][n])
                        acc[mt][n] = list(em.op(mma).results)
        return acc

    def masked(self, acc: list[list[list[SSAValue]]], j0: SSAValue) -> list[list[list[SSAValue]]]:
        """Applies the loop body's score expression (scale, mask) to each dot product; keys
        past the end score −inf. A causal mask and the end of the keys are applied only on the
        tiles that need them (the warp's diagonal tiles, the last tile)."""
        em, a = self.em, self.a
        loads = any(
            isinstance(o, memref.LoadOp)
            for op in a.ops_of(a.yielded[0], [a.qk.res[0]])
            for o in op.walk()
        )
        if loads:
            return self.scores_of(acc, j0, masked=True, loads=True)
        edges = []
        if a.causal:
            first_row = em.add(self.q0, self.row_w)
            edges.append(em.less(first_row, em.add(j0, self.bn - 1)))
        if self.ragged_end:
            edges.append(em.less(em.index(self.s_k), em.add(j0, self.bn)))
        if not edges:
            return self.scores_of(acc, j0, masked=False)
        edge = edges[0]
        for other in edges[1:]:
            edge = em.value(arith.OrIOp(edge, other))
        count = self.m_tiles * (self.bn // MMA_N) * 4
        with em.if_(edge, [f32] * count) as (then, other_block, if_op):
            with em.into(then):
                em.op(scf.YieldOp(*_flat(self.scores_of(acc, j0, masked=True))))
            assert other_block is not None
            with em.into(other_block):
                em.op(scf.YieldOp(*_flat(self.scores_of(acc, j0, masked=False))))
        values = iter(if_op.results)
        return [[[next(values) for _ in range(4)] for _ in tile_acc] for tile_acc in acc]

    def scores_of(
        self, acc: list[list[list[SSAValue]]], j0: SSAValue, masked: bool, loads: bool = False
    ) -> list[list[list[SSAValue]]]:
        """Emits the score expression for each dot product; unmasked, the causal mask's add
        is skipped and no key counts as past the end."""
        em, a = self.em, self.a
        score = a.yielded[0]
        ops = a.ops_of(score, [a.qk.res[0]])
        minus_inf = em.f32(float("-inf"))
        out = []
        for mt, tile_acc in enumerate(acc):
            rows = [self.row(mt, h) for h in range(2)]
            tile_out = []
            for n, regs in enumerate(tile_acc):
                cols = []
                for r, dot in enumerate(regs):
                    i = rows[r // 2]
                    j = em.add(j0, em.add(em.mul(self.t, 2), n * MMA_N + r % 2))
                    local = dict(self.mapping) | {a.qk.res[0]: dot, a.i: i, a.j: j}
                    if self.scale is not None and not loads:
                        cols.append(self.masked_dot(dot, i, j) if masked else dot)
                        continue
                    if loads:
                        # A mask read from memory must not be read past the ends: the score
                        # is computed at indices clamped inside and replaced by −inf outside,
                        # without a branch, so the loads of a per-key mask at one column are
                        # the same expression for every row and NVRTC loads them once (BERT's
                        # padding mask: 64 guarded loads per lane and key tile were 2x the
                        # attention time of the unmasked kernel, H200 2026-12-02).
                        inside = em.all_of([em.less(i, self.s_q), em.less(j, self.s_k)])
                        local[a.i] = em.value(arith.MinSIOp(i, em.index(self.s_q - 1)))
                        local[a.j] = em.value(arith.MinSIOp(j, em.index(self.s_k - 1)))
                        self.clone_score(ops, local, masked)
                        x = local.get(score, score)
                        x = em.value(arith.SelectOp(inside, x, minus_inf))
                    else:
                        self.clone_score(ops, local, masked)
                        x = local.get(score, score)
                        if masked and self.ragged_end:
                            x = em.value(arith.SelectOp(em.less(j, self.s_k), x, minus_inf))
                    cols.append(x)
                tile_out.append(cols)
            out.append(tile_out)
        return out

    def masked_dot(self, dot: SSAValue, i: SSAValue, j: SSAValue) -> SSAValue:
        """Returns a dot product, or −inf above the diagonal of a causal mask or past the end
        of the keys (the score is dot·scale, folded into the softmax's exponent)."""
        em = self.em
        minus_inf = em.f32(float("-inf"))
        if self.a.causal:
            dot = em.value(arith.SelectOp(em.less(i, j), minus_inf, dot))
        if self.ragged_end:
            dot = em.value(arith.SelectOp(em.less(j, self.s_k), dot, minus_inf))
        return dot

    def clone_score(self, ops: Sequence[Operation], local: Mapping, masked: bool) -> None:
        """Clones the score ops into `local`; unmasked, the causal add yields its other operand
        (its compare and select are left unused, and NVRTC drops them)."""
        add, kept = self.a.causal_mask or (None, None)
        for op in ops:
            if not masked and op is add:
                local[add.result] = local.get(kept, kept)
            else:
                self.em.op(op.clone(value_mapper=local))

    def softmax(
        self, x: list[list[list[SSAValue]]], alphas: list[SSAValue] | None = None
    ) -> list[list[list[SSAValue]]]:
        """Updates the running max and sum of the lane's rows, rescales O, returns P (with
        `alphas`, O is left alone and each row's factor appended there, in (m-tile, half)
        order, for `rescale_o` once no wgmma writes O):
        p = exp2(x·log2 e − M') with M' = max(M·log2 e, lowest finite f32). Where a score may
        be a finite value too low for x·log2 e (`_low_scores`), p = exp2((x − M')·log2 e) with
        M' = max(M, lowest finite f32) instead: a row whose scores are all the lowest finite
        value (a fill with torch's `finfo.min`) weighs them e^0, as the loop-level combine
        does, where x·log2 e = −inf would give the row 0."""
        em = self.em
        log2e, lowest = em.f32(LOG2E), em.f32(LOWEST_F32)
        probs = [[list(regs) for regs in tile_x] for tile_x in x]
        n_tiles = self.bn // MMA_N
        tile_max = [
            self.combine(
                arith.MaximumfOp, [x[mt][n][2 * h + c] for n in range(n_tiles) for c in range(2)]
            )
            for mt in range(self.m_tiles)
            for h in range(2)
        ]
        tile_max = self.quad(tile_max, arith.MaximumfOp)
        exponent = log2e
        if self.scale is not None:
            # x = dot·scale: the maximum of x is scale times that of the dot products, and
            # x·log2 e − M' is one FFMA of the dot product with scale·log2 e.
            scale = em.f32(self.scale)
            tile_max = [self.f(arith.MulfOp(t, scale)) for t in tile_max]
            exponent = em.f32(self.scale * LOG2E)
        for mt in range(self.m_tiles):
            for h in range(2):
                old = self.load(self.m, mt, h)
                new = self.f(arith.MaximumfOp(old, tile_max[2 * mt + h]))
                if self.exact:
                    floor = self.f(arith.MaximumfOp(new, lowest))
                    alpha = self.exp2_of_difference(old, floor, log2e)
                else:
                    floor = self.f(arith.MaximumfOp(self.f(arith.MulfOp(new, log2e)), lowest))
                    alpha = self.exp2(old, log2e, floor)
                for n in range(n_tiles):
                    for c in range(2):
                        if self.exact:
                            p = self.exp2_of_difference(x[mt][n][2 * h + c], floor, log2e)
                        elif n in self.fma_tiles:
                            p = self.exp2_on_fma(x[mt][n][2 * h + c], exponent, floor)
                        else:
                            p = self.exp2(x[mt][n][2 * h + c], exponent, floor)
                        probs[mt][n][2 * h + c] = p
                row_sum = self.combine(
                    arith.AddfOp,
                    [probs[mt][n][2 * h + c] for n in range(n_tiles) for c in range(2)],
                )
                scaled = self.f(arith.MulfOp(self.load(self.l, mt, h), alpha))
                self.store(self.f(arith.AddfOp(scaled, row_sum)), self.l, mt, h)
                self.store(new, self.m, mt, h)
                if alphas is None:
                    self.rescale_o(mt, h, alpha)
                else:
                    alphas.append(alpha)
        return probs

    def rescale_o(self, mt: int, h: int, alpha: SSAValue) -> None:
        """Multiplies the O accumulators of the lane's row `h` of m-tile `mt` by `alpha`."""
        for dt in range(self.head_v // MMA_N):
            for c in range(2):
                at = self.o_index(mt, dt, 2 * h + c)
                o = self.load(self.o, *at)
                self.store(self.f(arith.MulfOp(o, alpha)), self.o, *at)

    def exp2(self, x: SSAValue, log2e: SSAValue, floor: SSAValue) -> SSAValue:
        """Returns exp2(x·log2 e − floor): one FFMA and one MUFU.EX2 (p and alpha lie in [0, 1]:
        flushing subnormals to 0 is harmless)."""
        shifted = self.f(arith.SubfOp(self.f(arith.MulfOp(x, log2e)), floor))
        return self.f(fmath.Exp2Op(shifted, APPROXIMATE))

    def exp2_on_fma(self, x: SSAValue, log2e: SSAValue, floor: SSAValue) -> SSAValue:
        """Returns exp2(x·log2 e − floor) without MUFU (FA4's split of the exponentials between
        the units): t clamped to ≥ −126, n = ⌊t⌋, 2^(t − n) by the cubic `EXP2_CUBIC` (FFMAs),
        and n added to its exponent bits; 0 where t ≤ −126 (a masked key's −inf), as MUFU's
        `ex2.approx.ftz` gives (the cubic's value at 0 is just below 1, so at n = −126 the bits
        are those of a subnormal, never of a negative number or a NaN)."""
        em = self.em
        lowest = em.f32(-126.0)
        t = self.f(arith.SubfOp(self.f(arith.MulfOp(x, log2e)), floor))
        t = self.f(arith.MaximumfOp(t, lowest))
        whole = self.f(fmath.FloorOp(t))
        frac = self.f(arith.SubfOp(t, whole))
        *rest, last = EXP2_CUBIC
        p = em.f32(last)
        for c in reversed(rest):
            p = self.f(arith.AddfOp(self.f(arith.MulfOp(p, frac)), em.f32(c)))
        exponent = self.f(
            arith.MuliOp(
                self.f(arith.FPToSIOp(whole, i32)),
                self.f(arith.ConstantOp(IntegerAttr(1 << 23, i32))),
            )
        )
        bits = self.f(arith.AddiOp(self.f(arith.BitcastOp(p, i32)), exponent))
        seen = self.f(arith.CmpfOp(t, lowest, "ogt"))
        return self.f(arith.SelectOp(seen, self.f(arith.BitcastOp(bits, f32)), em.f32(0.0)))

    def exp2_of_difference(self, x: SSAValue, floor: SSAValue, log2e: SSAValue) -> SSAValue:
        """Returns exp2((x − floor)·log2 e): subtracting first, the row's maximum gets weight 1
        however low it is (x·log2 e overflows to −inf below LOWEST_BASE2)."""
        shifted = self.f(arith.MulfOp(self.f(arith.SubfOp(x, floor)), log2e))
        return self.f(fmath.Exp2Op(shifted, APPROXIMATE))

    def multiply_v(
        self, probs: list[list[list[SSAValue]]], v_smem: SSAValue, slot: SSAValue
    ) -> None:
        """Accumulates P·V into O; P's accumulator layout is the A-fragment layout, and each V
        fragment feeds both m-tiles."""
        em, element = self.em, self.a.element
        for kk in range(self.bn // MMA_K):
            a_regs = [self.p_fragment(probs[mt], kk) for mt in range(self.m_tiles)]
            for dd in range(self.head_v // (2 * MMA_N)):
                row = em.add(kk * MMA_K, em.add(self.lo8, self.r8))
                index = [slot, row, self.tile_column(v_smem, row, em.add(dd * 2 * MMA_N, self.hi8))]
                regs = em.op(tile.LdMatrixOp(v_smem, index, True)).results
                for mt in range(self.m_tiles):
                    for half in range(2):
                        dt = 2 * dd + half
                        old = [self.load(self.o, mt, dt, r) for r in range(4)]
                        b_regs = regs[2 * half : 2 * half + 2]
                        mma = tile.MmaSyncOp(element, a_regs[mt], b_regs, old)
                        for r, new in enumerate(em.op(mma).results):
                            self.store(new, self.o, mt, dt, r)

    def epilogue(self) -> None:
        """Runs the loop kernel's epilogue (acc / max(l, 1), cast, store) per accumulator; the
        division by a per-row value becomes one reciprocal per row and a multiply per element
        (at most 1.5 ulp of f32 apart, before the cast)."""
        em, a = self.em, self.a
        nest_ops = list(a.nest.body.block.ops)
        after = nest_ops[nest_ops.index(a.reduce) + 1 :]
        m, total, acc = a.reduce.res
        per_element = depends_on(after, [acc, a.d])
        divisions = [
            op
            for op in after
            if isinstance(op, arith.DivfOp) and op.lhs == acc and op.rhs not in per_element
        ]
        division = divisions[0] if len(divisions) == 1 else None
        program = [
            op for op in (*nest_ops[: nest_ops.index(a.reduce)], *after) if op is not division
        ]
        width = vector_width(after, a.d, 2, 2)
        width = width if self.head_v % width == 0 else 1
        one = em.f32(1.0)
        for mt in range(self.m_tiles):
            totals = self.quad([self.load(self.l, mt, h) for h in range(2)], arith.AddfOp)
            for h in range(2):
                i = self.row(mt, h)
                maximum = self.load(self.m, mt, h)
                with em.if_(em.less(i, self.s_q)) as (then, _, _), em.into(then):
                    local = dict(self.mapping) | {a.i: i, total: totals[h], m: maximum}
                    inverse = None
                    if division is not None:
                        for op in backward_slice([division.rhs], program, [acc, total, m]):
                            em.op(op.clone(value_mapper=local))
                        divisor = local.get(division.rhs, division.rhs)
                        inverse = self.f(arith.DivfOp(one, divisor))
                    for dt in range(self.head_v // MMA_N):
                        for c0 in range(0, 2, width):
                            d = em.add(em.mul(self.t, 2), dt * MMA_N + c0)
                            lanes = []
                            for c in range(c0, c0 + width):
                                o = self.load(self.o, *self.o_index(mt, dt, 2 * h + c))
                                lane = {acc: o, total: totals[h], m: maximum}
                                if inverse is not None:
                                    assert division is not None
                                    lane[division.result] = self.f(arith.MulfOp(o, inverse))
                                lanes.append(lane)
                            row_local = dict(self.mapping) | {a.i: i}
                            LaneEmitter(em, a.d, d, width).emit(program, row_local, lanes)
