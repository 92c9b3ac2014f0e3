"""Schedule rule for row kernels (softmax, RMSNorm, LayerNorm, row sums): a thread group per row.

`threads` threads (a warp or the whole block) stride over each row in vectors of `vec` elements;
a `loop.reduce` folds with its own combine region per thread, then across the group, so any
monoid works. With `cache=1` a row read by several inner loops is loaded into registers once;
with `cache=2` a row read by one loop too (a GEMV's x and weights), all of a thread's vectors of
it loaded before the loop that reads them, so that they are in flight together.

With `prefetch=on` a kernel streaming rows (a GEMV's weights) opens by asking L2 for each of
its rows in one bulk prefetch, then waits for the kernel before it
(`tile.grid_dependency_wait`): launched with programmatic dependent launch, its blocks fetch
their weights while that kernel drains, where they would otherwise idle at the wait. It is
opt-in (`auto` is off): measured slower on the H200 (docs/knobs.md).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from math import prod

from xdsl.dialects import memref, scf
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.emit import (
    Emitter,
    LaneEmitter,
    Mapping,
    depends_on,
    element_bytes,
    inline_region,
    is_contiguous,
    vector_width,
)
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.rule import Rule
from tinyopt.passes.tile.gemm.split_k import SEQUENTIAL

_Body = Callable[[SSAValue, SSAValue, list[SSAValue]], list[SSAValue]]

MAX_CACHED_ELEMENTS = 64
"""Register budget (elements per thread) for holding rows between inner loops."""


def row_nest(op: loop.KernelOp) -> tuple[loop.ParallelOp, int] | None:
    """Returns the outer row loop and the row length if the kernel has the row shape."""
    ops = list(op.body.block.ops)
    if len(ops) != 1 or not isinstance(ops[0], loop.ParallelOp) or SEQUENTIAL in op.attributes:
        return None
    inner = _inner_loops(ops[0])
    if len({o.extents for o in inner}) != 1 or len(inner[0].extents) != 1:
        return None
    nested = (n for o in inner for n in o.walk() if n is not o)
    if any(isinstance(n, loop.ParallelOp | loop.ReduceOp) for n in nested):
        return None
    return ops[0], inner[0].extents[0]


def tile_combine(region: Region) -> Region:
    """Clones a `loop.reduce` combine region, ending it with `tile.yield` instead."""
    clone = region.clone()
    last = clone.block.last_op
    assert isinstance(last, loop.YieldOp)
    clone.block.add_op(tile.YieldOp(*last.arguments))
    clone.block.erase_op(last)
    return clone


def auto_threads(chunks: int) -> int:
    """Threads per row for `chunks` vectors a row: a warp up to 128 chunks, else the power of
    two nearest above a quarter of them (64 to 1024), halved where that leaves the row's last
    step over the threads part empty and half as many threads step evenly: the row's loads
    then keep every lane busy to the end. Measured on the H200 (2026-12-05, RESULTS.md
    twenty-sixth session, GEMVs of one row): 14336-long rows, 3.5 steps of 1024 (f32) or 512
    (bf16) threads, ran 0.98× and 1.16× cuBLAS; 7 steps of 512 and 256 threads ran 1.03× and
    1.22×."""
    if chunks <= 128:
        return 32
    threads = min(1024, max(64, (-(-chunks // 4) + 31) // 32 * 32))
    threads = 1 << (threads - 1).bit_length()
    if chunks % threads and threads > 64 and chunks % (threads // 2) == 0:
        threads //= 2
    return threads


@dataclass(frozen=True)
class RowReductionPlan:
    threads: int
    """Threads per row."""
    rows: int
    """Rows per block (one warp each where threads = 32)."""
    vec: int
    """The widest vector wanted; the accesses' alignment may give less."""
    cache: int
    """1: a row read twice is kept in registers between its loops; 2: a row read once is loaded
    into registers too, before its loop (`_RowEmitter.cached_rows`)."""
    evict: str = "once"
    """once: the 128-bit loads of each buffer the kernel reads once beside a vector every row
    reads (`_streamed`: a GEMV's weights) carry the L2 evict-first hint; off: none. The knob's
    other values (auto, and the operand names of the contraction rules) read as once here."""
    prefetch: str = "off"
    """on: the streamed rows are asked of L2 before the grid dependency wait
    (`_prefetch_streamed_rows`); off: the kernel waits at its start. auto reads as off."""


