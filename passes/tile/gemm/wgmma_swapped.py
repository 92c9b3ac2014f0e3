"""The swapped 3xTF32 GEMM (`wgmma_3xtf32.py`'s `swap`): the wgmma pipeline of `wgmma.py`
with the product's sides exchanged, for f32 linears of few rows; and the epilogues of a
swapped product, which the f16/bf16 swap (`wgmma_swap.py`) shares: direct from the
accumulators, or through shared memory (`swapped_staged_epilogue`).

`Yᵀ = W·Xᵀ`: a block's consumer warpgroups each take 64 rows of the `[N, K]` weight as wgmma's
A operand, read from the ring's swizzled tile into registers and split there into TF32 big and
small parts (`wgmma_tf32_split.split_fragment`), and the block's bn rows of X are B, split by
the producer warpgroup into big and small tiles of their own (`TF32Split.split_rows`). A K step
is three m64nNk8 products per k8 slice (small·big, big·small, big·big), summed in registers of
their own and added to the f32 accumulators, as the plain 3xTF32 loop does. The accumulators
hold the output transposed, so the epilogue runs on them where they lie.

The K order inside a 32-wide step is permuted alike on both sides (`split_fragment`), so each
thread's A fragments are 8 consecutive K elements of a row: two 16-byte shared loads. A step
with an element that needs f32 FMA (infinite, NaN, or nonzero below `LEAST_SPLIT`) is added in
f32 FMA from the tiles as they came: the producer zeroes B's split tiles where B holds such an
element and records it for the slot; each consumer warpgroup agrees with itself alone
(`bar.red.or`) and zeroes its A registers, so the two consumer warpgroups never wait for each
other.
"""

from __future__ import annotations

from typing import Any

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import f32, i32
from xdsl.ir import SSAValue

from tinyopt.dialects import tile
from tinyopt.passes.tile.emit import LaneEmitter, vector_width
from tinyopt.passes.tile.gemm.wgmma_plan import ATOM, WARPGROUP
from tinyopt.passes.tile.gemm.wgmma_tf32_split import SpecialScan, i32_constant, split_fragment

PRODUCER_SPLIT_BARRIER = 3
"""The swapped 3xTF32 plan's producer warpgroup's barrier, where its threads agree whether a
slot's B tile needs f32 FMA (its consumers never split in shared memory)."""

VOTE_BARRIER = 5
"""The swapped plan's first per-consumer-warpgroup barrier (5 + warpgroup): where a
warpgroup agrees whether a step runs in f32 FMA."""


def swapped_produce(gemm: Any) -> None:
    """The producer warpgroup of the swapped plan: thread 0 keeps the ring's TMA copies
    `stages - 1` steps ahead, and the warpgroup splits each landed slot's B tile (A's
    rows) into its TF32 big and small tiles (`TF32Split.split_rows`), zeroes them where
    any element needs f32 FMA, records that verdict for the consumers and signals the
    slot `ready`. The split of a step runs while the consumers multiply the one before."""
    em, t, splitter = gemm.em, gemm.t, gemm.splitter
    with em.when([gemm.first]):
        with em.for_loop(0, min(t.stages - 1, gemm.steps), 1) as (step, _, _):
            gemm._produce(step, step)
            em.op(scf.YieldOp())
    with em.for_loop(0, gemm.steps, 1) as (step, _, _):
        slot = em.rem(step, t.stages)
        parity = em.ring_parity(step, t.stages, flip=False)
        em.op(tile.MbarrierWaitOp(gemm.full, slot, parity))
        mine = splitter.split_rows(slot, gemm.tid, WARPGROUP)
        barrier = em.index(PRODUCER_SPLIT_BARRIER)
        special = em.value(tile.NamedBarrierAnyOp(barrier, WARPGROUP, mine))
        with em.when([special]):
            splitter.clear_rows(slot, gemm.tid, WARPGROUP)
        with em.when([gemm.first]):
            flag = em.value(arith.SelectOp(special, i32_constant(em, 1), i32_constant(em, 0)))
            em.op(memref.StoreOp.get(flag, gemm.special, [slot]))
        em.op(tile.FenceProxyAsyncOp())
        em.op(tile.MbarrierArriveOp(gemm.ready, slot))
        ahead = em.add(step, t.stages - 1)
        with em.when([gemm.first, em.less(ahead, gemm.steps)]):
            gemm._produce(ahead, ahead)
        em.op(scf.YieldOp())


