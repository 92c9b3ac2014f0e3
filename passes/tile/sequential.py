"""Schedule rule of last resort: one GPU thread per point of the outer parallel loop, nested
loops run sequentially inside it; it takes every kernel, always correct and rarely fast."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop
from tinyopt.passes.tile.emit import emit_sequential
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.rule import Rule

THREADS = 256


@dataclass(frozen=True)
class SequentialPlan:
    threads: int
    """Threads per block (fewer where the kernel has fewer points)."""


class Sequential(Rule[loop.ParallelOp | None, SequentialPlan]):
    """Maps each point of the kernel's outer `loop.parallel` to one thread."""

    name = "sequential"
    reads = "threads"
    plan_type = SequentialPlan
    selector = ("schedule", "sequential")

    def considered(self, knobs: Knobs) -> bool:
        return True

    def match(self, kernel: loop.KernelOp) -> loop.ParallelOp | None:
        ops = list(kernel.body.block.ops)
        return ops[0] if len(ops) == 1 and isinstance(ops[0], loop.ParallelOp) else None

    def plan(
        self, kernel: loop.KernelOp, m: loop.ParallelOp | None, knobs: Knobs
    ) -> SequentialPlan:
        return SequentialPlan(knobs.threads or THREADS)

    def emit(
        self,
        kernel: loop.KernelOp,
        m: loop.ParallelOp | None,
        plan: SequentialPlan,
        rewriter: PatternRewriter,
    ) -> None:
        outer, ops = m, list(kernel.body.block.ops)
        points = prod(outer.extents) if outer else 1
        threads = min(plan.threads, max(32, points))
        new, em, mapping = new_kernel(
            kernel, grid=(-(-points // threads), 1, 1), block=(threads, 1, 1)
        )
        flat = em.global_id(threads)
        with em.if_(em.less(flat, points)) as (then_block, _, _), em.into(then_block):
            if outer is None:
                emit_sequential(em, ops, mapping)
            else:
                ivs = em.delinearize(flat, outer.extents)
                mapping.update(zip(outer.body.block.args, ivs, strict=True))
                emit_sequential(em, outer.body.block.ops, mapping)
        replace_kernel(rewriter, kernel, new)
