"""Matching helpers for the rewrites that merge row reductions (`online-softmax`, `welford`).

Both rewrites look for two one-state `loop.reduce`s of one row whose second body recomputes
the first body's element and combines it with the first result, and replace them by one
reduction with a tuple state. These helpers recognize a reduction's monoid, tell whether two
bodies compute the same element, and build the merged reduction's body.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import FloatAttr, f32
from xdsl.ir import Block, BlockArgument, Operation, OpResult, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.rewriter import InsertPoint

from tinyopt.dialects import loop


def constant_value(value: SSAValue) -> float | None:
    """Return the number an f32 `arith.constant` holds, or None for any other value."""
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, FloatAttr):
        return op.value.value.data
    return None


def scalar_monoid(op: loop.ReduceOp) -> tuple[str, float | None] | None:
    """Return (combine op name, identity) of a one-state f32 reduce with a one-op combine.

    The combine must be a single binary op applied to the two states, in either order; the
    identity is None when `init` is not a constant.
    """
    if len(op.res) != 1 or op.res[0].type != f32:
        return None
    ops = list(op.combine.block.ops)
    if len(ops) != 2 or not isinstance(ops[1], loop.YieldOp):
        return None
    combined, end = ops
    a, b = op.combine.block.args
    if list(combined.operands) not in ([a, b], [b, a]) or len(combined.results) != 1:
        return None
    if tuple(end.arguments) != (combined.results[0],):
        return None
    return combined.name, constant_value(op.init[0])


def element(op: loop.ReduceOp) -> SSAValue:
    """Return the value the body of a one-state reduce yields."""
    end = op.body.block.last_op
    assert isinstance(end, loop.YieldOp)
    return end.arguments[0]


def producer(value: SSAValue, kind: type[Operation]) -> Operation | None:
    """Return the op defining `value` if it is a `kind`, else None."""
    return value.owner if isinstance(value.owner, kind) else None


def earlier_reduce(value: SSAValue, later: loop.ReduceOp) -> loop.ReduceOp | None:
    """Return the reduce whose result `value` is, if it runs before `later` in `later`'s block.

    It must have `later`'s index space, and no op between the two may write memory, so the
    loads of `later`'s body read what they would read at the earlier reduce.
    """
    first = value.owner
    if not isinstance(first, loop.ReduceOp) or first.parent is not later.parent:
        return None
    if first.extents != later.extents:
        return None
    between = first.next_op
    while between is not None and between is not later:
        if any(isinstance(o, memref.StoreOp) for o in between.walk()):
            return None
        between = between.next_op
    return first if between is later else None


def same_value(a: SSAValue, b: SSAValue, args: dict[SSAValue, SSAValue]) -> bool:
    """Tell whether `a` and `b` compute the same value; `args` pairs equal block arguments.

    Two values are the same when they are one value, paired arguments, or results of the
    same index of two region-free ops with equal names, properties, attributes and result
    types whose operands are pairwise the same (loads included: the caller checks that no
    store runs between them).
    """
    if a is b or args.get(a) is b:
        return True
    if isinstance(a, BlockArgument) or isinstance(b, BlockArgument):
        return False
    assert isinstance(a, OpResult) and isinstance(b, OpResult)
    x, y = a.op, b.op
    if a.index != b.index or x.name != y.name or x.regions or y.regions:
        return False
    if x.properties != y.properties or x.attributes != y.attributes:
        return False
    if x.result_types != y.result_types or len(x.operands) != len(y.operands):
        return False
    return all(same_value(p, q, args) for p, q in zip(x.operands, y.operands))


def same_element(first: loop.ReduceOp, value: SSAValue, later: loop.ReduceOp) -> bool:
    """Tell whether `value` in `later`'s body is the element `first`'s body yields."""
    args = dict(zip(first.body.block.args, later.body.block.args, strict=True))
    return same_value(element(first), value, args)


def f32_constant(value: float) -> arith.ConstantOp:
    """Return a new `arith.constant` of type f32."""
    return arith.ConstantOp(FloatAttr(value, f32))


def tuple_body(first: loop.ReduceOp, state: Sequence[float | None]) -> Region:
    """Return a copy of `first`'s body that yields a tuple state built from its element.

    The tuple holds the element where `state` holds None, and an f32 constant (defined in the
    body) where it holds a number.
    """
    region = first.body.clone()
    block = region.block
    end = block.last_op
    assert isinstance(end, loop.YieldOp)
    values: list[SSAValue] = []
    for entry in state:
        if entry is None:
            values.append(end.arguments[0])
        else:
            constant = f32_constant(entry)
            block.insert_op_before(constant, end)
            values.append(constant.result)
    block.insert_op_before(loop.YieldOp(*values), end)
    block.erase_op(end)
    return region


def combine_block(size: int) -> Block:
    """Return an empty combine block over two f32 tuple states of `size` elements."""
    return Block(arg_types=[f32] * (2 * size))


def merge_reduces(
    rewriter: PatternRewriter,
    first: loop.ReduceOp,
    init: Sequence[float],
    body: Region,
    combine: Block,
) -> loop.ReduceOp:
    """Insert a tuple reduce over `first`'s index space just before `first` and return it.

    Its identity `init` is made of f32 constants inserted before it.
    """
    constants = {v: f32_constant(v) for v in dict.fromkeys(init)}
    for constant in constants.values():
        rewriter.insert(constant, InsertPoint.before(first))
    merged = loop.ReduceOp(first.extents, [constants[v] for v in init], body, Region(combine))
    rewriter.insert(merged, InsertPoint.before(first))
    return merged


def erase_reduce(rewriter: PatternRewriter, op: loop.ReduceOp) -> None:
    """Erase a reduce whose results are no longer used, and its `init` constants if now dead."""
    init = list(op.init)
    rewriter.erase(op)
    for value in dict.fromkeys(init):
        owner = value.owner
        if isinstance(owner, arith.ConstantOp) and owner.result.first_use is None:
            rewriter.erase(owner)
