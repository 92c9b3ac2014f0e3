"""Issuing a GEMM epilogue's global loads ahead of its math, so their latencies overlap.

An epilogue such as the MLP's `silu(gate) * up` reads other buffers; emitted as it stands, each
guarded group of columns waits one memory latency for its load. `EpiloguePrefetch` splits it in
two phases: the first issues, for every group of a stretch of the tile, the loads that do not
depend on the accumulator into registers; the second runs the epilogue reading those
registers. Both phases are guarded by the same bounds check.

Where every such load is the same for all rows of the tile (a linear's bias: its index is the
column alone), a group of columns loads once for all of a thread's rows, guarded by the column
bound only: the MLP's bias epilogue held four copies of each bias value per thread, and a
persistent GEMM's consumers spilled them (2026-12-04: 208 bytes of stack at 128×256).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import memref
from xdsl.ir import Operation, SSAValue

from tinyopt.dialects import tile
from tinyopt.passes.loop_rewrites.flash_attention import backward_slice
from tinyopt.passes.tile.emit import Emitter, LaneEmitter, Mapping, depends_on


def prefetched_loads(
    epilogue: Sequence[Operation], accumulators: Sequence[SSAValue]
) -> list[memref.LoadOp]:
    """The epilogue's loads of buffers it does not store to whose values do not depend on
    the accumulators: the loads `EpiloguePrefetch` issues ahead."""
    stored = {op.memref for op in epilogue if isinstance(op, memref.StoreOp)}
    needs_accumulator = depends_on(epilogue, accumulators)
    return [
        op
        for op in epilogue
        if isinstance(op, memref.LoadOp)
        and op.memref not in stored
        and op.res not in needs_accumulator
    ]


def prefetches_by_row(
    epilogue: Sequence[Operation], accumulators: Sequence[SSAValue], row: SSAValue
) -> bool:
    """Whether a prefetched load of the epilogue reads a different value for each row (a
    residual; not a bias): those are held per row of a thread, 32 registers a load at
    128×256 blocks."""
    by_row = depends_on(epilogue, [row])
    return any(op.res in by_row for op in prefetched_loads(epilogue, accumulators))


class EpiloguePrefetch:
    """The accumulator-independent loads of one epilogue, and the registers they land in:
    `issue` names a group (a key) of `width` lanes, `lanes` returns the values they got."""

    def __init__(
        self,
        em: Emitter,
        epilogue: Sequence[Operation],
        accumulators: Sequence[SSAValue],
        iv: SSAValue,
        row: SSAValue,
        groups: int,
        rows: int,
        width: int,
    ) -> None:
        """`groups` groups of `width` lanes along `iv` in each of `rows` rows of a thread;
        `row` the epilogue's row index."""
        self.em, self.iv, self.width = em, iv, width
        self.loads = prefetched_loads(epilogue, accumulators)
        self.slice = backward_slice([op.res for op in self.loads], epilogue)
        self.row_invariant = not prefetches_by_row(epilogue, accumulators, row)
        """Whether every prefetched load reads the same for all rows (then a group of columns
        is issued once for all of them, `issue`'s caller guarding the column alone)."""
        self.rest = [op for op in epilogue if op not in self.loads]
        """The epilogue without the prefetched loads: what the second phase emits."""
        size = groups * (1 if self.row_invariant else rows) * width
        self.registers = [
            em.value(tile.AllocOp(tile.memref_in([size], op.res.type, tile.REGISTERS)))
            for op in self.loads
        ]
        self._slots: dict[object, int] = {}

    def __bool__(self) -> bool:
        return bool(self.loads)

    def issue(self, key: object, start: SSAValue, mapping: Mapping) -> None:
        """Emits the loads of the group at `start` of the lane index (inside its guard) into
        the next free registers."""
        em = self.em
        slot = self._slots[key] = len(self._slots) * self.width
        lanes = LaneEmitter(em, self.iv, start, self.width)
        lanes.emit(self.slice, mapping)
        for load, registers in zip(self.loads, self.registers, strict=True):
            for lane, lane_map in enumerate(lanes.lanes):
                em.op(memref.StoreOp.get(lane_map[load.res], registers, [em.index(slot + lane)]))

    def lanes(self, key: object) -> list[Mapping]:
        """Returns, per lane of group `key`, each prefetched load's value read back from its
        register (emitted where it is called: inside the group's guard)."""
        em, slot = self.em, self._slots[key]
        return [
            {
                load.res: em.value(memref.LoadOp.get(registers, [em.index(slot + lane)]))
                for load, registers in zip(self.loads, self.registers, strict=True)
            }
            for lane in range(self.width)
        ]
