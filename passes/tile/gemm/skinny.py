"""Schedule rule for GEMVs and skinny GEMMs (M ≤ 64 output rows): the weights streamed once
with 16-byte loads, every row of A multiplied with each weight vector while it is in registers.

Two layouts of the weights B, told apart by the matcher (`skinny_match.py`):

- `[N, K]` (a torch linear's weight, K contiguous): each warp owns `cols` output columns; its
  lanes walk K in 16-byte vectors of `vec` elements, `unroll` vectors a column in flight, and
  accumulate `rows` × `cols` partial sums (A's rows read as vectors through L1); XOR shuffles
  sum the lanes, and lane i mod 32 runs the epilogue of the i-th (row, column).
- `[K, N]` (`x @ w`, N contiguous): each lane owns `cols` vectors of `vec` adjacent columns; the
  block's warps split K row by row, `unroll` rows in flight, and accumulate `rows` × `cols` ×
  `vec` partial sums (A read as scalars broadcast over the warp); at the end the warps' sums
  meet once in shared memory, added in warp order, and the block's threads run the epilogues.

Blocks cover M in chunks of `rows` (the chunk index varying fastest, so the blocks reading the
same weights run together and share them in L2), then column groups, then the batch. Columns
and rows past the data read the last one in range; their sums are never stored. Where the grid
has too few warps for the SMs (`skinny_plan.choose_splits`), the kernel is first split over K
into a partial-sum kernel and a fold that applies the epilogue once (`skinny_split.py`).
"""

from __future__ import annotations

from dataclasses import replace

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, f32, i64
from xdsl.ir import Block, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.emit import Emitter, LaneEmitter, Mapping, emit_sequential, inline_region
from tinyopt.passes.tile.gemm.contraction_match import match_contraction
from tinyopt.passes.tile.gemm.skinny_match import SkinnyContraction, match_skinny
from tinyopt.passes.tile.gemm.skinny_plan import (
    RESIDENT_WARPS,
    SkinnyPlan,
    auto_refusal,
    blocks,
    choose_shape,
    choose_splits,
    column_groups,
    default_threads,
    evicted_loads,
    evicted_sides,
    shape_refusal,
    weight_vector,
)
from tinyopt.passes.tile.gemm.skinny_split import PARTIAL, SPLIT_IN_A_PLAN, split_skinny
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.rule import Rule


