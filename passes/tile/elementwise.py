"""Schedule rule for elementwise kernels: one vector of the innermost dimension per thread.

Accesses contiguous in the innermost index become one 16-byte load or store (the `vec` knob
caps the width); broadcast operands are loaded once per thread and shared by the lanes.
"""

from __future__ import annotations

from math import prod

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.emit import LaneEmitter, vector_width
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.knobs import Knobs

THREADS = 256


def elementwise_nest(op: loop.KernelOp) -> loop.ParallelOp | None:
    """Returns the kernel's single parallel loop if its body holds no nested loops."""
    ops = list(op.body.block.ops)
    if len(ops) != 1 or not isinstance(ops[0], loop.ParallelOp):
        return None
    nested = (o for inner in ops[0].body.block.ops for o in inner.walk())
    if any(isinstance(o, loop.ParallelOp | loop.ReduceOp) for o in nested):
        return None
    return ops[0]


class ScheduleElementwise(RewritePattern):
    """Gives each thread `vec` consecutive points of the innermost dimension."""

    def __init__(self, knobs: Knobs) -> None:
        self.knobs = knobs

    def match_and_rewrite(self, op, rewriter: PatternRewriter, /) -> None:
        if not isinstance(op, loop.KernelOp) or (nest := elementwise_nest(op)) is None:
            return
        *outer, inner = nest.extents
        body = nest.body.block
        width = vector_width(body.ops, body.args[-1], inner, self.knobs.vec or 16)
        chunks = prod(outer) * (inner // width)
        threads = self.knobs.threads or THREADS
        kernel, em, mapping = new_kernel(op, (-(-chunks // threads), 1, 1), (threads, 1, 1))
        flat = em.add(
            em.mul(em.value(tile.BlockIdOp("x")), threads), em.value(tile.ThreadIdOp("x"))
        )
        with em.if_(em.less(flat, chunks)) as (then_block, _, _), em.into(then_block):
            *ivs, chunk = em.delinearize(flat, [*outer, inner // width])
            mapping.update(zip(body.args[:-1], ivs, strict=True))
            LaneEmitter(em, body.args[-1], em.mul(chunk, width), width).emit(
                list(body.ops), mapping
            )
        replace_kernel(rewriter, op, kernel)
