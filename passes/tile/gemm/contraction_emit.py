"""The FP32 contraction's emitter: a tile kernel from a `Tiles` plan (rule: contraction.py).

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
from xdsl.dialects.builtin import f32
from xdsl.ir import Operation, SSAValue

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.emit import Emitter, LaneEmitter, Mapping, inline_region, vector_width
from tinyopt.passes.tile.gemm.contraction_cp_async import (
    CopiedSide,
    CpAsyncPipeline,
    copied_side,
    plain_load,
)
from tinyopt.passes.tile.gemm.contraction_match import Contraction
from tinyopt.passes.tile.gemm.contraction_plan import (
    K_VECTOR,
    Tiles,
    row_major,
    serpentine,
    two_steps_per_iteration,
)
from tinyopt.passes.tile.gemm.contraction_swizzle import swizzled, swizzled_shape
from tinyopt.passes.tile.gemm.contraction_tma import TmaPipeline, TmaSide, tensor_map_args, tma_side
from tinyopt.passes.tile.gemm.next_tile_prefetch import PrefetchedSide, prefetch_tile
from tinyopt.passes.tile.target import Target


def copied_sides(
    c: Contraction, t: Tiles, name: str, m0: SSAValue | None, n0: SSAValue | None
) -> list[CopiedSide] | list[TmaSide] | str:
    """How the copy engine `t.copy` (cp_async or tma) copies A and B (origins `m0`, `n0`), or
    why it cannot."""
    batch, m, n, k = c.extents
    k_iv = c.reduce.body.block.args[0]
    batch_ivs = list(c.nest.body.block.args[:-2])
    sides = []
    for which, side, value, iv, origin, extent, size in (
        ("A", c.a_side, c.a_value, c.m_iv, m0, m, t.bm),
        ("B", c.b_side, c.b_value, c.n_iv, n0, n, t.bn),
    ):
        load = plain_load(side, value, name, t.copy, which)
        if isinstance(load, str):
            return load
        if t.copy == "tma":
            copied = tma_side(load, k_iv, iv, batch_ivs, origin, size, name, which)  # type: ignore[arg-type]
        else:
            copied = copied_side(load, k_iv, k, iv, origin, extent, size, t.bk, t.vec, name, t.copy)
        if isinstance(copied, str):
            return copied
        sides.append(copied)
    return sides  # type: ignore[return-value]


@dataclass
class Staging:
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


class ContractionEmitter:
    """Emits the tiled contraction for one block."""

    def __init__(
        self,
        em: Emitter,
        c: Contraction,
        t: Tiles,
        mapping: Mapping,
        grid: tuple[int, int, int],
        name: str,
    ) -> None:
        self.em, self.c, self.t, self.mapping = em, c, t, mapping
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
        if t.copy != "ld":
            self._ring_pipeline()
            return
        a = self._staging(c.a_side, c.a_value, c.m_iv, self.m0, self.m, t.bm)
        b = self.b = self._staging(c.b_side, c.b_value, c.n_iv, self.n0, self.n, t.bn)
        self._tiles(a, b, self._accumulators())

    def _tiles(self, a: Staging, b: Staging, acc: SSAValue) -> None:
        """Runs the block's tile: its K loop, then the epilogue."""
        em, t = self.em, self.t
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

    static_shared = Target.static_shared
    """Shared memory a block may declare statically (past it the cp.async ring is dynamic)."""
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
        a: Staging,
        b: Staging,
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

    def _at_tile(self, a: Staging, b: Staging, tile_index: SSAValue) -> tuple[Staging, Staging]:
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

    def _ring_pipeline(self) -> None:
        """The K loop with both sides copied global → shared into a ring, by cp.async
        (contraction_cp_async.py) or by TMA with mbarriers (contraction_tma.py)."""
        em, t = self.em, self.t
        sides = copied_sides(self.c, t, self.name, self.m0, self.n0)
        assert not isinstance(sides, str), "the plan checked it (copy_refusal)"
        if t.copy == "tma":
            kernel = em.block.parent_op()
            assert kernel is not None
            maps = tensor_map_args(sides, t.bk, self.name)  # type: ignore[arg-type]
            assert not isinstance(maps, str), "the plan checked it (copy_refusal)"
            tile.set_tensor_maps(kernel, maps)
            shapes = [s.shape(t.stages, t.bk) for s in sides]
            dynamic = True
        else:
            shapes = [s.shape(t.stages, t.bk, t.pad) for s in sides]
            if t.swizzle:
                shapes = [swizzled_shape(shape) for shape in shapes]
            dynamic = sum(4 * math.prod(shape) for shape in shapes) > self.static_shared
        for s, shape in zip(sides, shapes, strict=True):
            s.smem = em.value(tile.AllocOp(tile.memref_in(shape, f32, tile.SHARED), dynamic))
        acc = self._accumulators()
        a, b = sides

        def accumulate(slot: SSAValue) -> None:
            self._accumulate(a.smem, b.smem, slot, acc, a.k_major, b.k_major)

        if t.copy == "tma":
            args = list(em.block.args)
            pipeline = TmaPipeline(
                em, self.mapping, args, self.tid, t.threads, self.k, t.bk, t.stages, t.ws
            )
            pipeline.emit(sides, accumulate, lambda: self._epilogue(acc))  # type: ignore[arg-type]
            return
        k_iv = self.c.reduce.body.block.args[0]
        CpAsyncPipeline(
            em, self.mapping, self.tid, t.threads, k_iv, self.k, t.bk, t.stages, t.swizzle
        ).emit(sides, accumulate)  # type: ignore[arg-type]
        self._epilogue(acc)

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
    ) -> Staging:
        """Chooses how a side is staged: vectors along whichever axis its loads are contiguous."""
        em, t, c = self.em, self.t, self.c
        k_iv = c.reduce.body.block.args[0]
        along_k = vector_width(side, k_iv, t.bk, t.vec)
        along_k = along_k if self.k % along_k == 0 else 1
        along_outer = vector_width(side, outer_iv, tile_outer, t.vec)
        along_outer = along_outer if outer_extent % along_outer == 0 else 1
        width = max(along_k, along_outer)
        chunks = tile_outer * t.bk // width
        per_thread = -(-chunks // t.threads)
        regs = em.value(tile.AllocOp(tile.memref_in([per_thread, width], f32, tile.REGISTERS)))
        smem = em.value(
            tile.AllocOp(tile.memref_in([t.stages, t.bk, tile_outer + t.pad], f32, tile.SHARED))
        )
        return Staging(
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

    def _chunk(self, s: Staging, index: int) -> tuple[SSAValue, SSAValue, SSAValue]:
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

    def _load(self, s: Staging, step: SSAValue) -> None:
        """Evaluates the side (prologue included) on this thread's chunks into registers."""
        em, t, c = self.em, self.t, self.c
        k_iv = c.reduce.body.block.args[0]
        k0 = em.mul(step, t.bk)
        for index in range(s.per_thread):
            e, kk, oo = self._chunk(s, index)
            k, o = em.add(k0, kk), em.add(s.outer0, oo)
            tile_outer = s.smem.type.get_shape()[2] - t.pad
            if s.outer_extent % tile_outer:
                # A ragged last tile reads its rows (columns) past the data again at the last
                # one in range, without a branch: their products land in accumulators the
                # epilogue never stores. (Vectors along the outer axis divide its extent.)
                last = s.outer_extent - (1 if s.along_k else s.width)
                o = em.value(arith.MinSIOp(o, em.index(last)))
            # Guards only where a K slice or the chunks can run past the data.
            checks = [
                *([em.less(k, self.k)] if self.k % t.bk else []),
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

    def _fill(self, s: Staging, buffer: SSAValue) -> None:
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
        sides = [
            (a_smem, a_k_major, a_start, t.tm, t.bm // t.split),
            (b_smem, b_k_major, b_start, t.tn, t.bn // t.split),
        ]
        with em.for_loop(k_first, k_stop, group, unroll=True) as (k0, _, _):
            rows = [
                self._rows(smem, buffer, k0, *at) if major else None for smem, major, *at in sides
            ]
            for sub in range(group):
                kk = em.add(k0, sub)
                a, b = (
                    side_rows[sub] if side_rows else self._fragment(smem, buffer, kk, *at)
                    for side_rows, (smem, _, *at) in zip(rows, sides)
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
