"""The `welford` pass: the two-pass mean and variance of a row become one Welford reduction.

`fuse` lowers LayerNorm (and any variance written as mean((x − mean(x))²)) to two reductions
over the row, `%s = reduce sum(x_j)` and `%q = reduce sum((x_j − %s / n)²)`. The pair is one
monoid over (count, mean, M2) (Welford 1962; the parallel merge of Chan, Golub and LeVeque
1979), and the pass replaces both reductions by that one `loop.reduce`: the means read its mean
and %q its M2. Every use of %s must be a division by the row length n. The identity, element
(-0 for M2 so that adding it folds away) and combine, whose divisions are by max(n, 1), are in
docs/knobs.md (the loop rewrites).
"""

from __future__ import annotations

from dataclasses import dataclass
from math import prod

from xdsl.builder import ImplicitBuilder
from xdsl.context import Context
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation
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
    constant_value,
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


def welford_combine() -> Block:
    """Return Chan et al.'s merge of two (count, mean, M2) states."""
    block = combine_block(3)
    n1, mean1, q1, n2, mean2, q2 = block.args
    with ImplicitBuilder(block):
        n = arith.AddfOp(n1, n2).result
        safe_n = arith.MaximumfOp(n, f32_constant(1.0).result).result
        delta = arith.SubfOp(mean2, mean1).result
        weight = arith.DivfOp(n2, safe_n).result
        step = arith.MulfOp(delta, weight).result
        mean = arith.AddfOp(mean1, step).result
        spread = arith.MulfOp(arith.MulfOp(step, delta).result, n1).result
        q = arith.AddfOp(arith.AddfOp(q1, q2).result, spread).result
        loop.YieldOp(n, mean, q)
    return block


def _means(first: loop.ReduceOp) -> list[Operation] | None:
    """Return the uses of a row sum, if each one divides it by the row length (a mean)."""
    length = float(prod(first.extents))
    means: list[Operation] = []
    for use in first.res[0].uses:
        op = use.operation
        if not isinstance(op, arith.DivfOp) or use.index != 0:
            return None
        if constant_value(op.rhs) != length:
            return None
        means.append(op)
    return means


class Welford(RewritePattern):
    """Replace `sum(x)` and `sum((x − sum(x)/n)²)` over one row by one Welford reduction."""

    @op_type_rewrite_pattern
    def match_and_rewrite(self, op: loop.ReduceOp, rewriter: PatternRewriter) -> None:
        if scalar_monoid(op) != ("arith.addf", 0.0):
            return
        square = producer(element(op), arith.MulfOp)
        if square is None or square.operands[0] is not square.operands[1]:
            return
        if (centered := producer(square.operands[0], arith.SubfOp)) is None:
            return
        x, mean = centered.operands
        if (divide := producer(mean, arith.DivfOp)) is None:
            return
        first = earlier_reduce(divide.operands[0], op)
        if first is None or scalar_monoid(first) != ("arith.addf", 0.0):
            return
        means = _means(first)
        if means is None or not same_element(first, x, op):
            return
        merged = merge_reduces(
            rewriter,
            first,
            [0.0, 0.0, 0.0],
            tuple_body(first, [1.0, None, -0.0]),
            welford_combine(),
        )
        for divided in means:
            rewriter.replace_all_uses_with(divided.results[0], merged.res[1])
        rewriter.replace_all_uses_with(op.res[0], merged.res[2])
        erase_reduce(rewriter, op)
        for divided in means:
            rewriter.erase(divided)
        erase_reduce(rewriter, first)


@dataclass(frozen=True)
class WelfordPass(ModulePass):
    """Merge a row's mean and centered sum-of-squares reductions into one Welford reduction."""

    name = "welford"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Rewrite every matching pair of reductions in the module's loop kernels."""
        PatternRewriteWalker(Welford()).rewrite_module(op)
