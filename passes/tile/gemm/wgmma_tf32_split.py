"""The split of the 3xTF32 wgmma GEMM (`wgmma_3xtf32.py`): f32 tiles made into TF32 pairs in
shared memory, and the exact recomputation of a tile whose operands hold an infinity.

Each K step's f32 tiles arrive by TMA. The consumer threads then split every element x in
place into `big = rna(x)` (TF32: 10 mantissa bits, `cvt.rna.tf32.f32`) and, in a second
tile of the same layout, `small = rna(x - big)`, so that x = big + small to about 2^-22 of
|x|. The split is element by element, so it does not care where the 128-byte swizzle put an
element: a 16-byte chunk of a tile is read and written back at the same place. The writes
are made visible to wgmma (the async proxy) by `fence.proxy.async` and a barrier of the
consumer threads before the step's products are issued.

Special values: with x = ±inf the small terms would hold inf − inf or meet inf · 0, so the
three products would give NaN where an f32 product gives ±inf; and a subnormal part may be
flushed to zero by the tensor cores. The split therefore reduces, at the consumers' barrier
(`bar.red.or.pred`), whether any element of the step has an infinite big part (an infinite
operand, or a finite one within half a TF32 step of the f32 maximum) or is nonzero below
`LEAST_SPLIT`: a decision the same in every consumer thread. Such a step is not run on tensor
cores: each thread adds its accumulators' products of the step in f32 FMA from the tiles,
each element read back as big + small (x to 2^-22 of |x|, and exactly below `LEAST_SPLIT`,
where small keeps the unrounded remainder; small is 0 where big is infinite), and the tiles
are zeroed so that the step's tensor-core products add nothing. So ±inf, NaN and subnormals
come out as from an f32 GEMM (slowly: only steps that hold such an element take this path).

An N-major B (`[b?, K, N]`) arrives as TMA chunks of 32 columns, `[K][32]` each; TF32 wgmma
reads only K-major operands, so its split writes big and small transposed, element by
element, into K-major tiles of their own (the ring's chunk is left as it came).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any

from xdsl.dialects import arith, memref, scf
from xdsl.dialects import math as fmath
from xdsl.dialects.builtin import IntegerAttr, f32, i32
from xdsl.ir import SSAValue

from tinyopt.dialects import tile
from tinyopt.passes.tile.emit import Emitter
from tinyopt.passes.tile.gemm.wgmma_plan import WARPGROUP

SPLIT_BARRIER = 3
"""The named barrier the consumer threads meet at after a split (1 and 2 are the staged
epilogue's, one per consumer warpgroup)."""

LEAST_SPLIT = 2.0**-114
"""The smallest magnitude split on tensor cores: below it a small part could be subnormal,
which the tensor cores may flush to zero, so such a step runs in f32 FMA."""

CHUNK = 4
"""f32 elements per 16-byte shared-memory access of the split."""


class TF32Split:
    """The small tiles (and an N-major B's K-major big tile) and the code that uses them, for
    the `_WgmmaEmitter` `gemm` (its tiles, thread id and step width)."""

    def __init__(
        self, em: Emitter, gemm: Any, a_shape: list[int] | None, b_shape: list[int]
    ) -> None:
        """`a_shape` None: A is split in registers (`split_fragment`), and B's parts are
        written by the producer warpgroup into tiles of their own (`split_rows`), B's ring
        tile left as it came."""
        self.em, self.gemm = em, gemm
        shared = tile.SHARED
        self.a_small = (
            em.value(tile.AllocOp(tile.memref_in(a_shape, f32, shared), True)) if a_shape else None
        )
        self.b_small = em.value(tile.AllocOp(tile.memref_in(b_shape, f32, shared), True))
        self.b_big = gemm.b_smem
        """B's big parts, K-major: the ring's tile split in place, or for an N-major B (whose
        ring tile holds `[N/32][K][32]` chunks) a tile of their own, written transposed."""
        if gemm.mn_major or a_shape is None:
            self.b_big = em.value(tile.AllocOp(tile.memref_in(b_shape, f32, shared), True))

    def split_rows(self, slot: SSAValue, thread: SSAValue, threads: int) -> SSAValue:
        """Splits the slot's B tile (as it came, K-major) into its big and small tiles, each
        element moved from its K position to the wgmma column `split_fragment` reads A's rows
        at (position 8·(c%4) + 2s + c/4 at column 8s + c of slice s): thread `thread` of
        `threads` takes the 16-byte chunks thread, thread + threads, ... Returns whether any
        of its elements needs f32 FMA (`SpecialScan`), in this thread."""
        em, gemm = self.em, self.gemm
        scan = SpecialScan(em)
        per_row = gemm.bk // CHUNK
        for chunk in self._chunks(thread, gemm.t.bn, threads):
            index = self._k_major(slot, chunk)
            n = index[1]
            # the chunk's place in the swizzled row holds K chunk place XOR row % 8
            q = em.value(arith.XOrIOp(em.rem(chunk, per_row), em.rem(n, 8)))
            values = em.op(tile.VectorLoadOp(gemm.b_smem, index, CHUNK)).results
            for e, value in enumerate(values):
                big, small = scan.split(value)
                # K position 4q + e: column 8·(2·(q%2) + e/2) + q/2 + 4·(e%2)
                column = em.add(em.mul(em.rem(q, 2), 16), em.div(q, 2))
                column = em.add(column, 8 * (e // 2) + 4 * (e % 2))
                where = [slot, n, swizzled(em, n, column)]
                em.op(memref.StoreOp.get(big, self.b_big, where))
                em.op(memref.StoreOp.get(small, self.b_small, where))
        return scan.special()

    def clear_rows(self, slot: SSAValue, thread: SSAValue, threads: int) -> None:
        """Zeroes the chunks of the slot's B big and small tiles `split_rows` wrote in this
        thread, so that the step's tensor-core products add nothing."""
        em = self.em
        zeros = [em.f32(0.0)] * CHUNK
        for chunk in self._chunks(thread, self.gemm.t.bn, threads):
            index = self._k_major(slot, chunk)
            for tiles_of in (self.b_big, self.b_small):
                em.op(tile.VectorStoreOp(zeros, tiles_of, index))

    def split(self, slot: SSAValue, group: SSAValue) -> SSAValue:
        """Splits the slot's A and B tiles: consumer thread i takes the 16-byte chunks i, i +
        threads, ... of each; then the consumers meet, their writes fenced for wgmma. Returns
        whether any big part of the step is infinite or any part tiny, in any consumer thread
        (the same in every one)."""
        em, gemm, t = self.em, self.gemm, self.gemm.t
        assert self.a_small is not None  # A split in shared memory
        local = self._consumer(group)
        per_row = gemm.bk // CHUNK
        infinite: SSAValue | None = None
        for raw, small, rows in (
            (gemm.a_smem, self.a_small, t.bm),
            (gemm.b_smem, self.b_small, t.bn),
        ):
            transposed = raw is gemm.b_smem and gemm.mn_major
            for chunk in self._chunks(local, rows):
                if transposed:  # chunk c: K row (c / per_row) % bk of N chunk c / (bk·per_row)
                    k = em.rem(em.div(chunk, per_row), gemm.bk)
                    index = [
                        slot,
                        em.div(chunk, gemm.bk * per_row),
                        k,
                        em.mul(em.rem(chunk, per_row), CHUNK),
                    ]
                else:
                    index = self._k_major(slot, chunk)
                values = em.op(tile.VectorLoadOp(raw, index, CHUNK)).results
                bigs, smalls = [], []
                for value in values:
                    big, rest, infinite = split_value(em, value, infinite)
                    bigs.append(big)
                    smalls.append(rest)
                if transposed:
                    self._store_transposed(slot, index, k, bigs, smalls)
                else:
                    em.op(tile.VectorStoreOp(bigs, raw, index))
                    em.op(tile.VectorStoreOp(smalls, small, index))
        assert infinite is not None
        em.op(tile.FenceProxyAsyncOp())
        threads = WARPGROUP * t.consumers
        return em.value(tile.NamedBarrierAnyOp(em.index(SPLIT_BARRIER), threads, infinite))

    def _consumer(self, group: SSAValue) -> SSAValue:
        """This thread's number among the consumer threads."""
        em = self.em
        return em.add(em.mul(group, WARPGROUP), em.rem(self.gemm.tid, WARPGROUP))

    def _chunks(self, local: SSAValue, rows: int, threads: int = 0) -> Iterator[SSAValue]:
        """The 16-byte chunks of a `[rows][bk]` f32 tile that thread `local` of `threads` (by
        default the consumer threads) takes: local, local + threads, ... (each emitted as the
        caller reaches it)."""
        threads = threads or WARPGROUP * self.gemm.t.consumers
        per_row = self.gemm.bk // CHUNK
        assert rows * per_row % threads == 0
        for i in range(rows * per_row // threads):
            yield self.em.add(local, i * threads)

    def _k_major(self, slot: SSAValue, chunk: SSAValue) -> list[SSAValue]:
        """The index of 16-byte chunk `chunk` of the slot's K-major tile (row chunk / (bk/4))."""
        em, per_row = self.em, self.gemm.bk // CHUNK
        return [slot, em.div(chunk, per_row), em.mul(em.rem(chunk, per_row), CHUNK)]

    def _store_transposed(
        self,
        slot: SSAValue,
        index: list[SSAValue],
        k: SSAValue,
        bigs: list[SSAValue],
        smalls: list[SSAValue],
    ) -> None:
        """Stores the parts of the 4 columns an N-major chunk read at `index` (K row `k`)
        into the K-major B tiles: the 16-byte chunk read is chunk (q XOR k%8) of its
        128-byte row, so it holds columns 32·j + 4·(q XOR k%8) + 0..3."""
        em, gemm = self.em, self.gemm
        _, j, _, column = index
        q = em.div(column, CHUNK)
        first = em.add(em.mul(j, gemm.bk), em.mul(em.value(arith.XOrIOp(q, em.rem(k, 8))), CHUNK))
        for lane, (big, small) in enumerate(zip(bigs, smalls, strict=True)):
            n = em.add(first, lane)
            where = [slot, n, swizzled(em, n, k)]
            em.op(memref.StoreOp.get(big, self.b_big, where))
            em.op(memref.StoreOp.get(small, self.b_small, where))

    def clear(self, slot: SSAValue, group: SSAValue) -> None:
        """Zeroes the slot's four tiles once every consumer thread has read them, so the
        step's tensor-core products add nothing (`exact_step` added them)."""
        em, gemm, t = self.em, self.gemm, self.gemm.t
        threads = WARPGROUP * t.consumers
        em.op(tile.NamedBarrierOp(em.index(SPLIT_BARRIER), threads))
        local = self._consumer(group)
        zeros = [em.f32(0.0)] * CHUNK
        tiles = ((gemm.a_smem, self.a_small, t.bm), (self.b_big, self.b_small, t.bn))
        for big, small, rows in tiles:
            for chunk in self._chunks(local, rows):
                index = self._k_major(slot, chunk)
                for tiles_of in (big, small):
                    em.op(tile.VectorStoreOp(zeros, tiles_of, index))
        em.op(tile.FenceProxyAsyncOp())
        em.op(tile.NamedBarrierOp(em.index(SPLIT_BARRIER), threads))

    def exact_step(self, acc: SSAValue, slot: SSAValue, row: SSAValue) -> None:
        """Adds the slot's products to the warpgroup's accumulators (rows `row..row + 63` of
        the block tile, in the wgmma fragment layout) in f32 FMA, each element read as big +
        small from its 128-byte swizzled place (where A is split in registers, A and B as
        they came)."""
        em, gemm, t = self.em, self.gemm, self.gemm.t
        local = em.rem(gemm.tid, WARPGROUP)
        lane = em.rem(local, 32)
        first_row = em.add(row, em.add(em.mul(em.div(local, 32), 16), em.div(lane, 4)))
        first_column = em.mul(em.rem(lane, 4), 2)
        rows = [em.add(first_row, 8 * half) for half in range(2)]
        columns = [em.add(first_column, 8 * j + e) for j in range(t.tile_n // 8) for e in range(2)]

        def element(big: SSAValue, small: SSAValue | None, r: SSAValue, k: SSAValue) -> SSAValue:
            """Element (r, k) of a K-major tile pair: big + small (of a tile not split in
            shared memory, the f32 as it came)."""
            index = [slot, r, swizzled(em, r, k)]
            parts = [em.value(memref.LoadOp.get(t, index)) for t in (big, small) if t]
            return em.value(arith.AddfOp(*parts)) if small else parts[0]

        with em.for_loop(0, gemm.bk, 1) as (k, _, _):
            a = [element(gemm.a_smem, self.a_small, r, k) for r in rows]  # raw: no a_small
            b_tiles = (self.b_big, self.b_small) if self.a_small else (gemm.b_smem, None)
            for c, n in enumerate(columns):
                b = element(*b_tiles, n, k)
                j, e = divmod(c, 2)
                for half in range(2):
                    r = em.index(4 * j + 2 * half + e)
                    old = em.value(memref.LoadOp.get(acc, [r]))
                    product = em.value(arith.MulfOp(a[half], b))
                    em.op(memref.StoreOp.get(em.value(arith.AddfOp(old, product)), acc, [r]))
            em.op(scf.YieldOp())


def split_value(
    em: Emitter, value: SSAValue, special: SSAValue | None
) -> tuple[SSAValue, SSAValue, SSAValue]:
    """Splits an f32 into TF32 big and small parts (small = 0 where big is infinite; the
    unrounded remainder below `LEAST_SPLIT`) and returns them with `special` or-ed with
    whether the value needs f32 FMA (big infinite, or nonzero below `LEAST_SPLIT`)."""
    inf, zero, least = em.f32(float("inf")), em.f32(0.0), em.f32(LEAST_SPLIT)
    big = em.value(tile.ToTf32Op(value))
    is_inf = em.value(arith.CmpfOp(em.value(fmath.AbsFOp(big)), inf, "oeq"))
    remainder = em.value(arith.SubfOp(value, big))  # exact in f32
    rest = em.value(tile.ToTf32Op(remainder))
    magnitude = em.value(fmath.AbsFOp(value))
    tiny = em.value(
        arith.AndIOp(
            em.value(arith.CmpfOp(magnitude, zero, "ogt")),
            em.value(arith.CmpfOp(magnitude, least, "olt")),
        )
    )
    rest = em.value(arith.SelectOp(tiny, remainder, rest))
    small = em.value(arith.SelectOp(is_inf, zero, rest))
    flagged = em.value(arith.OrIOp(is_inf, tiny))
    if special is not None:
        flagged = em.value(arith.OrIOp(special, flagged))
    return big, small, flagged


class SpecialScan:
    """Splits f32 values into TF32 big and small parts (`cvt.rna`, then the remainder, whose
    low 13 bits the tensor cores drop: 1.72-1.76e-7 relative error against float64 at
    48×136×{32..160} on the CPU emulation, where a rounded remainder gave 1.66-1.76e-7 and a
    truncated big part 3.7-3.8e-7), and keeps, across them, whether any needs f32 FMA (unlike
    `split_value`, which makes each value's parts exact): an infinite big part (|x| at or past
    `ROUNDS_TO_INF`, or NaN) or a nonzero |x| below `LEAST_SPLIT`, found from the largest and
    the least nonzero magnitude's bits (two integer min/max a value, no branch). The parts
    are exact only where no value needs FMA; a step holding one runs in f32 FMA instead."""

    def __init__(self, em: Emitter) -> None:
        self.em = em
        self.largest: SSAValue | None = None
        """The largest |x| bits seen (NaN's above infinity's)."""
        self.least: SSAValue | None = None
        """The least of (|x| bits - 1) XOR 2^31 seen, signed: a nonzero magnitude's bits
        less 2^31 + 1, in their order, zero's the largest of all; so the least is the
        smallest nonzero magnitude's where there is one."""

    def split(self, value: SSAValue) -> tuple[SSAValue, SSAValue]:
        em = self.em
        big = em.value(tile.ToTf32Op(value))
        small = em.value(arith.SubfOp(value, big))  # the tensor cores drop its low 13 bits
        bits = em.value(arith.BitcastOp(value, i32))
        magnitude = em.value(arith.AndIOp(bits, i32_constant(em, 0x7FFFFFFF)))
        below = em.value(arith.SubiOp(magnitude, i32_constant(em, 1)))  # -1 for zero, no overflow
        shifted = em.value(arith.XOrIOp(below, i32_constant(em, -(1 << 31))))
        if self.largest is None:
            self.largest, self.least = magnitude, shifted
        else:
            assert self.least is not None
            self.largest = em.value(arith.MaxSIOp(self.largest, magnitude))
            self.least = em.value(arith.MinSIOp(self.least, shifted))
        return big, small

    def special(self) -> SSAValue:
        """Whether any value split so far needs f32 FMA."""
        em = self.em
        assert self.largest is not None and self.least is not None
        huge = em.value(arith.CmpiOp(self.largest, i32_constant(em, ROUNDS_TO_INF), "sge"))
        tiny_bits = _f32_bits(LEAST_SPLIT) - 1 - (1 << 31)  # as `least` holds it
        tiny = em.value(arith.CmpiOp(self.least, i32_constant(em, tiny_bits), "slt"))
        return em.value(arith.OrIOp(huge, tiny))


ROUNDS_TO_INF = 0x7F7FF000
"""The bits of the least f32 magnitude that `cvt.rna.tf32.f32` rounds to infinity (half a
TF32 step past the largest finite TF32, 0x7F7FE000)."""


def i32_constant(em: Emitter, value: int) -> SSAValue:
    """An i32 constant."""
    return em.value(arith.ConstantOp(IntegerAttr(value, i32)))


def _f32_bits(value: float) -> int:
    return struct.unpack("<i", struct.pack("<f", value))[0]


def split_fragment(
    em: Emitter, a_smem: SSAValue, slot: SSAValue, row: SSAValue, lane: SSAValue, scan: SpecialScan
) -> list[tuple[list[SSAValue], list[SSAValue]]]:
    """Reads this thread's TF32 A fragments of a 32-wide step's four m64nNk8 products from
    the slot's 128-byte swizzled f32 tile, rows `row..row+63` (its warp's 16 at `row` +
    16·warp, given in `row`), in a permuted K order: K positions
    8·(lane%4)..+7 of rows lane/4 and lane/4 + 8, as two 16-byte loads each. Returns, per
    k8 slice s, the big parts' and the small parts' bits (i32) in `tile.wgmma_reg_a`'s
    register order: (row lane/4, K 8·(lane%4) + 2s), eight rows down, then K + 1 of both.
    That is, column 8s + c of slice s holds K position 8·(c%4) + 2s + c/4; a sum over K does
    not depend on its order, so B's split tiles are permuted alike (`TF32Split.split_rows`)."""
    group, quad = em.div(lane, 4), em.rem(lane, 4)
    rows = []
    for half in range(2):
        r = em.add(row, em.add(group, 8 * half))
        values: list[SSAValue] = []
        for part in range(2):
            k = em.add(em.mul(quad, 8), 4 * part)
            index = [slot, r, swizzled(em, r, k)]
            values += em.op(tile.VectorLoadOp(a_smem, index, CHUNK)).results
        rows.append([scan.split(v) for v in values])
    slices = []
    for step in range(4):
        pairs = [rows[0][2 * step], rows[1][2 * step], rows[0][2 * step + 1], rows[1][2 * step + 1]]
        bigs = [em.value(arith.BitcastOp(big, i32)) for big, _ in pairs]
        smalls = [em.value(arith.BitcastOp(small, i32)) for _, small in pairs]
        slices.append((bigs, smalls))
    return slices


def swizzled(em: Emitter, row: SSAValue, k: SSAValue) -> SSAValue:
    """Where element k of row `row` of a 128-byte swizzled f32 tile lies in the row: in
    16-byte chunk k/4 XOR row%8 (the TMA and wgmma swizzle of 1024-byte aligned tiles)."""
    chunk = em.value(arith.XOrIOp(em.div(k, CHUNK), em.rem(row, 8)))
    return em.add(em.mul(chunk, CHUNK), em.rem(k, CHUNK))
