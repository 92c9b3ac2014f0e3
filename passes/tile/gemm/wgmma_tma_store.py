"""The TMA-store epilogue of the wgmma GEMM (`store=tma`, `WgmmaTiles.store`).

The staged epilogue (`store=smem`) writes each consumer warpgroup's f32 accumulators to shared
memory, reads them back as 8 consecutive columns of a row, applies the epilogue and stores 16
bytes a thread to global memory: two passes over shared memory and a global store per thread
and 8 columns, all on the consumers' time. Here the epilogue runs on the accumulators where the
wgmma fragment holds them (as `store=direct`), its 16-bit results go to a tile of the output's
type in shared memory (64 rows × 64 columns a box, 128-byte swizzled, so a warp's 4-byte stores
meet no bank conflict), and one thread of the warpgroup copies each box to the output with a
TMA store (`tile.tma_store`), which clips what lies past M and N. The consumers go on to the next
tile while the copy drains; before a warpgroup writes its tile again, that thread waits until
the copies have read it (`tile.bulk_wait read`), and the warpgroup meets at its barrier.

It takes the plain store of a 16-bit output: the epilogue's last op stores the value at the
nest's indices (batch, m, n) of an output argument nothing else in the kernel touches, whose
rows are whole 16-byte units (TMA's stride rule), in blocks of whole 64-column boxes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import BlockArgument, SSAValue

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.gemm.contraction_match import Contraction
from tinyopt.passes.tile.gemm.wgmma_plan import BK, SWIZZLE, WARPGROUP, WgmmaTiles, _fail

if TYPE_CHECKING:
    from tinyopt.passes.tile.gemm.wgmma import _WgmmaEmitter

BOX_ROWS = 64
"""Rows of a TMA-stored box: a consumer warpgroup's rows."""
BOX_COLUMNS = BK
"""Columns of a box: one 128-byte swizzle row of 16-bit values."""


def tma_output(kernel: loop.KernelOp, c: Contraction) -> tuple[memref.StoreOp, int] | str:
    """The epilogue's store of the output and that output's kernel argument, or what keeps a
    TMA store from writing it."""
    stores = [op for op in c.epilogue if isinstance(op, memref.StoreOp)]
    if len(stores) != 1 or stores[0] is not c.epilogue[-1]:
        return "an epilogue that ends in its only store"
    store = stores[0]
    output = store.memref
    if not isinstance(output, BlockArgument) or output.owner is not kernel.body.block:
        return "a store to an argument of the kernel"
    if list(store.indices) != list(c.nest.body.block.args):
        return "a store at the output element (batch, m, n) itself"
    t = output.type
    assert isinstance(t, MemRefType)
    if str(t.element_type) not in ("bf16", "f16"):
        return f"a 16-bit float output (bf16 or f16), not {t.element_type}"
    if t.get_shape()[-1] * 2 % 16:
        columns = t.get_shape()[-1]
        return f"output rows of whole 16-byte units (N a multiple of 8), not N = {columns}"
    if any(use.operation is not store for use in output.uses):
        return "an output the kernel only stores to, once"
    return store, output.index


def tma_store_refusal(kernel: loop.KernelOp, c: Contraction, t: WgmmaTiles) -> str | None:
    """Why plan `t` cannot end in the TMA-store epilogue, or None (also None where `t` does not
    ask for it)."""
    if t.store != "tma":
        return None
    output = tma_output(kernel, c)
    if isinstance(output, str):
        return _fail(f"store=tma writes the output with TMA stores: it needs {output}")
    if t.tile_n % BOX_COLUMNS or t.cluster > 1:
        return _fail(
            f"store=tma stores whole boxes of {BOX_COLUMNS} columns, from no cluster split: "
            f"got bn={t.bn} cluster={t.cluster}"
        )
    return None


