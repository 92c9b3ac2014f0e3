"""Schedule rule for contractions (matmul, batched matmul) with fused prologue and epilogue.

The classic SGEMM ladder in one schedule: a block computes a BM×BN tile of the output, walking
K in steps of BK. Each step stages the A-side (BM×BK) and B-side (BK×BN) operands in shared
memory, each evaluated by the fused prologue (e.g. `x + bias`) as it is loaded, with vector
loads along whichever axis the operand is contiguous in. Each thread then accumulates a TM×TN
register tile from shared memory. The epilogue (bias, activation, cast) runs on the registers
and stores with vector stores. Out-of-range rows, columns and K are padded with zeros.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import f32
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
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.knobs import Knobs

SHARED_LIMIT = 48 * 1024
"""Static shared memory a block may declare."""


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
    ops = list(op.body.block.ops)
    if len(ops) != 1 or not isinstance(nest := ops[0], loop.ParallelOp):
        return None
    if len(nest.extents) not in (2, 3):
        return None
    body_ops = list(nest.body.block.ops)
    reduces = [o for o in body_ops if isinstance(o, loop.ReduceOp)]
    if len(reduces) != 1 or "tinyopt.contraction" not in reduces[0].attributes:
        return None
    reduce = reduces[0]
    if len(reduce.extents) != 1 or len(reduce.res) != 1:
        return None
    if any(isinstance(o, loop.ParallelOp | loop.ReduceOp) for o in body_ops if o is not reduce):
        return None
    inner = list(reduce.body.block.ops)
    yield_op = inner[-1]
    if len(inner) < 2 or not isinstance(product := inner[-2], arith.MulfOp):
        return None
    if not isinstance(yield_op, loop.YieldOp) or list(yield_op.arguments) != [product.result]:
        return None
    *_, m_iv, n_iv = nest.body.block.args
    lhs, rhs = product.lhs, product.rhs
    lhs_deps = depends_on(inner, [n_iv])
    if lhs in lhs_deps:
        lhs, rhs = rhs, lhs
    body = inner[:-2]
    a_side, b_side = _slice(body, lhs), _slice(body, rhs)
    if lhs in depends_on(body, [n_iv]) or rhs in depends_on(body, [m_iv]):
        return None
    position = body_ops.index(reduce)
    prologue = body_ops[:position]
    if depends_on(prologue, nest.body.block.args) & {r for o in prologue for r in o.results}:
        return None
    return Contraction(
        nest,
        reduce,
        a_side,
        lhs,
        b_side,
        rhs,
        product,
        m_iv,
        n_iv,
        prologue,
        body_ops[position + 1 :],
    )


@dataclass(frozen=True)
class Tiles:
    """The block tile (bm, bn, bk) and the per-thread register tile (tm, tn)."""

    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    pad: int

    @property
    def threads(self) -> int:
        return (self.bm // self.tm) * (self.bn // self.tn)

    @property
    def shared_bytes(self) -> int:
        return 4 * self.bk * (self.bm + self.pad + self.bn + self.pad)


def choose_tiles(knobs: Knobs, batch: int, m: int, n: int) -> Tiles:
    """Picks the tiles: 128×128×8 with 8×8 per thread, or 64×64 when that leaves SMs idle."""
    big = batch * -(-m // 128) * -(-n // 128) >= 132
    bm = knobs.bm or (128 if big else 64)
    bn = knobs.bn or (128 if big else 64)
    tm = knobs.tm or (8 if big else 4)
    tn = knobs.tn or (8 if big else 4)
    tiles = Tiles(bm, bn, knobs.bk or 8, tm, tn, knobs.pad)
    if bm % tm or bn % tn:
        raise DiagnosticException(f"tile: bm={bm}, bn={bn} must be multiples of tm={tm}, tn={tn}")
    if not 32 <= tiles.threads <= 1024:
        raise DiagnosticException(
            f"tile: (bm/tm)*(bn/tn) = {tiles.threads} threads; a block needs 32 to 1024"
        )
    if tiles.shared_bytes > SHARED_LIMIT:
        raise DiagnosticException(
            f"tile: bm={bm} bn={bn} bk={tiles.bk} needs {tiles.shared_bytes} bytes of shared "
            f"memory, more than the {SHARED_LIMIT} a block may declare statically"
        )
    return tiles


class ScheduleContraction(RewritePattern):
    """Tiles a contraction kernel over blocks, shared memory and per-thread registers."""

    def __init__(self, knobs: Knobs) -> None:
        self.knobs = knobs

    def match_and_rewrite(self, op, rewriter: PatternRewriter, /) -> None:
        if not isinstance(op, loop.KernelOp) or (c := match_contraction(op)) is None:
            return
        batch, m, n, k = c.extents
        t = choose_tiles(self.knobs, batch, m, n)
        kernel, em, mapping = new_kernel(
            op, (-(-n // t.bn), -(-m // t.bm), batch), (t.threads, 1, 1)
        )
        _ContractionEmitter(em, c, t, self.knobs.vec or 4, mapping).emit()
        replace_kernel(rewriter, op, kernel)


class _ContractionEmitter:
    """Emits the tiled contraction for one block."""

    def __init__(self, em: Emitter, c: Contraction, t: Tiles, vec: int, mapping: Mapping) -> None:
        self.em, self.c, self.t, self.vec, self.mapping = em, c, t, vec, mapping
        self.batch, self.m, self.n, self.k = c.extents

    def emit(self) -> None:
        em, c, t = self.em, self.c, self.t
        mapping = self.mapping
        for op in c.prologue:
            em.op(op.clone(value_mapper=mapping))
        tid = em.value(tile.ThreadIdOp("x"))
        self.tx, self.ty = em.rem(tid, t.bn // t.tn), em.div(tid, t.bn // t.tn)
        self.tid = tid
        self.m0 = em.mul(em.value(tile.BlockIdOp("y")), t.bm)
        self.n0 = em.mul(em.value(tile.BlockIdOp("x")), t.bn)
        if len(c.nest.extents) == 3:
            mapping[c.nest.body.block.args[0]] = em.value(tile.BlockIdOp("z"))
        a_smem = em.value(tile.AllocOp(tile.memref_in([t.bk, t.bm + t.pad], f32, tile.SHARED)))
        b_smem = em.value(tile.AllocOp(tile.memref_in([t.bk, t.bn + t.pad], f32, tile.SHARED)))
        acc = em.value(tile.AllocOp(tile.memref_in([t.tm, t.tn], f32, tile.REGISTERS)))
        init = mapping.get(c.reduce.init[0], c.reduce.init[0])
        self._each(
            t.tm, lambda i: self._each(t.tn, lambda j: em.op(memref.StoreOp.get(init, acc, [i, j])))
        )
        with em.for_loop(0, self.k, t.bk) as (k0, _, _):
            self._stage(c.a_side, c.a_value, c.m_iv, self.m0, self.m, t.bm, k0, a_smem)
            self._stage(c.b_side, c.b_value, c.n_iv, self.n0, self.n, t.bn, k0, b_smem)
            em.op(tile.BarrierOp())
            self._accumulate(a_smem, b_smem, acc)
            em.op(tile.BarrierOp())
            em.op(scf.YieldOp())
        self._epilogue(acc)

    def _each(self, count: int, body) -> None:
        """Emits a fully unrolled loop `for i in 0..count` (register indices must be constant)."""
        em = self.em
        with em.for_loop(0, count, 1, unroll=True) as (i, _, _):
            body(i)
            em.op(scf.YieldOp())

    def _stage(
        self,
        side: list[Operation],
        value: SSAValue,
        outer_iv: SSAValue,
        outer0: SSAValue,
        outer_extent: int,
        tile_outer: int,
        k0: SSAValue,
        smem: SSAValue,
    ) -> None:
        """Evaluates one operand side over a tile (outer × BK) into shared memory [BK][outer]."""
        em, t, c = self.em, self.t, self.c
        k_iv = c.reduce.body.block.args[0]
        along_k = vector_width(side, k_iv, t.bk, self.vec)
        along_k = along_k if self.k % along_k == 0 else 1
        along_outer = vector_width(side, outer_iv, tile_outer, self.vec)
        along_outer = along_outer if outer_extent % along_outer == 0 else 1
        if along_outer > along_k:
            fast_iv, width, fast_extent, slow_extent = outer_iv, along_outer, tile_outer, t.bk
        else:
            fast_iv, width, fast_extent, slow_extent = k_iv, along_k, t.bk, tile_outer
        chunks = slow_extent * fast_extent // width
        with em.for_loop(self.tid, chunks, t.threads) as (e, _, _):
            fast = em.mul(em.rem(e, fast_extent // width), width)
            slow = em.div(e, fast_extent // width)
            if fast_iv is k_iv:
                kk, oo = fast, slow
            else:
                kk, oo = slow, fast
            k, o = em.add(k0, kk), em.add(outer0, oo)
            inside = em.value(arith.AndIOp(em.less(k, self.k), em.less(o, outer_extent)))
            types = [f32] * width
            with em.if_(inside, types) as (then_block, else_block, if_op):
                with em.into(then_block):
                    local = dict(self.mapping) | {k_iv: k, outer_iv: o}
                    start = k if fast_iv is k_iv else o
                    lanes = LaneEmitter(em, fast_iv, start, width).emit(
                        [*side, loop.YieldOp(value)], local
                    )
                    em.op(scf.YieldOp(*[lane[0] for lane in lanes]))
                assert else_block is not None
                with em.into(else_block):
                    zero = em.f32(0.0)
                    em.op(scf.YieldOp(*[zero] * width))
            values = list(if_op.results)
            if fast_iv is k_iv:
                for lane, v in enumerate(values):
                    em.op(memref.StoreOp.get(v, smem, [em.add(kk, lane), oo]))
            elif width == 1:
                em.op(memref.StoreOp.get(values[0], smem, [kk, oo]))
            else:
                em.op(tile.VectorStoreOp(values, smem, [kk, oo]))
            em.op(scf.YieldOp())

    def _fragment(
        self, smem: SSAValue, kk: SSAValue, start: SSAValue, count: int
    ) -> list[SSAValue]:
        em = self.em
        width = 4 if count % 4 == 0 else 1
        values: list[SSAValue] = []
        for part in range(0, count, width):
            index = [kk, em.add(start, part)]
            if width == 1:
                values.append(em.value(memref.LoadOp.get(smem, index)))
            else:
                values.extend(em.op(tile.VectorLoadOp(smem, index, width)).results)
        return values

    def _accumulate(self, a_smem: SSAValue, b_smem: SSAValue, acc: SSAValue) -> None:
        em, t, c = self.em, self.t, self.c
        with em.for_loop(0, t.bk, 1, unroll=True) as (kk, _, _):
            a = self._fragment(a_smem, kk, em.mul(self.ty, t.tm), t.tm)
            b = self._fragment(b_smem, kk, em.mul(self.tx, t.tn), t.tn)
            for i in range(t.tm):
                for j in range(t.tn):
                    where = [em.index(i), em.index(j)]
                    old = em.value(memref.LoadOp.get(acc, where))
                    product = em.value(
                        c.product.clone(value_mapper={c.a_value: a[i], c.b_value: b[j]})
                    )
                    (new,) = inline_region(em, c.reduce.combine, [old, product], self.mapping)
                    em.op(memref.StoreOp.get(new, acc, where))
            em.op(scf.YieldOp())

    def _epilogue(self, acc: SSAValue) -> None:
        em, t, c = self.em, self.t, self.c
        width = vector_width(c.epilogue, c.n_iv, t.tn, 4)
        width = width if self.n % width == 0 else 1
        result = c.reduce.res[0]
        for i in range(t.tm):
            m = em.add(self.m0, em.add(em.mul(self.ty, t.tm), i))
            for j0 in range(0, t.tn, width):
                n = em.add(self.n0, em.add(em.mul(self.tx, t.tn), j0))
                inside = em.value(arith.AndIOp(em.less(m, self.m), em.less(n, self.n)))
                with em.if_(inside) as (then_block, _, _), em.into(then_block):
                    values = [
                        em.value(memref.LoadOp.get(acc, [em.index(i), em.index(j0 + lane)]))
                        for lane in range(width)
                    ]
                    local = dict(self.mapping) | {c.m_iv: m}
                    LaneEmitter(em, c.n_iv, n, width).emit(
                        c.epilogue, local, [{result: v} for v in values]
                    )
