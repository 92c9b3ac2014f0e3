"""Which loads and stores of a `loop.kernel` index provably outside their buffer.

A kernel's index variables range over its loops' extents, so an index built from them by
additions, subtractions, products, constants, minima and maxima has a range known at compile
time. An access whose index range leaves its dim reads or writes another buffer's memory (a
hand-written kernel looping past its buffer: `loop.parallel (%j) in [9]` over 8 columns); the
`loop.kernel` verifier refuses it. Indices the ranges cannot bound (loaded ids, runtime
scalars, divisions) are not checked here: `fuse` clamps what it gathers by.
"""

from __future__ import annotations

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IntegerAttr, MemRefType
from xdsl.ir import Block, BlockArgument, Operation, SSAValue

Range = tuple[int, int]
"""Inclusive lowest and highest value."""


def out_of_range(kernel: Operation) -> str | None:
    """Describe the first access of `kernel` whose index range leaves its buffer, or None."""
    ranges: dict[SSAValue, Range | None] = {}
    for op in kernel.walk():
        if isinstance(op, memref.LoadOp | memref.StoreOp):
            shape = op.memref.type.get_shape() if isinstance(op.memref.type, MemRefType) else ()
            for dim, (index, size) in enumerate(zip(op.indices, shape, strict=False)):
                found = _range(index, ranges)
                if found is not None and (found[0] < 0 or found[1] >= size):
                    name = _name(op.memref)
                    return (
                        f"{op.name} of {name} ({op.memref.type}) takes index {dim} over "
                        f"[{found[0]}, {found[1]}], outside [0, {size - 1}]"
                    )
    return None


def _name(buffer: SSAValue) -> str:
    if buffer.name_hint:
        return f"%{buffer.name_hint}"
    if isinstance(buffer, BlockArgument):
        return f"argument {buffer.index}"
    return "a buffer"


def _range(value: SSAValue, ranges: dict[SSAValue, Range | None]) -> Range | None:
    """The range of an index value, or None where it is not bounded at compile time."""
    if value in ranges:
        return ranges[value]
    found: Range | None = None
    owner = value.owner
    if isinstance(owner, Block):  # an index variable: a block argument of a loop's body
        loop = owner.parent_op()
        extents = getattr(loop, "extents", None)
        if extents is not None and loop is not None and owner is loop.regions[0].blocks[0]:
            found = (0, extents[value.index] - 1)  # type: ignore[attr-defined]
    elif isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        found = (owner.value.value.data, owner.value.value.data)
    elif isinstance(owner, arith.IndexCastOp):
        found = _range(owner.input, ranges)
    elif isinstance(
        owner, arith.AddiOp | arith.SubiOp | arith.MuliOp | arith.MaxSIOp | arith.MinSIOp
    ):
        lhs, rhs = _range(owner.lhs, ranges), _range(owner.rhs, ranges)
        if lhs is not None and rhs is not None:
            found = _combined(owner, lhs, rhs)
    ranges[value] = found
    return found


def _combined(op: Operation, lhs: Range, rhs: Range) -> Range:
    (a, b), (c, d) = lhs, rhs
    if isinstance(op, arith.AddiOp):
        return a + c, b + d
    if isinstance(op, arith.SubiOp):
        return a - d, b - c
    if isinstance(op, arith.MaxSIOp):
        return max(a, c), max(b, d)
    if isinstance(op, arith.MinSIOp):
        return min(a, c), min(b, d)
    products = (a * c, a * d, b * c, b * d)
    return min(products), max(products)