def swapped_k_loop(
    gemm: Any, acc: SSAValue, first_step: SSAValue | int, row: SSAValue, group: SSAValue
) -> None:
    """The K loop of f32 operands with the roles swapped: each step, once the producer
    has split the slot's B tile (`swapped_produce`), the thread reads its TF32 fragments
    of the slot's A rows (B's) and splits them in registers (`split_fragment`); each k8
    slice's three products (small·big, big·small, big·big) take A from the registers,
    into registers of their own, added to `acc` once done, as in `_split_k_loop`. The
    warpgroup agrees on its own (`bar.red.or`) whether the step holds an infinity or a
    tiny value in its A rows or anywhere in B: such a step adds its products in f32 FMA
    from the tiles as they came, and its A registers are zeroed (B's tiles are zeroed by
    the producer where B holds it). The two consumer warpgroups never wait for each
    other, so one's splits run beside the other's products."""
    em, t, splitter = gemm.em, gemm.t, gemm.splitter
    products = em.value(tile.AllocOp(tile.memref_in([t.bn // 2], f32, tile.REGISTERS)))
    slices = gemm.bk // tile.WGMMA_K_TF32
    registers = em.value(tile.AllocOp(tile.memref_in([slices * 8], i32, tile.REGISTERS)))
    """The step's A registers: per k8 slice its 4 big parts, then its 4 small ones."""
    local = em.rem(gemm.tid, WARPGROUP)
    lane = em.rem(local, 32)
    warp_row = em.add(row, em.mul(em.div(local, 32), 16))
    zero = i32_constant(em, 0)
    vote = em.add(group, VOTE_BARRIER)
    with em.for_loop(0, gemm.steps, 1) as (step, _, _):
        ring_step = em.add(first_step, step)
        slot = em.rem(ring_step, t.stages)
        parity = em.ring_parity(ring_step, t.stages, flip=False)
        em.op(tile.MbarrierWaitOp(gemm.ready, slot, parity))
        scan = SpecialScan(em)
        fragments = split_fragment(em, gemm.a_smem, slot, warp_row, lane, scan)
        for s, (bigs, smalls) in enumerate(fragments):
            for r, value in enumerate(bigs + smalls):
                em.op(memref.StoreOp.get(value, registers, [em.index(8 * s + r)]))
        flag = em.value(memref.LoadOp.get(gemm.special, [slot]))
        special = em.value(arith.CmpiOp(flag, zero, "ne"))
        special = em.value(arith.OrIOp(special, scan.special()))
        special = em.value(tile.NamedBarrierAnyOp(vote, WARPGROUP, special))
        with em.when([special]):
            splitter.exact_step(acc, slot, row)
            for r in range(slices * 8):
                em.op(memref.StoreOp.get(zero, registers, [em.index(r)]))
        operands = [
            [em.value(memref.LoadOp.get(registers, [em.index(r)])) for r in range(8 * s, 8 * s + 8)]
            for s in range(slices)
        ]  # every A register is set before the first wgmma reads one
        em.op(tile.WgmmaFenceOp())
        for s, parts in enumerate(operands):
            bigs, smalls = parts[:4], parts[4:]
            b_index = [slot, em.index(0), em.index(s * tile.WGMMA_K_TF32)]
            pairs = ((smalls, splitter.b_big), (bigs, splitter.b_small), (bigs, splitter.b_big))
            for a, b_smem in pairs:
                em.op(
                    tile.WgmmaRegisterAOp(
                        products,
                        a,
                        b_smem,
                        b_index,
                        t.bn,
                        b_lbo=16,
                        b_sbo=ATOM,
                        b_mn_major=False,
                        overwrite=s == 0 and a is smalls,
                    )
                )
        em.op(tile.WgmmaCommitOp())
        em.op(tile.WgmmaWaitOp(0))
        gemm._add_products(acc, products)
        em.op(tile.MbarrierArriveOp(gemm.empty, slot))
        em.op(scf.YieldOp())


def swapped_epilogue(gemm: Any, acc: SSAValue, row: SSAValue) -> None:
    """Applies the epilogue to each accumulator of the swapped product (`swapped`): the
    thread's D fragment rows 16·warp + lane/4 (+8) of the block are output columns (B's
    rows from m0), its fragment columns 8j + 2(lane%4) (+1) output rows (A's from n0). A
    warp's store of one accumulator covers 8 consecutive columns of 4 rows."""
    em, t, c = gemm.em, gemm.t, gemm.c
    column0, lane = gemm._fragment_row(row)  # B's row: the output's column
    row0 = em.add(gemm.n0, em.mul(em.rem(lane, 4), 2))
    for r in range(t.bn // 2):
        n = em.add(column0, 8 * (r // 2 % 2))
        m = em.add(row0, 8 * (r // 4) + r % 2)
        with em.when([em.less(m, gemm.m), em.less(n, gemm.n)]):
            value = em.value(memref.LoadOp.get(acc, [em.index(r)]))
            local_map = dict(gemm.mapping) | {c.m_iv: m}
            LaneEmitter(em, c.n_iv, n, 1).emit(c.epilogue, local_map, [{gemm.results[0]: value}])


SWAPPED_STAGE_STRIDE = 68
"""Elements of a row of the swapped staged epilogue's f32 tile: the warpgroup's 64 output
columns and 4 of padding. A warp's transposed write of one accumulator puts 8 consecutive
columns of 4 rows 2 apart: with rows 68 elements apart its 32 lanes fall on 32 banks."""


def swapped_staged_epilogue(gemm: Any, acc: SSAValue, group: SSAValue) -> None:
    """The epilogue of the swapped product (`swapped`) through shared memory (`store=smem`):
    64 output rows (64 accumulator columns) at a time, each thread's accumulators written
    transposed into the warpgroup's f32 tile (output rows of the warpgroup's 64 output
    columns, `SWAPPED_STAGE_STRIDE` apart), then read back as `width` consecutive columns
    of one row (8: 16-byte stores), the epilogue applied to them. Only the warpgroup meets at
    its barrier (`bar.sync 1 + group, 128`)."""
    em, t, c = gemm.em, gemm.t, gemm.c
    local = em.rem(gemm.tid, WARPGROUP)
    warp, lane = em.div(local, 32), em.rem(local, 32)
    barrier = em.add(group, 1)  # 0 is __syncthreads
    # The wgmma D fragment: rows 16·warp + lane/4 (+8) are output columns, columns
    # 8j + 2(lane%4) (+1) output rows.
    fragment_row = em.add(em.mul(warp, 16), em.div(lane, 4))
    fragment_column = em.mul(em.rem(lane, 4), 2)
    column0 = em.add(gemm.m0, em.mul(group, tile.WGMMA_M))  # output column of staged column 0
    width = vector_width(c.epilogue, c.n_iv, gemm.n, 8)
    per_row = tile.WGMMA_M // width  # threads reading one staged row
    rows_per_pass = WARPGROUP // per_row
    read_row = em.div(local, per_row)
    read_column = em.mul(em.rem(local, per_row), width)
    n = em.add(column0, read_column)
    n_inside = em.less(n, gemm.n)
    loads = min(width, 4)  # f32 lanes a shared load takes: 16 bytes at most
    for chunk in range(-(-t.bn // tile.WGMMA_M)):
        if chunk or t.persistent:  # every thread has read the previous chunk (or tile)
            em.op(tile.NamedBarrierOp(barrier, WARPGROUP))
        first = chunk * tile.WGMMA_M
        for r in range(t.bn // 2):
            column = 8 * (r // 4) + r % 2  # of the fragment, past 2(lane%4)
            if not first <= column - column % 2 < first + tile.WGMMA_M:
                continue
            staged_row = em.add(fragment_column, column - first)
            staged_column = em.add(fragment_row, 8 * (r // 2 % 2))
            value = em.value(memref.LoadOp.get(acc, [em.index(r)]))
            em.op(memref.StoreOp.get(value, gemm.staging, [group, staged_row, staged_column]))
        em.op(tile.NamedBarrierOp(barrier, WARPGROUP))
        rows = min(tile.WGMMA_M, t.bn - first)
        for pass_row in range(0, rows, rows_per_pass):
            row = em.add(read_row, pass_row)
            m = em.add(gemm.n0, em.add(row, first))  # the output row
            checks = [em.less(m, gemm.m), n_inside]
            if rows % rows_per_pass:  # a partial last chunk (a width off 64 rows)
                checks.append(em.less(row, rows))
            with em.when(checks):
                values: list[SSAValue] = []
                for h in range(0, width, loads):
                    index = [group, row, em.add(read_column, h)]
                    if loads == 1:
                        values.append(em.value(memref.LoadOp.get(gemm.staging, index)))
                    else:
                        values += em.op(tile.VectorLoadOp(gemm.staging, index, loads)).results
                local_map = dict(gemm.mapping) | {c.m_iv: m}
                lanes = [{gemm.results[0]: v} for v in values]
                LaneEmitter(em, c.n_iv, n, width).emit(c.epilogue, local_map, lanes)
