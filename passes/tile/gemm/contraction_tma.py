"""Copy engine `copy=tma` of the FP32 contraction: the A and B tiles of each K step are brought
by TMA (`cp.async.bulk.tensor`) into a `stages`-deep ring of dynamic shared memory, each slot
guarded by an mbarrier that completes when the slot's bytes landed.

Each side must be a plain f32 load indexed `[b?, outer, k]` or `[b?, k, outer]` (b batch loop
variables or constants) whose rows are a multiple of 16 bytes. The box lands dense (`pad` does
not apply); elements past M, N or K are zero-filled by TMA, so the FMA loop needs no guards.

`ws=0`: thread 0 issues the copies of step s + stages - 1 after the barrier that opens step s;
every thread then waits on the slot's `full` mbarrier. `ws=1`: one producer warp after the
consumer threads issues every copy, waiting on an `empty` mbarrier per slot that the consumers
arrive on one step after they read it (`_specialized`); consumers never meet at a block
barrier. The producer is one warp, not a warpgroup, so it cannot give registers back
(`setmaxnreg` applies to whole warpgroups), and the consumers do not need more (measured
2026-11-29: benchmarks/RESULTS.md, "Measurements moved from docs/knobs.md (2026-12-02)").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import i64
from xdsl.ir import Block, BlockArgument, Region, SSAValue

from tinyopt.dialects import tile
from tinyopt.passes.graph_to_loop.index_eval import constant_index
from tinyopt.passes.tile.emit import Emitter, Mapping

PRODUCER_WARP = 32
"""Threads added to the block for the producer warp with `ws=1`."""


@dataclass
class TmaSide:
    """One operand side copied by TMA: its kernel argument, orientation and box."""

    load: memref.LoadOp
    arg: int
    outer0: SSAValue
    tile_outer: int
    k_major: bool
    """True: shared `[stages][outer][BK]`; False: `[stages][BK][outer]`."""
    batch: list[SSAValue | int]
    """The load's leading indices: batch loop variables, or constants (a unit batch dimension
    indexed at 0)."""
    smem: SSAValue | None = None

    def shape(self, stages: int, bk: int) -> list[int]:
        if self.k_major:
            return [stages, self.tile_outer, bk]
        return [stages, bk, self.tile_outer]

    def box(self, bk: int) -> tuple[int, ...]:
        inner = (self.tile_outer, bk) if self.k_major else (bk, self.tile_outer)
        return (*[1] * len(self.batch), *inner)

    def bytes(self, bk: int) -> int:
        return 4 * self.tile_outer * bk


def tma_side(
    load: memref.LoadOp,
    k_iv: SSAValue,
    outer_iv: SSAValue,
    batch_ivs: list[SSAValue],
    outer0: SSAValue,
    tile_outer: int,
    kernel: str,
    which: str,
) -> TmaSide | str:
    """Returns how TMA copies a side, else why it cannot."""
    indices = list(load.indices)
    t = load.memref.type
    shape = t.get_shape()  # type: ignore[attr-defined]
    batch = [i if i in batch_ivs else constant_index(i) for i in indices[:-2]]
    if (
        len(indices) < 2
        or set(indices[-2:]) != {k_iv, outer_iv}
        or None in batch
        or not isinstance(load.memref, BlockArgument)
    ):
        return (
            f"copy=tma needs each operand to be a kernel buffer indexed [b?, outer, k] or "
            f"[b?, k, outer] (a tensor-map box); the {which} side of kernel @{kernel} loads "
            f"{t} otherwise (use copy=cp_async or copy=ld)"
        )
    if shape[-1] * 4 % 16:
        return (
            f"copy=tma needs rows that are multiples of 16 bytes (tensor-map strides); "
            f"the {which} side of kernel @{kernel} is {t}, rows of {shape[-1] * 4} bytes "
            "(use copy=cp_async or copy=ld)"
        )
    return TmaSide(load, load.memref.index, outer0, tile_outer, indices[-1] is k_iv, batch)


def tensor_map_args(sides: list[TmaSide], bk: int, kernel: str) -> list[tile.TensorMapArg] | str:
    """Returns the tensor maps of the sides (one per buffer: A and B may be one buffer when
    their boxes agree), or why they cannot be. A buffer passed as a tensor map has no pointer
    in the kernel, so the sides' loads must be its only reads."""
    maps: dict[int, tile.TensorMapArg] = {}
    loads = {side.load for side in sides}
    for side in sides:
        if any(use.operation not in loads for use in side.load.memref.uses):
            return (
                f"copy=tma passes operand buffer {side.arg} of kernel @{kernel} as a "
                "tensor map, but the kernel also reads it elsewhere (use copy=cp_async)"
            )
        spec = tile.TensorMapArg(side.arg, side.box(bk), 0)
        if maps.setdefault(side.arg, spec) != spec:
            return (
                f"copy=tma copies A and B of kernel @{kernel} from one buffer with "
                f"different boxes {list(maps[side.arg].box)} and {list(spec.box)} (a buffer "
                "has one tensor map; use copy=cp_async)"
            )
    return list(maps.values())


