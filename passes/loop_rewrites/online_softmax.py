"""The `online-softmax` pass: safe softmax's max and sum reductions become one online reduction.

`fuse` lowers softmax to a row kernel with `%m = reduce max(x_j)`, `%l = reduce sum(exp(x_j −
%m))` and an output loop, so the row is read three times. The running maximum makes the pair one
monoid over (m, l) (Milakov and Gimelshein, "Online normalizer calculation for softmax", 2018),
and the pass replaces both reductions by that one `loop.reduce`: the row is read twice. Its
identity, element and combine are in docs/knobs.md (the loop rewrites); the exponents are taken
against max(M, lowest finite f32), so two states whose maxima are -inf combine to (-inf, 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.builder import ImplicitBuilder
from xdsl.context import Context
from xdsl.dialects import arith, math
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, SSAValue
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
    op_type_rewrite_pattern,
)

from tinyopt.dialects import loop
from tinyopt.passes.loop_rewrites.reduce_match import (
    combine_block,
    earlier_reduce,
    element,
    erase_reduce,
    f32_constant,
    merge_reduces,
    producer,
    same_element,
    scalar_monoid,
    tuple_body,
)

LOWEST_F32 = float(np.finfo(np.float32).min)
"""The most negative finite f32: the floor of the maximum the exponents are taken against."""


def online_softmax_combine() -> Block:
    """Return the combine of the (m, l) state: rescale both sums to the larger maximum."""
    block = combine_block(2)
    m1, l1, m2, l2 = block.args
    with ImplicitBuilder(block):
        m = arith.MaximumfOp(m1, m2).result
        floor = arith.MaximumfOp(m, f32_constant(LOWEST_F32).result).result
        total = arith.AddfOp(_rescaled(l1, m1, floor), _rescaled(l2, m2, floor)).result
        loop.YieldOp(m, total)
    return block


def _rescaled(total: SSAValue, m: SSAValue, floor: SSAValue) -> SSAValue:
    """Return total·exp(m − floor), built at the current implicit builder."""
    return arith.MulfOp(total, math.ExpOp(arith.SubfOp(m, floor)).result).result


class OnlineSoftmax(RewritePattern):
    """Replace `max(x)` and `sum(exp(x − max))` over one row by one (m, l) reduction."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: loop.ReduceOp, rewriter: PatternRewriter) -> None:
        if scalar_monoid(op) != ("arith.addf", 0.0):
            return
        exp = producer(element(op), math.ExpOp)
        if exp is None or (shift := producer(exp.operands[0], arith.SubfOp)) is None:
            return
        x, row_max = shift.operands
        first = earlier_reduce(row_max, op)
        if first is None or scalar_monoid(first) != ("arith.maximumf", float("-inf")):
            return
        if not same_element(first, x, op):
            return
        merged = merge_reduces(
            rewriter,
            first,
            [float("-inf"), 0.0],
            tuple_body(first, [None, 1.0]),
            online_softmax_combine(),
        )
        rewriter.replace_all_uses_with(first.res[0], merged.res[0])
        rewriter.replace_all_uses_with(op.res[0], merged.res[1])
        erase_reduce(rewriter, op)
        erase_reduce(rewriter, first)


@dataclass(frozen=True)
class OnlineSoftmaxPass(ModulePass):
    """Merge softmax's max and sum-of-exp row reductions into one online (m, l) reduction."""

    name = "online-softmax"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Rewrite every matching pair of reductions in the module's loop kernels."""
        PatternRewriteWalker(OnlineSoftmax()).rewrite_module(op)