def output_map(kernel: loop.KernelOp, arg: int) -> tile.TensorMapArg:
    """The tensor map of the output, kernel argument `arg` (`tma_output`): boxes of the
    warpgroup's rows and 64 columns, swizzled."""
    rank = len(kernel.body.block.args[arg].type.get_shape())  # type: ignore[attr-defined]
    return tile.TensorMapArg(arg, (*[1] * (rank - 2), BOX_ROWS, BOX_COLUMNS), SWIZZLE)


class TmaEpilogue:
    """The output tile in shared memory and the TMA stores of one consumer warpgroup."""

    def __init__(self, g: _WgmmaEmitter, output: SSAValue) -> None:
        em, t = g.em, g.t
        self.g, self.output = g, output
        element = output.type.element_type  # type: ignore[attr-defined]
        shape = [t.consumers, t.tile_n // BOX_COLUMNS, BOX_ROWS, BOX_COLUMNS]
        self.tile = em.value(tile.AllocOp(tile.memref_in(shape, element, tile.SHARED), True))
        # The thread's place in the wgmma D fragment, once for every tile: rows 16·warp +
        # lane/4 (+8), columns 8j + 2(lane%4) (+1); the warpgroup's first thread leads.
        local = em.rem(g.tid, WARPGROUP)
        lane = em.rem(local, 32)
        self.quad = em.div(lane, 4)  # the row's place in its 8 rows: what its units XOR with
        self.row = em.add(em.mul(em.div(local, 32), 16), self.quad)
        self.pair = em.mul(em.rem(lane, 4), 2)
        self.leader = em.value(arith.CmpiOp(local, em.index(0), "eq"))

    def begin(self, group: SSAValue) -> None:
        """Waits until the warpgroup's last stores have read its tile."""
        em = self.g.em
        with em.when([self.leader]):
            em.op(tile.BulkWaitOp(read=True))
        em.op(tile.NamedBarrierOp(self._barrier(group), WARPGROUP))

    def place(
        self, group: SSAValue, half: int, group_of_8: int, first: int, values: list[SSAValue]
    ) -> None:
        """Writes `values`, the thread's results of fragment columns 8·`group_of_8` + 2(lane%4)
        + `first`.. in its row `half` (0: 16·warp + lane/4, 1: 8 below), to the tile."""
        em = self.g.em
        row = em.add(self.row, 8 * half)
        unit = em.value(arith.XOrIOp(em.index(group_of_8 % 8), self.quad))
        column = em.add(em.mul(unit, 8), em.add(self.pair, first))
        index = [group, em.index(group_of_8 // 8), row, column]
        if len(values) == 1:
            em.op(memref.StoreOp.get(values[0], self.tile, index))
        else:
            em.op(tile.VectorStoreOp(values, self.tile, index))

    def store(self, group: SSAValue) -> None:
        """Once the warpgroup has written its tile: its boxes to the output, one thread's TMA
        stores in one bulk group."""
        g = self.g
        em, t = g.em, g.t
        em.op(tile.FenceProxyAsyncOp())
        em.op(tile.NamedBarrierOp(self._barrier(group), WARPGROUP))
        row = em.add(g.m0, em.mul(group, BOX_ROWS))
        ivs = g.c.nest.body.block.args
        batch = [g.mapping[ivs[0]]] if len(ivs) == 3 else []
        with em.when([self.leader]):
            for box in range(t.tile_n // BOX_COLUMNS):
                coords = [*batch, row, em.add(g.n0, box * BOX_COLUMNS)]
                source = [group, em.index(box), em.index(0), em.index(0)]
                em.op(tile.TmaStoreOp(self.tile, source, self.output, coords))
            em.op(tile.BulkCommitOp())

    def finish(self) -> None:
        """Before the block exits: the last stores done."""
        with self.g.em.when([self.leader]):
            self.g.em.op(tile.BulkWaitOp(read=False))

    def _barrier(self, group: SSAValue) -> SSAValue:
        return self.g.em.add(group, 1)  # as the staged epilogue's: 0 is __syncthreads
