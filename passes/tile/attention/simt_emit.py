"""Emits the SIMT flash-attention block schedule from its geometry (simt_plan.py).

Per key tile t of one block (two barriers, each copy in flight during one compute phase):

    wait for K(t), barrier      K(t) visible; every thread is past P·V(t-1): V and P are free
    issue V(t)                  cp.async (16-byte copies) where V is a plain f32 load
    S = Q·K(t)ᵀ                 per thread tm×4 FMAs per head-dim step, 16-byte shared reads
    mask, online softmax        in registers; each row's max across its TX lanes by shuffles
    P → shared memory
    wait for V(t), barrier      V(t) and P visible; every thread is past S(t): K is free
    issue K(t+1)
    O += P·V(t)                 per thread tm×(vw·groups) FMAs per key, 16-byte shared reads

The running max m and O are per thread and row; the sum l is per thread (its own keys, against
the row's common max) and summed across the row's lanes once, in the epilogue.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, memref, scf
from xdsl.dialects import math as fmath
from xdsl.dialects.builtin import IndexType, f32
from xdsl.ir import Block, Operation, Region, SSAValue

from tinyopt.dialects import loop, tile
from tinyopt.passes.loop_rewrites.flash_attention import backward_slice
from tinyopt.passes.loop_rewrites.online_softmax import LOWEST_F32
from tinyopt.passes.tile.attention.attention_match import Attention
from tinyopt.passes.tile.attention.key_limit import KeyLimit, tile_seen_keys
from tinyopt.passes.tile.attention.mma_sync import (
    APPROXIMATE,
    LOG2E,
    _low_scores,
    _scale,
    _Side,
)
from tinyopt.passes.tile.attention.simt_plan import KEYS_PER_THREAD, Geometry
from tinyopt.passes.tile.emit import (
    Emitter,
    LaneEmitter,
    Mapping,
    depends_on,
    is_contiguous,
    vector_width,
)

COPY_WIDTH = 4
"""Floats per `cp.async` copy and per staged vector (16 bytes)."""


def copied_f32_load(side: _Side) -> memref.LoadOp | None:
    """Returns the one f32 load a side is, when `cp.async` can copy it in 16-byte pieces: only
    index arithmetic besides it, rows contiguous along the side's columns; else None."""
    loads = [op for op in side.ops if isinstance(op, memref.LoadOp)]
    if len(loads) != 1 or (load := loads[0]).res.type != f32 or side.value != load.res:
        return None
    for op in side.ops:
        index_math = op.results and all(isinstance(r.type, IndexType) for r in op.results)
        if op is not load and not index_math:
            return None
    if not is_contiguous(load.indices, side.col_iv, depends_on(side.ops, [side.col_iv])):
        return None
    width = vector_width([load], side.col_iv, side.cols, COPY_WIDTH)
    return load if width == COPY_WIDTH else None


