"""Copy engine `copy=cp_async` of the FP32 contraction: a `stages`-deep shared-memory ring
filled by `cp.async` copies, global → shared with no register staging.

Each operand side must be a plain f32 load (cp.async copies raw bytes), copied in the
orientation its global rows are contiguous in, `[outer][BK]` or `[BK][outer]`, in 16-byte
copies (`cp.async.cg`) when the rows allow 4-float vectors, else 8- or 4-byte ones (`.ca`).

The pipeline keeps `stages - 1` K steps in flight. Before step s: wait for this thread's copies
of step s (`cp.async.wait_group stages-2`), barrier, then issue the copies of step s + stages -
1 into the slot step s-1 used, commit (a group per step, even empty, so the wait count stays
the same), and compute step s. Copies past M, N or K zero-fill the slot (source size 0, from a
clamped in-bounds address).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import f32
from xdsl.ir import Operation, SSAValue

from tinyopt.dialects import tile
from tinyopt.passes.tile.gemm.contraction_swizzle import swizzled
from tinyopt.passes.tile.emit import Emitter, Mapping, vector_width


@dataclass
class CopiedSide:
    """One operand side copied into a shared ring: source load, orientation, copy width."""

    load: memref.LoadOp
    outer_iv: SSAValue
    outer0: SSAValue
    outer_extent: int
    tile_outer: int
    k_major: bool
    """True: shared `[stages][outer][BK + pad]`; False: `[stages][BK][outer + pad]`."""
    width: int
    smem: SSAValue | None = None

    def shape(self, stages: int, bk: int, pad: int) -> list[int]:
        if self.k_major:
            return [stages, self.tile_outer, bk + pad]
        return [stages, bk, self.tile_outer + pad]


def single_load(side: Sequence[Operation], value: SSAValue) -> memref.LoadOp | None:
    """Returns the load a side is when it is one load and nothing else (no prologue math)."""
    if len(side) == 1 and isinstance(load := side[0], memref.LoadOp) and load.res == value:
        return load
    return None


def plain_load(
    side: list[Operation], value: SSAValue, kernel: str, copy: str, which: str
) -> memref.LoadOp | str:
    """Returns the one f32 load a side is, else why it cannot be copied by `copy` (which: "A"
    or "B")."""
    load = single_load(side, value)
    if load is None or load.res.type != f32:
        return (
            f"copy={copy} needs each operand to be a plain f32 load ({copy} copies raw "
            f"bytes: no prologue math, no conversion); the {which} side of kernel @{kernel} is "
            f"{', '.join(o.name for o in side) or 'not a load'} (use copy=ld)"
        )
    return load


def copied_side(
    load: memref.LoadOp,
    k_iv: SSAValue,
    k: int,
    outer_iv: SSAValue,
    outer0: SSAValue,
    outer_extent: int,
    tile_outer: int,
    bk: int,
    vec: int,
    kernel: str,
    copy: str,
) -> CopiedSide | str:
    """Chooses the orientation (the contiguous axis of the source) and the copy width, or
    says why the side cannot be copied."""
    last = load.indices[-1] if load.indices else None
    if last is not k_iv and last is not outer_iv:
        return (
            f"copy={copy} needs each operand's rows to run along K or along M/N; kernel "
            f"@{kernel} loads {load.memref.type} with a last index that is neither (use copy=ld)"
        )
    k_major = last is k_iv
    iv, extent, tile_extent = (k_iv, k, bk) if k_major else (outer_iv, outer_extent, tile_outer)
    width = vector_width([load], iv, tile_extent, vec)
    while extent % width:
        width //= 2
    return CopiedSide(load, outer_iv, outer0, outer_extent, tile_outer, k_major, width)


@dataclass
class CpAsyncPipeline:
    """Emits the copies of the two sides and the `stages`-deep K loop around `accumulate`."""

    em: Emitter
    mapping: Mapping
    tid: SSAValue
    threads: int
    k_iv: SSAValue
    k: int
    bk: int
    stages: int
    swizzle: int = 0
    """1: the ring's tiles are XOR-swizzled (contraction_swizzle.py)."""

    def issue(self, side: CopiedSide, step: SSAValue | int, slot: SSAValue) -> None:
        """Issues this thread's copies of K step `step` of a side into ring slot `slot`."""
        em, bk = self.em, self.bk
        assert side.smem is not None
        along = bk if side.k_major else side.tile_outer
        per_row = along // side.width
        chunks = side.tile_outer * bk // side.width
        k0 = em.mul(step, bk)
        for index in range(-(-chunks // self.threads)):
            e = em.add(self.tid, index * self.threads)
            if self.threads % per_row == 0:
                # All this thread's copies are in one column: one address register.
                fast = em.mul(em.rem(self.tid, per_row), side.width)
                slow = em.add(em.div(self.tid, per_row), index * (self.threads // per_row))
            else:
                fast, slow = em.mul(em.rem(e, per_row), side.width), em.div(e, per_row)
            kk, oo = (fast, slow) if side.k_major else (slow, fast)
            k, o = em.add(k0, kk), em.add(side.outer0, oo)
            # Guards only where a tile can run past the data.
            checks = [
                *([em.less(k, self.k)] if self.k % bk else []),
                *([em.less(o, side.outer_extent)] if side.outer_extent % side.tile_outer else []),
            ]
            valid = em.all_of(checks) if checks else None
            if valid is not None:
                zero = em.index(0)
                k = em.value(arith.SelectOp(valid, k, zero))
                o = em.value(arith.SelectOp(valid, o, zero))
            local = dict(self.mapping) | {self.k_iv: k, side.outer_iv: o}
            src = [local.get(i, i) for i in side.load.indices]
            dst = [slot, oo, kk] if side.k_major else [slot, kk, oo]
            if self.swizzle:
                dst = swizzled(em, dst, along)
            partial = (index + 1) * self.threads > chunks
            with em.when([em.less(e, chunks)] if partial else []):
                em.op(
                    tile.CpAsyncOp(
                        local.get(side.load.memref, side.load.memref),
                        src,
                        side.smem,
                        dst,
                        side.width,
                        valid,
                    )
                )

    def emit(self, sides: list[CopiedSide], accumulate: Callable[[SSAValue], None]) -> None:
        """Emits the prologue (stages - 1 steps in flight) and the K loop; `accumulate(slot)`
        emits the FMA work of one staged step."""
        em, stages = self.em, self.stages
        steps = -(-self.k // self.bk)
        for step in range(stages - 1):
            if step < steps:
                for side in sides:
                    self.issue(side, step, em.index(step))
            em.op(tile.CpAsyncCommitOp())
        with em.for_loop(0, steps, 1) as (step, _, _):
            em.op(tile.CpAsyncWaitOp(stages - 2))
            em.op(tile.BarrierOp())
            ahead = em.add(step, stages - 1)
            with em.when([em.less(ahead, steps)]):
                for side in sides:
                    self.issue(side, ahead, em.rem(ahead, stages))
            em.op(tile.CpAsyncCommitOp())
            accumulate(em.rem(step, stages))
            em.op(scf.YieldOp())
