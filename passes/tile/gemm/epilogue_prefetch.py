"""Issuing a GEMM epilogue's global loads ahead of its math, so their latencies overlap.

An epilogue such as the MLP's `silu(gate) * up` reads other buffers; emitted as it stands, each
guarded group of columns waits one memory latency for its load. `EpiloguePrefetch` splits it in
two phases: the first issues, for every group of a stretch of the tile, the loads that do not
depend on the accumulator into registers; the second runs the epilogue reading those
registers. Both phases are guarded by the same bounds check.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import memref
from xdsl.ir import Operation, SSAValue

from tinyopt.dialects import tile
from tinyopt.passes.loop_rewrites.flash_attention import backward_slice
from tinyopt.passes.tile.emit import Emitter, LaneEmitter, Mapping, depends_on


class EpiloguePrefetch:
    """The accumulator-independent loads of one epilogue, and the registers they land in:
    `issue` names a group (a key) of `width` lanes, `lanes` returns the values they got."""

    def __init__(
        self,
        em: Emitter,
        epilogue: Sequence[Operation],
        accumulators: Sequence[SSAValue],
        iv: SSAValue,
        groups: int,
        width: int,
    ) -> None:
        self.em, self.iv, self.width = em, iv, width
        stored = {op.memref for op in epilogue if isinstance(op, memref.StoreOp)}
        needs_accumulator = depends_on(epilogue, accumulators)
        self.loads = [
            op
            for op in epilogue
            if isinstance(op, memref.LoadOp)
            and op.memref not in stored
            and op.res not in needs_accumulator
        ]
        self.slice = backward_slice([op.res for op in self.loads], epilogue)
        self.rest = [op for op in epilogue if op not in self.loads]
        """The epilogue without the prefetched loads: what the second phase emits."""
        self.registers = [
            em.value(tile.AllocOp(tile.memref_in([groups * width], op.res.type, tile.REGISTERS)))
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