class RowReduction(Rule[tuple[loop.ParallelOp, int], RowReductionPlan]):
    """Maps each row to a group of threads; reductions use the warp or block reduce."""

    name = "row_reduction"
    reads = "threads vec rows cache evict=auto,off prefetch=auto,on"
    plan_type = RowReductionPlan

    def match(self, kernel: loop.KernelOp) -> tuple[loop.ParallelOp, int] | str:
        return row_nest(kernel) or "not a loop over rows of inner loops of one length"

    def plan(
        self,
        kernel: loop.KernelOp,
        nest: tuple[loop.ParallelOp, int],
        knobs: Knobs,
    ) -> RowReductionPlan | str:
        outer, length = nest
        vec = knobs.vec or 16
        chunks = length // _width(outer, length, vec)
        rows = prod(outer.extents)
        threads = knobs.threads or auto_threads(chunks)
        rows_per_block = knobs.rows
        if not rows_per_block:
            rows_per_block = 1
            if threads <= 32:
                rows_per_block = next(r for r in (8, 4, 2, 1) if rows % r == 0)
        evict = "off" if knobs.evict == "off" else "once"
        prefetch = "on" if knobs.prefetch == "on" else "off"
        plan = RowReductionPlan(threads, rows_per_block, vec, knobs.cache, evict, prefetch)
        return self.check(kernel, nest, plan) or plan

    def check(
        self,
        kernel: loop.KernelOp,
        nest: tuple[loop.ParallelOp, int],
        plan: RowReductionPlan,
    ) -> str | None:
        rows = prod(nest[0].extents)
        if rows % plan.rows:
            return f"rows={plan.rows} does not divide the {rows} rows of the kernel"
        if plan.threads > 32 and plan.rows > 1:
            return (
                f"rows={plan.rows} needs threads <= 32 (one warp per row), "
                f"got threads={plan.threads}"
            )
        return None

    def emit(
        self,
        kernel: loop.KernelOp,
        nest: tuple[loop.ParallelOp, int],
        plan: RowReductionPlan,
        rewriter: PatternRewriter,
    ) -> None:
        outer, length = nest
        inner_loops = _inner_loops(outer)
        width = _width(outer, length, plan.vec)
        chunks = length // width
        rows = prod(outer.extents)
        threads, rows_per_block = plan.threads, plan.rows
        new, em, mapping = new_kernel(
            kernel, (rows // rows_per_block, 1, 1), (threads, rows_per_block, 1)
        )
        row = em.global_id(rows_per_block, "y")
        mapping.update(zip(outer.body.block.args, em.delinearize(row, outer.extents), strict=True))
        lane = em.value(tile.ThreadIdOp("x"))
        streamed = _streamed(outer, inner_loops)
        if plan.prefetch == "on":
            _prefetch_streamed_rows(em, lane, streamed, length, mapping)
        if plan.evict == "off":
            streamed = frozenset()
        _RowEmitter(em, lane, threads, width, chunks, plan.cache, streamed).emit(
            list(outer.body.block.ops), inner_loops, mapping
        )
        replace_kernel(rewriter, kernel, new)


def _streamed(
    outer: loop.ParallelOp, inner_loops: Sequence[loop.ParallelOp | loop.ReduceOp]
) -> frozenset[Operation]:
    """The loads `evict` hints: in each inner loop that also reads a vector every row shares
    (a GEMV's x), those `_read_once` finds (its weights), whose lines would otherwise push the
    shared vector's out of L2. Without a shared vector nothing is hinted: the kernel's own
    reads gain nothing, and a later kernel may read the rows again."""
    rows = [iv for iv, n in zip(outer.body.block.args, outer.extents, strict=True) if n > 1]
    streamed: frozenset[Operation] = frozenset()
    for inner in inner_loops:
        along = inner.regions[0].block.args[0]
        loads = [op for op in inner.walk() if isinstance(op, memref.LoadOp)]
        if any(along in op.indices and not set(rows) & set(op.indices) for op in loads):
            streamed |= _read_once(outer.body.block.ops, rows, along)
    return streamed


def _prefetch_streamed_rows(
    em: Emitter, lane: SSAValue, streamed: frozenset[Operation], length: int, mapping: Mapping
) -> None:
    """Lane 0 of each row's group asks L2 for the row of each streamed load (one bulk prefetch
    of `length` elements: the row is the buffer's whole last dimension, read along it, a
    multiple of 16 bytes), then the kernel waits for the kernel before it. Nothing is emitted
    where no streamed row qualifies (its row index computed in the row's body, say)."""
    rows = []
    for load in sorted(streamed, key=lambda o: str(o.memref.name_hint)):
        assert isinstance(load, memref.LoadOp)
        t = load.memref.type
        assert isinstance(t, MemRefType)
        nbytes = length * element_bytes(t.element_type)
        leading = list(load.indices)[:-1]
        if t.get_shape()[-1] == length and nbytes % 16 == 0 and all(i in mapping for i in leading):
            source = mapping.get(load.memref, load.memref)
            rows.append((source, [mapping[i] for i in leading], nbytes))
    if not rows:
        return
    with em.if_(em.less(lane, 1)) as (then_block, _, _), em.into(then_block):
        for source, leading, nbytes in rows:
            em.op(tile.PrefetchL2Op(source, [*leading, em.index(0)], nbytes))
    em.op(tile.GridDependencyWaitOp())


def _read_once(
    ops: Iterable[Operation], rows: Sequence[SSAValue], along: SSAValue
) -> frozenset[memref.LoadOp]:
    """The loads among `ops` (nested ones too) that read each element of their buffer once in
    the kernel: the only load of their buffer, indexed by each of the `rows` indices and by
    `along` (the inner loop's)."""
    loads = [op for top in ops for op in top.walk() if isinstance(op, memref.LoadOp)]
    count = Counter(op.memref for op in loads)
    return frozenset(
        op for op in loads if count[op.memref] == 1 and all(v in op.indices for v in [*rows, along])
    )


def _inner_loops(outer: loop.ParallelOp) -> list[loop.ParallelOp | loop.ReduceOp]:
    return [o for o in outer.body.block.ops if isinstance(o, loop.ParallelOp | loop.ReduceOp)]


def _width(outer: loop.ParallelOp, length: int, vec: int) -> int:
    """The vector width every inner loop's accesses allow, at most `vec`."""
    return min(
        vector_width(o.body.block.ops, o.body.block.args[0], length, vec)
        for o in _inner_loops(outer)
    )


class _RowEmitter:
    """Emits the body of one row for one thread of the row's group."""

    def __init__(
        self,
        em: Emitter,
        lane: SSAValue,
        threads: int,
        width: int,
        chunks: int,
        cache: int,
        streamed: frozenset[Operation] = frozenset(),
    ) -> None:
        self.em = em
        self.streamed = streamed
        """The loads whose 128-bit loads carry the L2 evict-first hint (`evict`)."""
        self.lane = lane
        self.threads = threads
        self.width = width
        self.chunks = chunks
        self.steps = -(-chunks // threads)
        self.cache = cache
        self.cached: dict[tuple[SSAValue, tuple[SSAValue, ...]], SSAValue] = {}

    def emit(
        self, ops: Sequence[Operation], inner_loops: Sequence[Operation], mapping: Mapping
    ) -> None:
        em = self.em
        shared_rows = self.cached_rows(inner_loops)
        for op in ops:
            if isinstance(op, loop.ReduceOp):
                self._preload(shared_rows, mapping)
                self._reduce(op, mapping)
            elif isinstance(op, loop.ParallelOp):
                self._preload(shared_rows, mapping)
                self._parallel(op, mapping)
            elif isinstance(op, memref.StoreOp):
                with em.if_(em.less(self.lane, 1)) as (then_block, _, _), em.into(then_block):
                    em.op(op.clone(value_mapper=mapping))
            else:
                em.op(op.clone(value_mapper=mapping))

    def cached_rows(self, inner_loops: Sequence[Operation]) -> list[memref.LoadOp]:
        """Returns one load per row buffer to hold in registers: with `cache` ≥ 1 each row read
        contiguously by at least two inner loops (all of them or none, within the register
        budget); with `cache=2` then each row read by one loop, the streamed ones (a GEMV's
        weights) first, as many as the budget still holds."""
        if not self.cache:
            return []
        seen: dict[tuple[SSAValue, tuple[SSAValue, ...]], list[memref.LoadOp]] = {}
        for inner in inner_loops:
            iv = inner.regions[0].block.args[0]
            dependent = depends_on(inner.regions[0].block.ops, [iv])
            keys = set()
            for o in inner.walk():
                if isinstance(o, memref.LoadOp) and is_contiguous(o.indices, iv, dependent):
                    key = (o.memref, tuple(o.indices)[:-1])
                    if key not in keys:
                        keys.add(key)
                        seen.setdefault(key, []).append(o)
        per_row = self.steps * self.width
        rows = [loads[0] for loads in seen.values() if len(loads) >= 2]
        if per_row * len(rows) > MAX_CACHED_ELEMENTS:
            rows = []
        if self.cache == 2:
            once = [loads[0] for loads in seen.values() if len(loads) == 1]
            for load in sorted(once, key=lambda o: o not in self.streamed):
                if per_row * (len(rows) + 1) <= MAX_CACHED_ELEMENTS:
                    rows.append(load)
        return rows

    def _preload(self, loads: list[memref.LoadOp], mapping: Mapping) -> None:
        em = self.em
        for load in loads:
            key = (load.memref, tuple(load.indices)[:-1])
            if key in self.cached or any(i not in mapping for i in key[1]):
                continue
            t = load.memref.type
            assert isinstance(t, MemRefType)
            regs = em.value(
                tile.AllocOp(
                    tile.memref_in([self.steps, self.width], t.element_type, tile.REGISTERS)
                )
            )
            self.cached[key] = regs
            source = mapping.get(load.memref, load.memref)
            leading = [mapping.get(i, i) for i in key[1]]

            def body(start: SSAValue, step: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
                values = em.load(source, [*leading, start], self.width, load in self.streamed)
                for k, v in enumerate(values):
                    em.op(memref.StoreOp.get(v, regs, [step, em.index(k)]))
                return []

            self._strided(body)

    def _strided(self, body: _Body, state: Sequence[SSAValue] = ()) -> list[SSAValue]:
        """Emits the thread's strided walk over the row's vectors, guarded at the tail; `body`
        gets each vector's start, the step and the carried `state`, and returns the next."""
        em = self.em
        with em.for_loop(0, self.steps, 1, list(state), unroll=True) as (step, carried, for_op):
            chunk = em.add(self.lane, em.mul(step, self.threads))
            types = [v.type for v in carried]
            if self.chunks % self.threads != 0:
                with em.if_(em.less(chunk, self.chunks), types) as (then_block, else_block, if_op):
                    with em.into(then_block):
                        out = body(em.mul(chunk, self.width), step, carried)
                        if types:
                            em.op(scf.YieldOp(*out))
                    if else_block is not None:
                        else_block.add_op(scf.YieldOp(*carried))
                result = list(if_op.results)
            else:
                result = body(em.mul(chunk, self.width), step, carried)
            em.op(scf.YieldOp(*result))
        return list(for_op.results)

    def _lanes(self, inner: Operation, start: SSAValue, step: SSAValue) -> LaneEmitter:
        em = self.em

        def cached_load(op: memref.LoadOp, indices: list[SSAValue]) -> list[SSAValue] | None:
            regs = self.cached.get((op.memref, tuple(op.indices)[:-1]))
            if regs is None or op.indices[-1] != inner.regions[0].block.args[0]:
                return None
            return [
                em.value(memref.LoadOp.get(regs, [step, em.index(k)])) for k in range(self.width)
            ]

        return LaneEmitter(
            em,
            inner.regions[0].block.args[0],
            start,
            self.width,
            cached_load,
            evict_first=self.streamed,
        )

    def _reduce(self, op: loop.ReduceOp, mapping: Mapping) -> None:
        em = self.em

        def fold(start: SSAValue, step: SSAValue, carried: list[SSAValue]) -> list[SSAValue]:
            elements = self._lanes(op, start, step).emit(list(op.body.block.ops), mapping)
            state = carried
            for element in elements:
                state = inline_region(em, op.combine, [*state, *element], mapping)
            return state

        init = [mapping.get(v, v) for v in op.init]
        partial = self._strided(fold, init)
        combine = tile_combine(op.combine)
        if self.threads <= 32:
            total = em.op(tile.WarpReduceOp(partial, combine, self.threads)).results
        else:
            total = em.op(tile.BlockReduceOp(partial, combine)).results
        mapping.update(zip(op.res, total, strict=True))

    def _parallel(self, op: loop.ParallelOp, mapping: Mapping) -> None:
        def body(start: SSAValue, step: SSAValue, _: list[SSAValue]) -> list[SSAValue]:
            self._lanes(op, start, step).emit(list(op.body.block.ops), mapping)
            return []

        self._strided(body)
