"""Schedule rule for f16/bf16 skinny GEMMs on tensor cores (2 ≤ M ≤ 64 rows, `[N, K]` weights):
the "swap AB" GEMV, Yᵀ = W·Xᵀ with `mma.sync` m16n8k16, where 16 weight rows (output columns)
are the product's M side and 8 activation rows its N side, so no tensor-core row is spent on a
padded activation row past the next multiple of 8.

Each warp owns `strips` strips of 16 weight rows. In a 32-wide K chunk, lane l (quad row
r = l/4, quad q = l%4) loads the 8 consecutive weights at K offset 8q of rows r and r + 8 of
each strip (16-byte loads, straight into registers: no shared memory, no `ldmatrix`), and the
8 activations at the same K offsets of activation row r of each 8-row tile (16-byte loads
through L1, which the block's warps share). The fragments of m16n8k16 want lane l to hold
K positions 2q, 2q+1 and 8+2q, 8+2q+1 of a 16-wide step; a sum over K does not depend on the
order of K, so the chunk's K is permuted alike for both operands: step 0 takes the lane's
elements 0-1 and 2-3 as those positions, step 1 elements 4-5 and 6-7. Every loaded weight thus
feeds a product, and the per-lane K layout of A and B agree.

`unroll` chunks make one loop iteration, every load of which is issued before its products;
with `stages=2` an iteration first loads the next one's registers (carried by the loop), so a
warp always has loads in flight. A block's warps split the iterations `kwarps` ways and sum
their accumulators once in shared memory. A K tail past the last whole chunk reads zeros.
Accumulator d of strip s and row tile t holds output (row 8t + 2q + d%2, column
16s + r + 8·(d/2)); the epilogue runs there, guarded to the output. Blocks cover
`warps / kwarps × strips × 16` output columns, then the batch; where that leaves half the SMs
idle (`skinny_mma_plan.choose_splits`) the kernel is first split over K into a partial-sum
kernel and a fold that applies the epilogue once (the skinny rule's `skinny_split.py`).
"""

from __future__ import annotations

from dataclasses import replace

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import FloatAttr, ModuleOp, f32
from xdsl.ir import Attribute, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.emit import (
    Emitter,
    LaneEmitter,
    Mapping,
    emit_sequential,
    inline_region,
)
from tinyopt.passes.tile.gemm.contraction_match import match_contraction
from tinyopt.passes.tile.gemm.skinny_match import SkinnyContraction, match_skinny
from tinyopt.passes.tile.gemm.skinny_mma_plan import (
    CHUNK,
    ROW_TILE,
    STRIP,
    CHUNKS_IN_FLIGHT,
    SkinnyMmaPlan,
    auto_refusal,
    blocks,
    choose_kwarps,
    choose_splits,
    choose_strips,
    column_groups,
    default_threads_and_stages,
    row_tiles,
    shape_refusal,
    tensor_core_element,
    weight_vector,
)
from tinyopt.passes.tile.gemm.skinny_plan import evicted_loads, evicted_sides
from tinyopt.passes.tile.gemm.skinny_split import PARTIAL, SPLIT_IN_A_PLAN, split_skinny
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.rule import Rule

LANE_ELEMENTS = 8
"""Consecutive K elements a lane covers in one chunk (two m16n8k16 steps, 16 bytes)."""