@dataclass
class TmaPipeline:
    """Emits the mbarrier ring, the TMA copies, and the K loop around `accumulate`."""

    em: Emitter
    mapping: Mapping
    args: list[SSAValue]
    tid: SSAValue
    consumers: int
    k: int
    bk: int
    stages: int
    ws: int

    def _produce(self, sides: list[TmaSide], step: SSAValue | int) -> None:
        """Arms slot `step % stages` for the bytes of K step `step` and issues its copies
        (with ws=1, once the consumers released the slot's previous round)."""
        em, stages = self.em, self.stages
        slot = em.index(step % stages) if isinstance(step, int) else em.rem(step, stages)
        if self.empty is not None:
            assert not isinstance(step, int)
            em.op(tile.MbarrierWaitOp(self.empty, slot, em.ring_parity(step, stages, flip=True)))
        em.op(tile.MbarrierArriveExpectTxOp(self.full, slot, sum(s.bytes(self.bk) for s in sides)))
        k0 = em.mul(step, self.bk)
        zero = em.index(0)
        to = [slot, zero, zero]
        for side in sides:
            assert side.smem is not None
            batch = [em.index(b) if isinstance(b, int) else self.mapping[b] for b in side.batch]
            at = [*batch, *([side.outer0, k0] if side.k_major else [k0, side.outer0])]
            em.op(tile.TmaLoadOp(self.args[side.arg], at, side.smem, to, self.full, slot))

    def emit(
        self,
        sides: list[TmaSide],
        accumulate: Callable[[SSAValue], None],
        epilogue: Callable[[], None],
    ) -> None:
        """Emits the ring and the K loop; `accumulate(slot)` emits the FMA work of one staged
        step, `epilogue()` what the consumers do after the loop."""
        em, stages = self.em, self.stages
        steps = -(-self.k // self.bk)
        self.full = em.value(tile.AllocOp(tile.memref_in([stages], i64, tile.SHARED)))
        self.empty = (
            em.value(tile.AllocOp(tile.memref_in([stages], i64, tile.SHARED))) if self.ws else None
        )
        first = em.value(arith.CmpiOp(self.tid, em.index(0), "eq"))
        with em.when([first]):
            for s in range(stages):
                em.op(tile.MbarrierInitOp(self.full, em.index(s), 1))
                if self.empty is not None:
                    em.op(tile.MbarrierInitOp(self.empty, em.index(s), self.consumers))
            em.op(tile.FenceProxyAsyncOp())
        em.op(tile.BarrierOp())
        if self.ws:
            self._specialized(sides, steps, accumulate, epilogue)
            return
        with em.when([first]):
            for step in range(min(stages - 1, steps)):
                self._produce(sides, step)
        with em.for_loop(0, steps, 1) as (step, _, _):
            em.op(tile.BarrierOp())
            ahead = em.add(step, stages - 1)
            with em.when([first, em.less(ahead, steps)]):
                self._produce(sides, ahead)
            slot = em.rem(step, stages)
            em.op(tile.MbarrierWaitOp(self.full, slot, em.ring_parity(step, stages, flip=False)))
            accumulate(slot)
            em.op(scf.YieldOp())
        epilogue()

    def _specialized(
        self,
        sides: list[TmaSide],
        steps: int,
        accumulate: Callable[[SSAValue], None],
        epilogue: Callable[[], None],
    ) -> None:
        """The producer warp (threads `consumers`.. of the block) and the consumer threads."""
        em = self.em
        assert self.empty is not None
        producer = em.value(arith.CmpiOp(self.tid, em.index(self.consumers), "sge"))
        then_block, else_block = Block(), Block()
        em.op(scf.IfOp(producer, [], Region(then_block), Region(else_block)))
        with em.into(then_block):
            leader = em.value(arith.CmpiOp(self.tid, em.index(self.consumers), "eq"))
            with em.when([leader]):
                with em.for_loop(0, steps, 1) as (step, _, _):
                    self._produce(sides, step)
                    em.op(scf.YieldOp())
            em.op(scf.YieldOp())
        with em.into(else_block):
            with em.for_loop(0, steps, 1) as (step, _, _):
                slot = em.rem(step, self.stages)
                parity = em.ring_parity(step, self.stages, flip=False)
                em.op(tile.MbarrierWaitOp(self.full, slot, parity))
                # Release the previous step's slot only now, past this step's wait loop, so
                # the shared loads of its FMAs (an earlier basic block) have returned; right
                # after `accumulate`, TMA overwrote loads still in flight (2026-12-01:
                # benchmarks/RESULTS.md, "The `copy=tma ws=1` ring failure: cause shown …").
                with em.when([em.less(em.index(0), step)]):
                    previous = em.rem(em.add(step, self.stages - 1), self.stages)
                    em.op(tile.MbarrierArriveOp(self.empty, previous))
                accumulate(slot)
                em.op(scf.YieldOp())
            epilogue()
            em.op(scf.YieldOp())


def ring_bytes(stages: int, bk: int, bm: int, bn: int) -> int:
    """Dynamic shared memory of the two rings (each 1024-byte aligned, plus alignment slack)."""
    per_ring = [-(-4 * stages * bk * outer // 1024) * 1024 for outer in (bm, bn)]
    return sum(per_ring) + 1024
