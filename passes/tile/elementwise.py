"""Schedule rule for elementwise kernels: one vector of the innermost dimension per thread
(at most `vec` elements, one 16-byte access); broadcast operands are shared by the lanes."""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop
from tinyopt.passes.tile.emit import LaneEmitter, vector_width
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.rule import Rule

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


@dataclass(frozen=True)
class ElementwisePlan:
    threads: int
    vec: int
    """The widest vector wanted; the accesses' alignment may give less."""


class Elementwise(Rule[loop.ParallelOp, ElementwisePlan]):
    """Gives each thread `vec` consecutive points of the innermost dimension."""

    name = "elementwise"
    reads = "threads vec"
    plan_type = ElementwisePlan

    def match(self, kernel: loop.KernelOp) -> loop.ParallelOp | str:
        return elementwise_nest(kernel) or "not one parallel loop without nested loops"

    def plan(self, kernel: loop.KernelOp, m: loop.ParallelOp, knobs: Knobs) -> ElementwisePlan:
        return ElementwisePlan(knobs.threads or THREADS, knobs.vec or 16)

    def emit(
        self,
        kernel: loop.KernelOp,
        nest: loop.ParallelOp,
        plan: ElementwisePlan,
        rewriter: PatternRewriter,
    ) -> None:
        *outer, inner = nest.extents
        body = nest.body.block
        width = vector_width(body.ops, body.args[-1], inner, plan.vec)
        chunks = prod(outer) * (inner // width)
        threads = plan.threads
        new, em, mapping = new_kernel(kernel, (-(-chunks // threads), 1, 1), (threads, 1, 1))
        flat = em.global_id(threads)
        with em.if_(em.less(flat, chunks)) as (then_block, _, _), em.into(then_block):
            *ivs, chunk = em.delinearize(flat, [*outer, inner // width])
            mapping.update(zip(body.args[:-1], ivs, strict=True))
            LaneEmitter(em, body.args[-1], em.mul(chunk, width), width).emit(
                list(body.ops), mapping
            )
        replace_kernel(rewriter, kernel, new)