class SkinnyRule(Rule[SkinnyContraction, SkinnyPlan]):
    """Streams the weights of a contraction with few output rows (GEMV, decode linears)."""

    name = "skinny"
    reads = "threads vec rows=0,1,2,4,8,16 cols=0,1,2,4,8 splitk evict=auto,off"
    plan_type = SkinnyPlan
    selector = ("skinny", "on")

    def considered(self, knobs: Knobs) -> bool:
        # An explicit mma (a GEMM rule asked for by name) leaves the kernel to that rule.
        if knobs.schedule != "auto" or knobs.skinny == "off":
            return False
        return knobs.skinny == "on" or knobs.mma == "auto"

    def match(self, kernel: loop.KernelOp) -> SkinnyContraction | str:
        return match_skinny(kernel)

    def plan(self, kernel: loop.KernelOp, c: SkinnyContraction, knobs: Knobs) -> SkinnyPlan | str:
        if knobs.skinny == "auto" and (why := auto_refusal(c)):
            return why
        vec = weight_vector(c, knobs.vec or 16)
        threads = knobs.threads or default_threads(c)
        rows, cols, unroll = choose_shape(c, threads, vec, knobs.rows, knobs.cols)
        plan = SkinnyPlan(threads, vec, rows, cols, unroll, 1)
        if refusal := shape_refusal(c, plan):
            return refusal
        readers = -(-c.extents[1] // rows)
        evict = evicted_sides(knobs.evict, c, readers)
        return replace(plan, splits=self._splits(kernel, c, plan, knobs), evict=evict)

    def _splits(
        self, kernel: loop.KernelOp, c: SkinnyContraction, plan: SkinnyPlan, knobs: Knobs
    ) -> int:
        """1 for a split's partial kernel; `splitk` where the planner could not split (the
        M = 1 forms it does not match) and it divides K; else the heuristic's."""
        k = c.extents[3]
        if PARTIAL in kernel.attributes:
            return 1
        if knobs.splitk > 1:
            fits = k % knobs.splitk == 0 and k >= 2 * knobs.splitk
            return knobs.splitk if fits and match_contraction(kernel) is None else 1
        return choose_splits(c, plan, self.target.sms)

    def check(self, kernel: loop.KernelOp, c: SkinnyContraction, plan: SkinnyPlan) -> str | None:
        if plan.splits != 1:
            return SPLIT_IN_A_PLAN
        return shape_refusal(c, plan)

    def rewrite(
        self, module: ModuleOp, kernel: loop.KernelOp, c: SkinnyContraction, plan: SkinnyPlan
    ) -> list[loop.KernelOp]:
        return split_skinny(module, kernel, c, plan.splits) if plan.splits > 1 else []

    def emit(
        self,
        kernel: loop.KernelOp,
        c: SkinnyContraction,
        plan: SkinnyPlan,
        rewriter: PatternRewriter,
    ) -> None:
        new, em, mapping = new_kernel(kernel, (blocks(c, plan), 1, 1), (plan.threads, 1, 1))
        new.attributes["tile.min_blocks"] = IntegerAttr(max(1, RESIDENT_WARPS // plan.warps), i64)
        emitter_type = _AlongK if c.k_contiguous else _AlongN
        emitter_type(em, c, plan, mapping).emit()
        replace_kernel(rewriter, kernel, new)


class _SkinnyEmitter:
    """What both layouts share: the block's place in the grid, the rows, the K loop over full
    unrolled iterations and a guarded tail, and the accumulation of products."""

    def __init__(self, em: Emitter, c: SkinnyContraction, plan: SkinnyPlan, mapping: Mapping):
        self.em, self.c, self.plan, self.mapping = em, c, plan, mapping
        self.batch, self.m, self.n, self.k = c.extents
        self.evicted = evicted_loads(c, plan.evict)
        """The loads whose 128-bit loads carry the L2 evict-first hint (`evict`)."""

    def emit(self) -> None:
        em, c, plan = self.em, self.c, self.plan
        for op in c.prologue:
            em.op(op.clone(value_mapper=self.mapping))
        chunks = -(-self.m // plan.rows)
        block = em.value(tile.BlockIdOp("x"))
        b, self.group, chunk = em.delinearize(block, [self.batch, column_groups(c, plan), chunks])
        if c.batch_iv is not None:
            self.mapping[c.batch_iv] = b
        tid = em.value(tile.ThreadIdOp("x"))
        self.warp, self.lane = em.div(tid, 32), em.rem(tid, 32)
        self.tid = tid
        self.rows = [em.add(em.mul(chunk, plan.rows), r) for r in range(plan.rows)]
        self.row_reads = [self.clamp(r, self.m) for r in self.rows]
        self.init = self.mapping.get(c.reduce.init[0], c.reduce.init[0])
        self.finish(self.k_loop(self.columns()))

    def clamp(self, index: SSAValue, extent: int, last: int | None = None) -> SSAValue:
        """`index`, or `last` (default extent − 1) where it is past it."""
        last = extent - 1 if last is None else last
        return self.em.value(arith.MinSIOp(index, self.em.index(last)))

    def k_loop(self, columns: list[SSAValue]) -> list[SSAValue]:
        """Accumulates the sums of the thread's K positions; returns them."""
        em, plan = self.em, self.plan
        per_iteration, per_step = self.k_per_iteration(), self.k_per_step()
        full = self.k // per_iteration
        state = [self.init] * self.accumulators()
        if full:
            with em.for_loop(0, full, 1, state) as (it, carried, for_op):
                origin = em.mul(it, per_iteration)
                starts = [em.add(origin, self.k_offset(u)) for u in range(plan.unroll)]
                em.op(scf.YieldOp(*self.step(starts, columns, carried)))
            state = list(for_op.results)
        left = self.k - full * per_iteration
        for t in range(-(-left // per_step)):
            start = em.add(full * per_iteration, self.k_offset(t))
            with em.if_(em.less(start, self.k), [f32] * len(state)) as (then, other, if_op):
                with em.into(then):
                    em.op(scf.YieldOp(*self.step([start], columns, state)))
                assert other is not None
                other.add_op(scf.YieldOp(*state))
            state = list(if_op.results)
        return state

    def add_products(
        self, state: list[SSAValue], a: list[SSAValue], b: list[SSAValue]
    ) -> list[SSAValue]:
        """state[i] + a[i]·b[i] by the contraction's product and combine."""
        c = self.c
        out = []
        for acc, x, y in zip(state, a, b, strict=True):
            product = self.em.op(c.product.clone(value_mapper={c.a_value: x, c.b_value: y}))
            out += inline_region(self.em, c.reduce.combine, [acc, product.results[0]], {})
        return out

    def side(self, ops, value: SSAValue, bound: Mapping, iv: SSAValue, start: SSAValue, width: int):
        """The `width` lane values of an operand side whose loads run along `iv` from `start`."""
        lanes = LaneEmitter(self.em, iv, start, width, evict_first=self.evicted)
        lanes.emit(ops, self.mapping | bound)
        return [m.get(value, value) for m in lanes.lanes]

    def epilogue(self, total: SSAValue, row: SSAValue, column: SSAValue) -> None:
        """The kernel's epilogue for one (row, column), guarded to the output."""
        em, c = self.em, self.c
        inside = [em.less(row, self.m)] if c.m_iv is not None or self.plan.rows > 1 else []
        inside.append(em.less(column, self.n))
        with em.when(inside):
            values = {c.reduce.res[0]: total, c.n_iv: column}
            if c.m_iv is not None:
                values[c.m_iv] = row
            emit_sequential(em, c.epilogue, self.mapping | values)


class _AlongK(_SkinnyEmitter):
    """`[N, K]` weights: lanes split K, shuffles sum them."""

    def columns(self) -> list[SSAValue]:
        em, plan = self.em, self.plan
        first = em.mul(em.add(em.mul(self.group, plan.warps), self.warp), plan.cols)
        self.cols = [em.add(first, j) for j in range(plan.cols)]
        return [self.clamp(j, self.n) for j in self.cols]

    def accumulators(self) -> int:
        return self.plan.rows * self.plan.cols

    def k_per_step(self) -> int:
        return 32 * self.plan.vec

    def k_per_iteration(self) -> int:
        return self.k_per_step() * self.plan.unroll

    def k_offset(self, u: int) -> SSAValue:
        return self.em.add(self.em.mul(self.lane, self.plan.vec), u * self.k_per_step())

    def step(
        self, starts: list[SSAValue], columns: list[SSAValue], state: list[SSAValue]
    ) -> list[SSAValue]:
        c, vec, cols = self.c, self.plan.vec, len(columns)
        state = list(state)
        weights = [
            [self.side(c.b_side, c.b_value, {c.n_iv: n}, c.k_iv, s, vec) for n in columns]
            for s in starts
        ]
        for s, row_weights in zip(starts, weights, strict=True):
            for r, row in enumerate(self.row_reads):
                bound = {c.m_iv: row} if c.m_iv is not None else {}
                a = self.side(c.a_side, c.a_value, bound, c.k_iv, s, vec)
                for j, w in enumerate(row_weights):
                    i = r * cols + j
                    (state[i],) = self._dot(state[i], a, w)
        return state

    def _dot(self, acc: SSAValue, a: list[SSAValue], w: list[SSAValue]) -> list[SSAValue]:
        state = [acc]
        for x, y in zip(a, w, strict=True):
            state = self.add_products(state, [x], [y])
        return state

    def finish(self, state: list[SSAValue]) -> None:
        em, plan = self.em, self.plan
        totals = list(em.op(tile.WarpReduceOp(state, _tuple_combine(self.c, len(state)))).results)
        for r, row in enumerate(self.rows):
            for j, column in enumerate(self.cols):
                i = r * plan.cols + j
                mine = em.value(arith.CmpiOp(self.lane, em.index(i % 32), "eq"))
                with em.when([mine]):
                    self.epilogue(totals[i], row, column)


class _AlongN(_SkinnyEmitter):
    """`[K, N]` weights: lanes own column vectors, warps split K, shared memory sums warps."""

    def columns(self) -> list[SSAValue]:
        em, plan = self.em, self.plan
        self.span = 32 * plan.vec * plan.cols
        first = em.add(em.mul(self.group, self.span), em.mul(self.lane, plan.vec))
        return [
            self.clamp(em.add(first, j * 32 * plan.vec), self.n, self.n - plan.vec)
            for j in range(plan.cols)
        ]

    def accumulators(self) -> int:
        return self.plan.rows * self.plan.cols * self.plan.vec

    def k_per_step(self) -> int:
        return self.plan.warps

    def k_per_iteration(self) -> int:
        return self.plan.warps * self.plan.unroll

    def k_offset(self, u: int) -> SSAValue:
        return self.em.add(self.warp, u * self.plan.warps)

    def step(
        self, starts: list[SSAValue], columns: list[SSAValue], state: list[SSAValue]
    ) -> list[SSAValue]:
        c, vec = self.c, self.plan.vec
        state = list(state)
        weights = [
            [self.side(c.b_side, c.b_value, {c.k_iv: k}, c.n_iv, n, vec) for n in columns]
            for k in starts
        ]
        for k, row_weights in zip(starts, weights, strict=True):
            for r, row in enumerate(self.row_reads):
                bound = {c.k_iv: k} | ({c.m_iv: row} if c.m_iv is not None else {})
                a = self._scalar_side(bound)
                for j, w in enumerate(row_weights):
                    first = (r * len(columns) + j) * vec
                    state[first : first + vec] = self.add_products(
                        state[first : first + vec], [a] * vec, w
                    )
        return state

    def _scalar_side(self, bound: Mapping) -> SSAValue:
        """A's value at one K row (it does not vary with the column)."""
        c = self.c
        local = self.mapping | bound
        emit_sequential(self.em, c.a_side, local)
        return local.get(c.a_value, c.a_value)

    def finish(self, state: list[SSAValue]) -> None:
        em, plan = self.em, self.plan
        count = len(state)
        sums = em.value(tile.AllocOp(tile.memref_in([plan.warps, count, 32], f32, tile.SHARED)))
        for i, value in enumerate(state):
            em.op(memref.StoreOp.get(value, sums, [self.warp, em.index(i), self.lane]))
        em.op(tile.BarrierOp())
        outputs = count * 32
        for t in range(-(-outputs // plan.threads)):
            flat = em.add(self.tid, t * plan.threads)
            with em.when([em.less(flat, outputs)] if (t + 1) * plan.threads > outputs else []):
                i, lane = em.div(flat, 32), em.rem(flat, 32)
                total = self.init
                for w in range(plan.warps):
                    part = em.value(memref.LoadOp.get(sums, [em.index(w), i, lane]))
                    (total,) = inline_region(em, self.c.reduce.combine, [total, part], {})
                per_row = plan.cols * plan.vec
                r, within = em.div(i, per_row), em.rem(i, per_row)
                j, v = em.div(within, plan.vec), em.rem(within, plan.vec)
                row = em.add(self.rows[0], r)
                column = em.add(
                    em.add(em.mul(self.group, self.span), em.mul(j, 32 * plan.vec)),
                    em.add(em.mul(lane, plan.vec), v),
                )
                self.epilogue(total, row, column)


def _tuple_combine(c: SkinnyContraction, count: int) -> Region:
    """The combine region of `count` sums side by side: the contraction's combine on each."""
    block = Block(arg_types=[f32] * (2 * count))
    em = Emitter(block)
    out = []
    for i in range(count):
        args = [block.args[i], block.args[count + i]]
        out += inline_region(em, c.reduce.combine, args, {})
    block.add_op(tile.YieldOp(*out))
    return Region(block)