class SkinnyMmaRule(Rule[SkinnyContraction, SkinnyMmaPlan]):
    """Streams the weights of an f16/bf16 skinny GEMM through `mma.sync`, weights as A."""

    name = "skinny_mma"
    reads = "threads=0,128,256,512 vec=0,4,8 kwarps=0,1,2,4,8,16 stages splitk evict=auto,off"
    plan_type = SkinnyMmaPlan
    selector = ("skinny_mma", "on")

    def considered(self, knobs: Knobs) -> bool:
        # An explicit mma (a GEMM rule asked for by name) or skinny=on (the CUDA-core skinny
        # rule) leaves the kernel to that rule, unless skinny_mma=on insists.
        if knobs.schedule != "auto" or knobs.skinny_mma == "off":
            return False
        return knobs.skinny_mma == "on" or (knobs.mma == "auto" and knobs.skinny != "on")

    def match(self, kernel: loop.KernelOp) -> SkinnyContraction | str:
        c = match_skinny(kernel)
        if isinstance(c, str):
            return c
        if not c.k_contiguous:
            return "[K, N] weights: its 16-byte weight loads need K contiguous ([N, K])"
        if tensor_core_element(c) is None:
            return "not a product of f16 or bf16 operands (one type)"
        return c

    def plan(
        self, kernel: loop.KernelOp, c: SkinnyContraction, knobs: Knobs
    ) -> SkinnyMmaPlan | str:
        if knobs.skinny_mma == "auto" and (why := auto_refusal(c)):
            return why
        vec = weight_vector(c, knobs.vec or LANE_ELEMENTS)
        strips = choose_strips(c)
        threads, stages = default_threads_and_stages(c.extents[1])
        threads, stages = knobs.threads or threads, knobs.stages or stages
        unroll = max(1, CHUNKS_IN_FLIGHT // (strips * stages))
        plan = SkinnyMmaPlan(threads, vec, strips, unroll, 1, knobs.kwarps or 1, stages)
        if not knobs.kwarps:
            plan = replace(plan, kwarps=choose_kwarps(c, plan, self.target.sms))
        if refusal := shape_refusal(c, plan):
            return refusal
        # A block holds every row of M: the weights' only readers are its columns' block.
        evict = evicted_sides(knobs.evict, c, 1)
        return replace(plan, splits=self._splits(kernel, c, plan, knobs), evict=evict)

    def _splits(
        self, kernel: loop.KernelOp, c: SkinnyContraction, plan: SkinnyMmaPlan, knobs: Knobs
    ) -> int:
        """1 for a split's partial kernel; `splitk` where the planner could not split (the
        forms without a row loop) and it divides K in whole vectors; else the heuristic's."""
        k = c.extents[3]
        if PARTIAL in kernel.attributes:
            return 1
        if knobs.splitk > 1:
            fits = k % (knobs.splitk * plan.vec) == 0 and k >= 2 * knobs.splitk
            return knobs.splitk if fits and match_contraction(kernel) is None else 1
        return choose_splits(c, plan, self.target.sms)

    def check(self, kernel: loop.KernelOp, c: SkinnyContraction, plan: SkinnyMmaPlan) -> str | None:
        if plan.splits != 1:
            return SPLIT_IN_A_PLAN
        return shape_refusal(c, plan)

    def rewrite(
        self, module: ModuleOp, kernel: loop.KernelOp, c: SkinnyContraction, plan: SkinnyMmaPlan
    ) -> list[loop.KernelOp]:
        return split_skinny(module, kernel, c, plan.splits) if plan.splits > 1 else []

    def emit(
        self,
        kernel: loop.KernelOp,
        c: SkinnyContraction,
        plan: SkinnyMmaPlan,
        rewriter: PatternRewriter,
    ) -> None:
        element = tensor_core_element(c)
        assert element is not None
        new, em, mapping = new_kernel(kernel, (blocks(c, plan), 1, 1), (plan.threads, 1, 1))
        _SwapAbEmitter(em, c, plan, element, mapping).emit()
        replace_kernel(rewriter, kernel, new)


class _SwapAbEmitter:
    """Emits one block: its weight strips, the K loop of `mma.sync` products, the epilogue."""

    def __init__(
        self,
        em: Emitter,
        c: SkinnyContraction,
        plan: SkinnyMmaPlan,
        element: Attribute,
        mapping: Mapping,
    ) -> None:
        self.em, self.c, self.plan, self.element, self.mapping = em, c, plan, element, mapping
        self.batch, self.m, self.n, self.k = c.extents
        self.evicted = evicted_loads(c, plan.evict)
        """The loads whose 128-bit loads carry the L2 evict-first hint (`evict`)."""
        self.tiles = row_tiles(self.m)

    def emit(self) -> None:
        em, c, plan = self.em, self.c, self.plan
        for op in c.prologue:
            em.op(op.clone(value_mapper=self.mapping))
        block = em.value(tile.BlockIdOp("x"))
        b, group = em.delinearize(block, [self.batch, column_groups(c, plan)])
        if c.batch_iv is not None:
            self.mapping[c.batch_iv] = b
        tid = em.value(tile.ThreadIdOp("x"))
        warp, self.lane = em.div(tid, 32), em.rem(tid, 32)
        self.warp_n = em.rem(warp, plan.column_warps) if plan.kwarps > 1 else warp
        self.warp_k = em.div(warp, plan.column_warps) if plan.kwarps > 1 else None
        quad_row = em.div(self.lane, 4)
        self.quad = em.rem(self.lane, 4)
        first = em.add(em.mul(em.mul(group, plan.column_warps), plan.strips * STRIP), quad_row)
        first = em.add(first, em.mul(self.warp_n, plan.strips * STRIP))
        # Weight rows r and r + 8 of each strip: the A fragment's two row halves.
        self.columns = [
            em.add(first, s * STRIP + half * 8) for s in range(plan.strips) for half in (0, 1)
        ]
        column_reads = [self._clamp(n, self.n) for n in self.columns]
        row_reads = [self._clamp(em.add(quad_row, t * ROW_TILE), self.m) for t in range(self.tiles)]
        self.init = self.mapping.get(c.reduce.init[0], c.reduce.init[0])
        state = self._k_loop(column_reads, row_reads)
        if self.warp_k is None:
            self._epilogues(state)
            return
        self._sum_warps(state)

    def _clamp(self, index: SSAValue, extent: int) -> SSAValue:
        """`index`, or extent − 1 where it is past it (its values are never stored)."""
        return self.em.value(arith.MinSIOp(index, self.em.index(extent - 1)))

    def _k_loop(self, columns: list[SSAValue], rows: list[SSAValue]) -> list[SSAValue]:
        """Accumulates the products over K: whole iterations of `unroll` chunks (with kwarps,
        every `kwarps`-th from the warp's own), then the chunks left, the last guarded where it
        runs past K (with kwarps, each owned by one warp, the others reading zeros); returns
        the accumulators."""
        em, plan = self.em, self.plan
        per_iteration = CHUNK * plan.unroll
        full = self.k // per_iteration
        state = [self.init] * (plan.strips * self.tiles * 4)
        if full:
            first = self.warp_k if self.warp_k is not None else 0
            if plan.stages == 2:
                state = self._pipelined(first, full, columns, rows, state)
            else:
                with em.for_loop(first, full, plan.kwarps, state) as (it, carried, for_op):
                    starts = self._starts(it)
                    em.op(scf.YieldOp(*self._chunks(starts, columns, rows, carried, False)))
                state = list(for_op.results)
        done = full * per_iteration
        tail = [done + u * CHUNK for u in range(-(-(self.k - done) // CHUNK))]
        if tail and self.warp_k is not None:
            for j, start in enumerate(tail):
                owner = self._is_warp((full + j) % plan.kwarps)
                state = self._chunks([em.index(start)], columns, rows, state, True, owner)
        elif tail:
            ragged = tail[-1] + CHUNK > self.k
            starts = [em.index(s) for s in tail]
            whole = starts[:-1] if ragged else starts
            if whole:
                state = self._chunks(whole, columns, rows, state, guarded=False)
            if ragged:
                state = self._chunks(starts[-1:], columns, rows, state, guarded=True)
        return state

    def _starts(self, iteration: SSAValue) -> list[SSAValue]:
        """The K offsets of an iteration's `unroll` chunks."""
        origin = self.em.mul(iteration, CHUNK * self.plan.unroll)
        return [self.em.add(origin, u * CHUNK) for u in range(self.plan.unroll)]

    def _pipelined(
        self,
        first: SSAValue | int,
        full: int,
        columns: list[SSAValue],
        rows: list[SSAValue],
        state: list[SSAValue],
    ) -> list[SSAValue]:
        """The whole iterations with `stages=2`: each loads the registers of the warp's next
        iteration (its last, again, at the end: never past K) before the products of the ones
        the previous iteration loaded, so a warp always has an iteration's loads in flight."""
        em, plan = self.em, self.plan
        last = em.index(full - 1)

        def clamped(iteration: SSAValue | int) -> SSAValue:
            index = iteration if isinstance(iteration, SSAValue) else em.index(iteration)
            return em.value(arith.MinSIOp(index, last))

        ahead = self._loads(self._starts(clamped(first)), columns, rows, False)
        with em.for_loop(first, full, plan.kwarps, [*state, *ahead]) as (it, carried, for_op):
            current, loaded = carried[: len(state)], carried[len(state) :]
            following = self._starts(clamped(em.add(it, plan.kwarps)))
            following = self._loads(following, columns, rows, False)
            em.op(scf.YieldOp(*self._products(loaded, current), *following))
        return list(for_op.results[: len(state)])

    def _is_warp(self, k_warp: int) -> SSAValue:
        """Whether this warp is the block's `k_warp`-th along K."""
        assert self.warp_k is not None
        return self.em.value(arith.CmpiOp(self.warp_k, self.em.index(k_warp), "eq"))

    def _sum_warps(self, state: list[SSAValue]) -> None:
        """With kwarps: every K warp but the first stores its accumulators to shared memory,
        and the first adds them to its own in warp order and runs the epilogues."""
        em, plan = self.em, self.plan
        shape = [plan.kwarps - 1, plan.column_warps, len(state), 32]
        sums = em.value(tile.AllocOp(tile.memref_in(shape, f32, tile.SHARED)))
        first = self._is_warp(0)
        with em.when([em.less(em.index(0), self.warp_k)]):
            slot = em.add(self.warp_k, -1)
            for i, value in enumerate(state):
                em.op(memref.StoreOp.get(value, sums, [slot, self.warp_n, em.index(i), self.lane]))
        em.op(tile.BarrierOp())
        with em.when([first]):
            totals = []
            for i, total in enumerate(state):
                for w in range(plan.kwarps - 1):
                    at = [em.index(w), self.warp_n, em.index(i), self.lane]
                    part = em.value(memref.LoadOp.get(sums, at))
                    (total,) = inline_region(em, self.c.reduce.combine, [total, part], {})
                totals.append(total)
            self._epilogues(totals)

    def _chunks(
        self,
        starts: list[SSAValue],
        columns: list[SSAValue],
        rows: list[SSAValue],
        state: list[SSAValue],
        guarded: bool,
        owner: SSAValue | None = None,
    ) -> list[SSAValue]:
        """The products of the 32-wide K chunks at `starts`: every load first, then two
        m16n8k16 steps per (chunk, strip, row tile). `owner`: the condition under which this
        warp reads the chunks (else zeros)."""
        loaded = self._loads(starts, columns, rows, guarded, owner)
        return self._products(loaded, state)

    def _loads(
        self,
        starts: list[SSAValue],
        columns: list[SSAValue],
        rows: list[SSAValue],
        guarded: bool,
        owner: SSAValue | None = None,
    ) -> list[SSAValue]:
        """The lane's registers for the chunks at `starts`, flat: per chunk, the weight pairs
        of each column (4 a column), then the activation pairs of each row tile (4 a tile)."""
        em, c = self.em, self.c
        out: list[SSAValue] = []
        for start in starts:
            k = em.add(start, em.mul(self.quad, LANE_ELEMENTS))
            for n in columns:
                weight = self._lane_elements(c.b_side, c.b_value, {c.n_iv: n}, k, guarded, owner)
                out += self._pairs(weight)
            for row in rows:
                bound = {c.m_iv: row} if c.m_iv is not None else {}
                activation = self._lane_elements(c.a_side, c.a_value, bound, k, guarded, owner)
                out += self._pairs(activation)
        return out

    def _products(self, loaded: list[SSAValue], state: list[SSAValue]) -> list[SSAValue]:
        """Accumulates the products of `_loads`' registers into `state`."""
        em, plan = self.em, self.plan
        per_chunk = 4 * (2 * plan.strips + self.tiles)
        state = list(state)
        for first in range(0, len(loaded), per_chunk):
            chunk = loaded[first : first + per_chunk]
            a = [chunk[4 * j : 4 * j + 4] for j in range(2 * plan.strips)]
            xs = chunk[8 * plan.strips :]
            for t in range(self.tiles):
                x = xs[4 * t : 4 * t + 4]
                for s in range(plan.strips):
                    low, high = a[2 * s], a[2 * s + 1]
                    i = (s * self.tiles + t) * 4
                    # Register pairs 0-1 make the chunk's first k16 step, 2-3 its second.
                    for step in (0, 2):
                        fragment_a = [low[step], high[step], low[step + 1], high[step + 1]]
                        fragment_b = [x[step], x[step + 1]]
                        mma = tile.MmaSyncOp(self.element, fragment_a, fragment_b, state[i : i + 4])
                        state[i : i + 4] = list(em.op(mma).results)
        return state

    def _lane_elements(
        self,
        ops,
        value: SSAValue,
        bound: Mapping,
        start: SSAValue,
        guarded: bool,
        owner: SSAValue | None = None,
    ) -> list[SSAValue]:
        """An operand side's 8 values at K = start … start + 7 as the element type, in vectors
        of `vec`; with `guarded`, a vector past K (or, with `owner`, one this warp does not
        own) reads K = 0 and gives zeros."""
        em, c, vec = self.em, self.c, self.plan.vec
        values: list[SSAValue] = []
        for j in range(0, LANE_ELEMENTS, vec):
            k = em.add(start, j)
            inside = em.less(k, self.k) if guarded else None
            if inside is not None and owner is not None:
                inside = em.all_of([inside, owner])
            if inside is not None:
                k = em.value(arith.SelectOp(inside, k, em.index(0)))
            lanes = LaneEmitter(em, c.k_iv, k, vec, evict_first=self.evicted)
            lanes.emit(ops, self.mapping | bound)
            got = [self._narrow(m.get(value, value)) for m in lanes.lanes]
            if inside is not None:
                zero = em.value(arith.ConstantOp(FloatAttr(0.0, self.element)))
                got = [em.value(arith.SelectOp(inside, v, zero)) for v in got]
            values += got
        return values

    def _narrow(self, value: SSAValue) -> SSAValue:
        """A side's f32 value as the element type: the loaded value itself where it was only
        widened (its bits go to the tensor core unconverted), else rounded to nearest even
        (a fused prologue's result, like autocast)."""
        if isinstance(value.owner, arith.ExtFOp) and value.owner.input.type == self.element:
            return value.owner.input
        return self.em.value(arith.TruncFOp(value, self.element))

    def _pairs(self, values: list[SSAValue]) -> list[SSAValue]:
        """Adjacent values packed two to a register (low half first)."""
        em = self.em
        return [
            em.value(tile.PackOp(values[i], values[i + 1], self.element))
            for i in range(0, len(values), 2)
        ]

    def _epilogues(self, state: list[SSAValue]) -> None:
        """The kernel's epilogue at each accumulator's (row, column), guarded to the output."""
        em, c = self.em, self.c
        pair = em.mul(self.quad, 2)
        for s in range(self.plan.strips):
            for t in range(self.tiles):
                for d in range(4):
                    row = em.add(pair, t * ROW_TILE + d % 2)
                    column = self.columns[2 * s + d // 2]
                    inside = [em.less(row, self.m), em.less(column, self.n)]
                    with em.when(inside):
                        values = {c.reduce.res[0]: state[(s * self.tiles + t) * 4 + d]}
                        values[c.n_iv] = column
                        if c.m_iv is not None:
                            values[c.m_iv] = row
                        emit_sequential(em, c.epilogue, self.mapping | values)
