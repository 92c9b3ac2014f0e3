"""Schedule rule of last resort: one GPU thread per point of the outer parallel loop.

Every loop kernel matches it: nested parallel loops and reductions run sequentially inside
the thread, in the loop dialect's order, so it is always correct and rarely fast.
"""

from __future__ import annotations

from math import prod

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.emit import emit_sequential
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel

THREADS = 256


class ScheduleSequentially(RewritePattern):
    """Maps each point of the kernel's outer `loop.parallel` to one thread."""

    def __init__(self, knobs: Knobs) -> None:
        self.knobs = knobs

    def match_and_rewrite(self, op, rewriter: PatternRewriter, /) -> None:
        if not isinstance(op, loop.KernelOp):
            return
        ops = list(op.body.block.ops)
        outer = ops[0] if len(ops) == 1 and isinstance(ops[0], loop.ParallelOp) else None
        points = prod(outer.extents) if outer else 1
        threads = min(self.knobs.threads or THREADS, max(32, points))
        kernel, em, mapping = new_kernel(
            op, grid=(-(-points // threads), 1, 1), block=(threads, 1, 1)
        )
        flat = em.add(
            em.mul(em.value(tile.BlockIdOp("x")), threads), em.value(tile.ThreadIdOp("x"))
        )
        if outer is None:
            with em.if_(em.less(flat, 1)) as (then_block, _, _):
                with em.into(then_block):
                    emit_sequential(em, ops, mapping)
        else:
            with em.if_(em.less(flat, points)) as (then_block, _, _):
                with em.into(then_block):
                    ivs = em.delinearize(flat, outer.extents)
                    mapping.update(zip(outer.body.block.args, ivs, strict=True))
                    emit_sequential(em, outer.body.block.ops, mapping)
        replace_kernel(rewriter, op, kernel)
