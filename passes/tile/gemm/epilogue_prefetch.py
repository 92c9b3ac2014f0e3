"""Issuing a GEMM epilogue's global loads ahead of its math, so their latencies overlap.

An epilogue such as the MLP's `silu(gate) * up` reads other buffers; emitted as it stands, each
guarded group of columns waits one memory latency for its load. `EpiloguePrefetch` splits it in
two phases: the first issues, for every group of a stretch of the tile, the loads that do not
depend on the accumulator into registers; the second runs the epilogue reading those
registers. Both phases are guarded by the same bounds check.

A load that is the same for all rows of the tile (a linear's bias: its index is the column
alone) is issued once per group of columns for all of a thread's rows, guarded by the column
bound only; a load per row (a residual) once per row. The MLP's bias epilogue held four copies
of each bias value per thread, and a persistent GEMM's consumers spilled them (2026-12-04: 208
bytes of stack at 128×256).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

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


@dataclass
class _Group:
    """Prefetched loads issued together, the ops computing their indices, their registers
    and the slot each issued group of lanes took."""

    loads: list[memref.LoadOp]
    slice: list[Operation]
    registers: list[SSAValue] = field(default_factory=list)
    slots: dict[object, int] = field(default_factory=dict)


class EpiloguePrefetch:
    """The accumulator-independent loads of one epilogue, and the registers they land in:
    `issue` names a group (a key) of `width` lanes of the loads that are the same for every
    row (`shared`, a bias) or of those read per row (`by_row`, a residual); `lanes` returns
    the values a group of lanes got."""

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
        loads = prefetched_loads(epilogue, accumulators)
        by_row = depends_on(epilogue, [row])
        self.shared, self.by_row = (
            _Group(group, backward_slice([op.res for op in group], epilogue))
            for group in (
                [op for op in loads if op.res not in by_row],
                [op for op in loads if op.res in by_row],
            )
        )
        for group, size in ((self.shared, groups * width), (self.by_row, groups * rows * width)):
            group.registers = [
                em.value(tile.AllocOp(tile.memref_in([size], op.res.type, tile.REGISTERS)))
                for op in group.loads
            ]
        self.rest = [op for op in epilogue if op not in loads]
        """The epilogue without the prefetched loads: what the second phase emits."""

    def __bool__(self) -> bool:
        return bool(self.shared.loads or self.by_row.loads)

    def issue(self, key: object, start: SSAValue, mapping: Mapping, by_row: bool) -> None:
        """Emits the loads of one group (the per-row ones, or those the same for every row) at
        `start` of the lane index, inside its guard, into the next free registers."""
        em, group = self.em, self.by_row if by_row else self.shared
        slot = group.slots[key] = len(group.slots) * self.width
        lanes = LaneEmitter(em, self.iv, start, self.width)
        lanes.emit(group.slice, mapping)
        for load, registers in zip(group.loads, group.registers, strict=True):
            for lane, lane_map in enumerate(lanes.lanes):
                em.op(memref.StoreOp.get(lane_map[load.res], registers, [em.index(slot + lane)]))

    def lanes(self, shared_key: object, row_key: object) -> list[Mapping]:
        """Returns, per lane, each prefetched load's value read back from its register: the
        shared loads' of group `shared_key`, the per-row loads' of group `row_key` (emitted where
        it is called: inside the group's guard)."""
        em = self.em
        values: list[Mapping] = [{} for _ in range(self.width)]
        for group, key in ((self.shared, shared_key), (self.by_row, row_key)):
            if not group.loads:
                continue
            slot = group.slots[key]
            for lane in range(self.width):
                for load, registers in zip(group.loads, group.registers, strict=True):
                    index = [em.index(slot + lane)]
                    values[lane][load.res] = em.value(memref.LoadOp.get(registers, index))
        return values
