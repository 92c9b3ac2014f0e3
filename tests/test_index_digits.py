"""Index arithmetic as mixed-radix digits (passes/graph_to_loop/index_digits.py): which index
maps are proved permutations, and their inverses evaluated on the whole grid against numpy."""

from __future__ import annotations

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Block, Operation, SSAValue

from tinyopt.passes.graph_to_loop.index_digits import build, flat_index, inverse, is_permutation
from tinyopt.passes.graph_to_loop.index_eval import on_grid


class _Ops:
    """Builds index arithmetic on the arguments of a block (the loop indices)."""

    def __init__(self, count: int) -> None:
        self.block = Block(arg_types=[IndexType()] * count)

    def _op(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def const(self, n: int) -> SSAValue:
        return self._op(arith.ConstantOp(IntegerAttr(n, IndexType())))

    def div(self, x: SSAValue, n: int) -> SSAValue:
        return self._op(arith.DivUIOp(x, self.const(n)))

    def rem(self, x: SSAValue, n: int) -> SSAValue:
        return self._op(arith.RemUIOp(x, self.const(n)))

    def mul(self, x: SSAValue, n: int) -> SSAValue:
        return self._op(arith.MuliOp(x, self.const(n)))

    def add(self, x: SSAValue, y: SSAValue) -> SSAValue:
        return self._op(arith.AddiOp(x, y))


def test_heads_side_by_side_is_a_permutation_and_inverts_to_h_d_plus_d() -> None:
    """The Llama copy: out[s, c] = o[c div 16, s, c mod 16] over o = [4, 16, 16]. The kernel
    that stores o[p, i, d] must store out[i, 16·p + d] instead."""
    ops = _Ops(5)
    s, c, p, i, d = ops.block.args
    copy_ivs = {s: 16, c: 64}
    offset = flat_index([ops.div(c, 16), s, ops.rem(c, 16)], (4, 16, 16), copy_ivs)
    assert offset is not None and is_permutation(offset, copy_ivs, 4 * 16 * 16)
    flat = flat_index([p, i, d], (4, 16, 16), {p: 4, i: 16, d: 16})
    assert flat is not None
    point = inverse(offset, flat)
    assert point is not None
    grid = np.indices((4, 16, 16)).reshape(3, -1)
    env = {p: grid[0], i: grid[1], d: grid[2]}
    row_ops, row = build(point[s])
    column_ops, column = build(point[c])
    assert row is i and isinstance(column.owner, arith.AddiOp) and column.owner.rhs is d
    for op in [*row_ops, *column_ops]:
        ops.block.add_op(op)
    out = np.zeros((16, 64), int)
    out[on_grid(row, env), on_grid(column, env)] = np.arange(4 * 16 * 16)
    o = np.arange(4 * 16 * 16).reshape(4, 16, 16)
    np.testing.assert_array_equal(out, o.transpose(1, 0, 2).reshape(16, 64))


def test_a_reshape_of_batch_and_heads_inverts_to_div_and_mod() -> None:
    """out[b, h, s, d] = o[b·3 + h, s, d]: the store o[p, s, d] goes to (p div 3, p mod 3)."""
    ops = _Ops(7)
    b, h, s, d, p, i, e = ops.block.args
    copy_ivs = {b: 2, h: 3, s: 5, d: 4}
    offset = flat_index([ops.add(ops.mul(b, 3), h), s, d], (6, 5, 4), copy_ivs)
    assert offset is not None and is_permutation(offset, copy_ivs, 120)
    flat = flat_index([p, i, e], (6, 5, 4), {p: 6, i: 5, e: 4})
    point = inverse(offset, flat)  # type: ignore[arg-type]
    assert point is not None
    batch, head = build(point[b])[1].owner, build(point[h])[1].owner
    assert isinstance(batch, arith.DivUIOp) and isinstance(head, arith.RemUIOp)
    assert batch.lhs is p and head.lhs is p


def test_maps_that_are_not_permutations() -> None:
    ops = _Ops(2)
    x, y = ops.block.args
    # Digits of weight 1 (radix 16) and 8 overlap: x mod 16 + 8·(x div 16) repeats values.
    overlap = flat_index([ops.add(ops.rem(x, 16), ops.mul(ops.div(x, 16), 8))], (64,), {x: 64})
    assert overlap is not None and not is_permutation(overlap, {x: 64}, 64)
    # Reading x mod 16 twice over [16, 16] misses most elements (y is not read).
    twice = flat_index([ops.rem(x, 16), ops.rem(x, 16)], (16, 16), {x: 64, y: 4})
    assert twice is not None and not is_permutation(twice, {x: 64, y: 4}, 256)
    # 3 does not divide 64: x div 3 is no digit of x.
    assert flat_index([ops.div(x, 3)], (22,), {x: 64}) is None