class SimtAttentionEmitter:
    """Emits one flash-attention kernel as the SIMT block schedule of a geometry."""

    def __init__(
        self,
        em: Emitter,
        a: Attention,
        mapping: Mapping,
        g: Geometry,
        limit: KeyLimit | None = None,
    ) -> None:
        self.em, self.a, self.mapping, self.g = em, a, mapping, g
        self.limit = limit
        """Where the score proves the keys past a bound of the runtime scalars masked (a cache
        of L valid keys), the key loop stops at the bound (`key_limit.py`)."""
        *self.batch_extents, self.s_q, self.head_v = a.nest.extents
        self.s_k = a.reduce.extents[0]
        self.head_qk = a.qk.extents[0]
        self.bm, self.bn, self.threads = g.plan.bm, g.plan.bn, g.plan.threads
        self.exact = _low_scores(a)
        self.scale = None if self.exact else _scale(a)

    def f(self, op: Operation) -> SSAValue:
        return self.em.value(op)

    def fma(self, x: SSAValue, y: SSAValue, acc: SSAValue) -> SSAValue:
        """acc + x·y (NVRTC contracts it into one FFMA)."""
        return self.f(arith.AddfOp(self.f(arith.MulfOp(x, y)), acc))

    def alloc(self, name: str) -> SSAValue:
        shape = self.g.buffers()[name]
        return self.f(tile.AllocOp(tile.memref_in(shape, f32, tile.SHARED), True))

    def emit(self) -> None:
        em, a, g = self.em, self.a, self.g
        self.tid = self.f(tile.ThreadIdOp("x"))
        self.tx, self.ty = em.rem(self.tid, g.tx), em.div(self.tid, g.tx)
        query_tile = self.f(tile.BlockIdOp("x"))
        if a.causal:
            # The last query tiles have the most keys: they start first, the short ones fill
            # the tail of the grid.
            last = em.index(-(-self.s_q // self.bm) - 1)
            query_tile = self.f(arith.SubiOp(last, query_tile))
        self.q0 = em.mul(query_tile, self.bm)
        flat = self.f(tile.BlockIdOp("y"))
        for iv, index in zip(a.batch, em.delinearize(flat, self.batch_extents) if a.batch else []):
            self.mapping[iv] = index
        self.q_smem, k_smem = self.alloc("q"), self.alloc("k")
        self.v_smem, self.p_smem = self.alloc("v"), self.alloc("p")
        q = _Side(a.ops_of(a.q_value), a.q_value, a.i, a.e, self.head_qk, self.q_smem)
        k = _Side(a.ops_of(a.k_value), a.k_value, a.j, a.e, self.head_qk, k_smem)
        value = a.yielded[2]
        v = _Side(a.ops_of(value), value, a.j, a.d, self.head_v, self.v_smem)
        for side in (k, v):
            side.copied = copied_f32_load(side)
        self.rows = [em.add(self.ty, g.ty * r) for r in range(g.tm)]
        self.i = [em.add(self.q0, row) for row in self.rows]
        self.keys = [em.add(self.tx, g.tx * c) for c in range(KEYS_PER_THREAD)]
        self.cols = [em.mul(em.add(self.tx, g.tx * n), g.vw) for n in range(g.groups)]
        end: SSAValue | int = self.s_k
        if self.limit is not None:
            end = tile_seen_keys(em, self.limit, a, self.mapping, self.q0, self.bm)
        if a.causal:
            end = self.f(arith.MinSIOp(em.index(end), em.add(self.q0, self.bm)))
        self.stage(q, self.q0, self.s_q, self.bm)
        self.issue(k, em.index(0))
        self.commit(k, v)
        m = [em.f32(float("-inf"))] * g.tm
        zero = em.f32(0.0)
        sums = [zero] * g.tm
        o = [zero] * (g.tm * g.groups * g.vw)
        with em.for_loop(0, end, self.bn, [*m, *sums, *o]) as (j0, state, key_loop):
            m, sums, o = state[: g.tm], state[g.tm : 2 * g.tm], state[2 * g.tm :]
            self.wait(k, v)
            self.issue(v, j0)
            self.commit(k, v)
            x = self.masked(self.scores(k_smem), j0)
            m, sums, o, p = self.softmax(x, m, sums, o)
            for r, row in enumerate(self.rows):
                for c, key in enumerate(self.keys):
                    em.op(memref.StoreOp.get(p[r][c], self.p_smem, [row, key]))
            self.wait(k, v)
            ahead = em.add(j0, self.bn)
            with em.when([em.less(ahead, end)]):
                self.issue(k, ahead)
            self.commit(k, v)
            o = self.multiply_v(o)
            em.op(scf.YieldOp(*m, *sums, *o))
        state = list(key_loop.results)
        self.epilogue(state[: g.tm], state[g.tm : 2 * g.tm], state[2 * g.tm :])

    def wait(self, *sides: _Side) -> None:
        """Waits for this thread's copies, then for every thread."""
        if any(side.copied for side in sides):
            self.em.op(tile.CpAsyncWaitOp(0))
        self.em.op(tile.BarrierOp())

    def commit(self, *sides: _Side) -> None:
        """Closes this thread's copies issued since the last commit into a group."""
        if any(side.copied for side in sides):
            self.em.op(tile.CpAsyncCommitOp())

    def issue(self, side: _Side, origin: SSAValue) -> None:
        """Fills a key side's shared tile with rows origin..origin+bn: by `cp.async` when the
        side is a plain f32 load (rows past the keys zero-filled), else evaluated and stored
        (visible after the next barrier)."""
        if side.copied is None:
            self.stage(side, origin, self.s_k, self.bn)
            return
        em, load = self.em, side.copied
        per_row = side.cols // COPY_WIDTH
        chunks = self.bn * per_row
        steps = -(-chunks // self.threads)
        if self.threads % per_row == 0:
            # Each thread's copies lie in one column, a fixed number of rows apart.
            col = em.mul(em.rem(self.tid, per_row), COPY_WIDTH)
            first = em.div(self.tid, per_row)
            spots = [(em.add(first, n * self.threads // per_row), col) for n in range(steps)]
        else:
            flats = [em.add(self.tid, n * self.threads) for n in range(steps)]
            spots = [(em.div(x, per_row), em.mul(em.rem(x, per_row), COPY_WIDTH)) for x in flats]
        for step, (row, col) in enumerate(spots):
            partial = (step + 1) * self.threads > chunks
            with em.when([em.less(row, self.bn)] if partial else []):
                index = em.add(origin, row)
                valid = em.less(index, self.s_k) if self.s_k % self.bn else None
                if valid is not None:
                    index = self.f(arith.SelectOp(valid, index, em.index(0)))
                local = dict(self.mapping) | {side.row_iv: index, side.col_iv: col}
                for op in side.ops:
                    if op is load:
                        break
                    em.op(op.clone(value_mapper=local))
                src = [local.get(x, x) for x in load.indices]
                em.op(tile.CpAsyncOp(local[load.memref], src, side.smem, [row, col], 4, valid))

    def stage(self, side: _Side, origin: SSAValue, extent: int, rows: int) -> None:
        """Evaluates a side over `rows` rows from `origin` into its shared tile as f32, with
        vectors of up to 16 bytes along its columns; rows past `extent` are 0."""
        em = self.em
        width = vector_width(side.ops, side.col_iv, side.cols, COPY_WIDTH)
        per_row = side.cols // width
        with em.for_loop(self.tid, rows * per_row, self.threads) as (flat, _, _):
            col = em.mul(em.rem(flat, per_row), width)
            row = em.div(flat, per_row)
            index = em.add(origin, row)
            with em.if_(em.less(index, extent), [f32] * width) as (then, other, if_op):
                with em.into(then):
                    local = dict(self.mapping) | {side.row_iv: index}
                    lanes = LaneEmitter(em, side.col_iv, col, width).emit(
                        [*side.ops, loop.YieldOp(side.value)], local
                    )
                    em.op(scf.YieldOp(*[lane[0] for lane in lanes]))
                assert other is not None
                with em.into(other):
                    em.op(scf.YieldOp(*[em.f32(0.0)] * width))
            values = list(if_op.results)
            if width == 1:
                em.op(memref.StoreOp.get(values[0], side.smem, [row, col]))
            else:
                em.op(tile.VectorStoreOp(values, side.smem, [row, col]))
            em.op(scf.YieldOp())

    def scores(self, k_smem: SSAValue) -> list[list[SSAValue]]:
        """Returns this thread's dot products of one key tile, [row][key]: per step of qw head
        dims, one shared read of Q per row and of K per key, then tm·4·qw FMAs."""
        em, g = self.em, self.g
        count = g.tm * KEYS_PER_THREAD
        zero = em.f32(0.0)
        with em.for_loop(0, self.head_qk, g.qw, [zero] * count, unroll=True) as (e, acc, dots):
            q = [em.load(self.q_smem, [row, e], g.qw) for row in self.rows]
            k = [em.load(k_smem, [key, e], g.qw) for key in self.keys]
            acc = list(acc)
            for w in range(g.qw):
                for r in range(g.tm):
                    for c in range(KEYS_PER_THREAD):
                        n = r * KEYS_PER_THREAD + c
                        acc[n] = self.fma(q[r][w], k[c][w], acc[n])
            em.op(scf.YieldOp(*acc))
        values = list(dots.results)
        return [values[r * KEYS_PER_THREAD : (r + 1) * KEYS_PER_THREAD] for r in range(g.tm)]

    def masked(self, dots: list[list[SSAValue]], j0: SSAValue) -> list[list[SSAValue]]:
        """Applies the loop body's score expression (scale, mask) to each dot product; keys
        past the end score −inf. A causal mask and the end of the keys are applied only on the
        tiles that need them (the block's diagonal tiles, the last tile)."""
        em, a = self.em, self.a
        loads = any(
            isinstance(o, memref.LoadOp)
            for op in a.ops_of(a.yielded[0], [a.qk.res[0]])
            for o in op.walk()
        )
        if loads:
            return self.scores_of(dots, j0, masked=True, loads=True)
        edges = []
        if a.causal:
            edges.append(em.less(self.q0, em.add(j0, self.bn - 1)))
        if self.s_k % self.bn:
            edges.append(em.less(em.index(self.s_k), em.add(j0, self.bn)))
        if not edges:
            return self.scores_of(dots, j0, masked=False)
        edge = edges[0]
        for other in edges[1:]:
            edge = self.f(arith.OrIOp(edge, other))
        count = self.g.tm * KEYS_PER_THREAD
        with em.if_(edge, [f32] * count) as (then, other_block, if_op):
            with em.into(then):
                em.op(scf.YieldOp(*_flat(self.scores_of(dots, j0, masked=True))))
            assert other_block is not None
            with em.into(other_block):
                em.op(scf.YieldOp(*_flat(self.scores_of(dots, j0, masked=False))))
        values = list(if_op.results)
        return [values[r * KEYS_PER_THREAD : (r + 1) * KEYS_PER_THREAD] for r in range(self.g.tm)]

    def scores_of(
        self, dots: list[list[SSAValue]], j0: SSAValue, masked: bool, loads: bool = False
    ) -> list[list[SSAValue]]:
        """Emits the score expression for each dot product; unmasked, the causal mask's add
        is skipped and no key counts as past the end."""
        em, a = self.em, self.a
        score = a.yielded[0]
        ops = a.ops_of(score, [a.qk.res[0]])
        minus_inf = em.f32(float("-inf"))
        keys = [em.add(j0, key) for key in self.keys]
        out = []
        for i, row_dots in zip(self.i, dots, strict=True):
            row = []
            for j, dot in zip(keys, row_dots, strict=True):
                local = dict(self.mapping) | {a.qk.res[0]: dot, a.i: i, a.j: j}
                if self.scale is not None and not loads:
                    row.append(self.masked_dot(dot, i, j) if masked else dot)
                    continue
                if loads:
                    # A mask read from memory is read at indices clamped inside the tensor, the
                    # score replaced by −inf outside, without a branch.
                    inside = em.all_of([em.less(i, self.s_q), em.less(j, self.s_k)])
                    local[a.i] = self.f(arith.MinSIOp(i, em.index(self.s_q - 1)))
                    local[a.j] = self.f(arith.MinSIOp(j, em.index(self.s_k - 1)))
                    self.clone_score(ops, local, masked)
                    x = self.f(arith.SelectOp(inside, local.get(score, score), minus_inf))
                else:
                    self.clone_score(ops, local, masked)
                    x = local.get(score, score)
                    if masked and self.s_k % self.bn:
                        x = self.f(arith.SelectOp(em.less(j, self.s_k), x, minus_inf))
                row.append(x)
            out.append(row)
        return out

    def masked_dot(self, dot: SSAValue, i: SSAValue, j: SSAValue) -> SSAValue:
        """Returns a dot product, or −inf above the diagonal of a causal mask or past the end
        of the keys (the score is dot·scale, folded into the softmax's exponent)."""
        em = self.em
        minus_inf = em.f32(float("-inf"))
        if self.a.causal:
            dot = self.f(arith.SelectOp(em.less(i, j), minus_inf, dot))
        if self.s_k % self.bn:
            dot = self.f(arith.SelectOp(em.less(j, self.s_k), dot, minus_inf))
        return dot

    def clone_score(self, ops: Sequence[Operation], local: Mapping, masked: bool) -> None:
        """Clones the score ops into `local`; unmasked, the causal add yields its other operand."""
        add, kept = self.a.causal_mask or (None, None)
        for op in ops:
            if not masked and op is add:
                local[add.result] = local.get(kept, kept)
            else:
                self.em.op(op.clone(value_mapper=local))

    def row_reduce(self, values: Sequence[SSAValue], kind: type[Operation]) -> list[SSAValue]:
        """Combines each value across the TX lanes holding one query row (XOR shuffles)."""
        n = len(values)
        block = Block(arg_types=[f32] * (2 * n))
        results = [kind(block.args[k], block.args[n + k]) for k in range(n)]
        for op in results:
            block.add_op(op)
        block.add_op(tile.YieldOp(*[op.results[0] for op in results]))
        return list(self.em.op(tile.WarpReduceOp(list(values), Region(block), self.g.tx)).results)

    def combine(self, kind: type[Operation], values: Sequence[SSAValue]) -> SSAValue:
        """Folds values pairwise as a balanced tree of a binary float op."""
        values = list(values)
        while len(values) > 1:
            values = [
                self.f(kind(values[n], values[n + 1])) if n + 1 < len(values) else values[n]
                for n in range(0, len(values), 2)
            ]
        return values[0]

    def softmax(
        self,
        x: list[list[SSAValue]],
        m: list[SSAValue],
        sums: list[SSAValue],
        o: list[SSAValue],
    ) -> tuple[list[SSAValue], list[SSAValue], list[SSAValue], list[list[SSAValue]]]:
        """Updates each row's running max, this thread's share of its sum and its O columns;
        returns them and P. p = exp2(x·log2 e − M') with M' = max(M·log2 e, lowest f32), the
        scale folded into that FFMA where the score is dot·scale; where a score may be a finite
        value too low for x·log2 e (`_low_scores`), p = exp2((x − M')·log2 e) with
        M' = max(M, lowest f32) (docs/flash_attention.md, numerics)."""
        em, g = self.em, self.g
        log2e, lowest = em.f32(LOG2E), em.f32(LOWEST_F32)
        row_max = [self.combine(arith.MaximumfOp, row) for row in x]
        tile_max = self.row_reduce(row_max, arith.MaximumfOp)
        exponent = log2e
        if self.scale is not None:
            scale = em.f32(self.scale)
            tile_max = [self.f(arith.MulfOp(t, scale)) for t in tile_max]
            exponent = em.f32(self.scale * LOG2E)
        per_row = g.groups * g.vw
        new_m, new_l, new_o, probs = [], [], list(o), []
        for r in range(g.tm):
            new = self.f(arith.MaximumfOp(m[r], tile_max[r]))
            if self.exact:
                floor = self.f(arith.MaximumfOp(new, lowest))
                alpha = self.exp2(self.f(arith.SubfOp(m[r], floor)), log2e, None)
                p = [self.exp2(self.f(arith.SubfOp(s, floor)), log2e, None) for s in x[r]]
            else:
                floor = self.f(arith.MaximumfOp(self.f(arith.MulfOp(new, log2e)), lowest))
                alpha = self.exp2(m[r], log2e, floor)
                p = [self.exp2(s, exponent, floor) for s in x[r]]
            scaled = self.f(arith.MulfOp(sums[r], alpha))
            new_l.append(self.f(arith.AddfOp(scaled, self.combine(arith.AddfOp, p))))
            new_m.append(new)
            for n in range(r * per_row, (r + 1) * per_row):
                new_o[n] = self.f(arith.MulfOp(o[n], alpha))
            probs.append(p)
        return new_m, new_l, new_o, probs

    def exp2(self, x: SSAValue, factor: SSAValue, floor: SSAValue | None) -> SSAValue:
        """exp2(x·factor − floor) (one FFMA and one MUFU.EX2), or exp2(x·factor) without a
        floor; p and alpha lie in [0, 1], so flushing subnormals to 0 is harmless."""
        shifted = self.f(arith.MulfOp(x, factor))
        if floor is not None:
            shifted = self.f(arith.SubfOp(shifted, floor))
        return self.f(fmath.Exp2Op(shifted, APPROXIMATE))

    def multiply_v(self, o: list[SSAValue]) -> list[SSAValue]:
        """O += P·V(t): per 4 keys one 16-byte read of P per row, then per key one read of V
        per column group and tm·groups·vw FMAs."""
        em, g = self.em, self.g
        per_row = g.groups * g.vw
        with em.for_loop(0, self.bn, 4, o, unroll=True) as (jj, acc, loop_op):
            p = [em.load(self.p_smem, [row, jj], 4) for row in self.rows]
            acc = list(acc)
            for kk in range(4):
                key = em.add(jj, kk)
                v = [em.load(self.v_smem, [key, col], g.vw) for col in self.cols]
                for r in range(g.tm):
                    for n in range(g.groups):
                        for w in range(g.vw):
                            at = r * per_row + n * g.vw + w
                            acc[at] = self.fma(p[r][kk], v[n][w], acc[at])
            em.op(scf.YieldOp(*acc))
        return list(loop_op.results)

    def epilogue(self, m: list[SSAValue], sums: list[SSAValue], o: list[SSAValue]) -> None:
        """Runs the loop kernel's epilogue (acc / max(l, 1), cast, store) on this thread's O;
        the division by a per-row value becomes one reciprocal per row and a multiply per
        element. Columns past the head dim (a padded last group) are not stored."""
        em, a, g = self.em, self.a, self.g
        nest_ops = list(a.nest.body.block.ops)
        after = nest_ops[nest_ops.index(a.reduce) + 1 :]
        maximum, total, acc = a.reduce.res
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
        width = vector_width(after, a.d, g.vw, g.vw)
        totals = self.row_reduce(sums, arith.AddfOp)
        one = em.f32(1.0)
        per_row = g.groups * g.vw
        for r, i in enumerate(self.i):
            with em.when([em.less(i, self.s_q)]):
                local = dict(self.mapping) | {a.i: i, total: totals[r], maximum: m[r]}
                inverse = None
                if division is not None:
                    for op in backward_slice([division.rhs], program, [acc, total, maximum]):
                        em.op(op.clone(value_mapper=local))
                    inverse = self.f(arith.DivfOp(one, local.get(division.rhs, division.rhs)))
                for n, col in enumerate(self.cols):
                    padded = g.padded_v != self.head_v and n == g.groups - 1
                    with em.when([em.less(col, self.head_v)] if padded else []):
                        for c0 in range(0, g.vw, width):
                            lanes = []
                            for c in range(c0, c0 + width):
                                value = o[r * per_row + n * g.vw + c]
                                lane = {acc: value, total: totals[r], maximum: m[r]}
                                if inverse is not None:
                                    assert division is not None
                                    lane[division.result] = self.f(arith.MulfOp(value, inverse))
                                lanes.append(lane)
                            row_local = dict(self.mapping) | {a.i: i}
                            LaneEmitter(em, a.d, em.add(col, c0), width).emit(
                                program, row_local, lanes
                            )


def _flat(values: list[list[SSAValue]]) -> list[SSAValue]:
    return [v for row in values for v in row]
