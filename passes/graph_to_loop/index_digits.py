"""Index arithmetic as sums of mixed-radix digits of loop indices: proving that an index map
moves elements by a permutation, and inverting it.

A loop index x over `0 ..< n` is a mixed-radix number; `(x div below) mod radix` is one of its
digits when `below · radix` divides n. The `+`, `*`, `div` and `mod` by constants that reshapes
and transposes leave in index expressions keep a sum of weighted digits a sum of weighted digits
as long as no digit straddles a divisor unevenly and the digits below it cannot carry into it.
A sum whose weights, in order, are the row-major strides of its radices (1, r0, r0·r1, ...)
takes each value below their product exactly once over the grid of its loop indices; such a sum
is inverted digit by digit: the digit of weight w is (flat div w) mod radix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr
from xdsl.ir import Operation, SSAValue

from tinyopt.passes.graph_to_loop.index_eval import constant_index


@dataclass(frozen=True)
class Digit:
    """`(iv div below) mod radix` of a loop index over `0 ..< extent`, `below · radix`
    dividing `extent`."""

    iv: SSAValue
    extent: int
    below: int
    radix: int


Digits = tuple[tuple[int, Digit], ...]
"""Σ weight · digit."""


def of_index(iv: SSAValue, extent: int) -> Digits:
    """Returns a loop index as digits: itself, or nothing (0) when its extent is 1."""
    return ((1, Digit(iv, extent, 1, extent)),) if extent > 1 else ()


def scaled(number: Digits, c: int) -> Digits:
    """Returns `number · c`."""
    return tuple((w * c, d) for w, d in number) if c else ()


def split(number: Digits, c: int) -> tuple[Digits, Digits] | None:
    """Returns (number div c, number mod c), when a digit straddling c is split by it evenly
    and the digits below c sum to less than c; else None."""
    high: list[tuple[int, Digit]] = []
    low: list[tuple[int, Digit]] = []
    for w, d in number:
        if w % c == 0:
            high.append((w // c, d))
        elif w * d.radix <= c:
            low.append((w, d))
        elif c % w == 0 and d.radix % (m := c // w) == 0:
            low.append((w, Digit(d.iv, d.extent, d.below, m)))
            high.append((1, Digit(d.iv, d.extent, d.below * m, d.radix // m)))
        else:
            return None
    if sum(w * (d.radix - 1) for w, d in low) >= c:
        return None
    return tuple(high), tuple(low)


def digits_of(value: SSAValue, ivs: Mapping[SSAValue, int]) -> Digits | None:
    """Returns an index value as digits of the loop indices `ivs` (index → extent), when it is
    built from them and constants by `addi`, and `muli`, `divui`, `remui` by constants; else
    None. A constant is only allowed as 0 or as such a factor or divisor."""
    if value in ivs:
        return of_index(value, ivs[value])
    op = value.owner
    if constant_index(value) == 0:
        return ()
    if isinstance(op, arith.AddiOp):
        lhs, rhs = digits_of(op.lhs, ivs), digits_of(op.rhs, ivs)
        return None if lhs is None or rhs is None else lhs + rhs
    if isinstance(op, arith.MuliOp):
        for x, c in ((op.lhs, op.rhs), (op.rhs, op.lhs)):
            factor = constant_index(c)
            if factor is not None and (digits := digits_of(x, ivs)) is not None:
                return scaled(digits, factor)
        return None
    if isinstance(op, arith.DivUIOp | arith.RemUIOp):
        divisor, digits = constant_index(op.rhs), digits_of(op.lhs, ivs)
        if divisor is None or divisor < 1 or digits is None:
            return None
        parts = split(digits, divisor)
        return None if parts is None else parts[isinstance(op, arith.RemUIOp)]
    return None


def is_permutation(number: Digits, ivs: Mapping[SSAValue, int], size: int) -> bool:
    """Tells whether `number` takes each value of `0 ..< size` exactly once over the grid of
    `ivs`: by weight, its digits are a row-major index over `size`, and the digits of each
    index, by `below`, make up all of it."""
    terms = sorted(number, key=lambda t: t[0])
    stride = 1
    for w, d in terms:
        if w != stride:
            return False
        stride *= d.radix
    if stride != size:
        return False
    for iv, extent in ivs.items():
        below = 1
        for d in sorted((d for _, d in terms if d.iv is iv), key=lambda d: d.below):
            if d.below != below:
                return False
            below *= d.radix
        if below != extent:
            return False
    return True


def inverse(number: Digits, flat: Digits) -> dict[SSAValue, Digits] | None:
    """For `number` a permutation (see `is_permutation`) and `flat` one of its values, written
    in other loop indices, returns each of `number`'s indices as digits of `flat`'s: the point
    that `number` maps to `flat`. None where a digit of `flat` does not split evenly."""
    point: dict[SSAValue, Digits] = {}
    for w, d in number:
        shifted = split(flat, w)
        digit = None if shifted is None else split(shifted[0], d.radix)
        if digit is None:
            return None
        point[d.iv] = point.get(d.iv, ()) + scaled(digit[1], d.below)
    return point


def build(number: Digits) -> tuple[list[Operation], SSAValue]:
    """Returns ops computing `number` and its value; the terms are added by falling weight, so
    a whole loop index of weight 1 is the last add's operand (a contiguous access)."""
    ops: list[Operation] = []

    def emit(op: Operation) -> SSAValue:
        ops.append(op)
        return op.results[0]

    def const(n: int) -> SSAValue:
        return emit(arith.ConstantOp(IntegerAttr(n, IndexType())))

    total: SSAValue | None = None
    for w, d in sorted(number, key=lambda t: -t[0]):
        term = d.iv
        if d.below > 1:
            term = emit(arith.DivUIOp(term, const(d.below)))
        if d.below * d.radix < d.extent:
            term = emit(arith.RemUIOp(term, const(d.radix)))
        if w > 1:
            term = emit(arith.MuliOp(term, const(w)))
        total = term if total is None else emit(arith.AddiOp(total, term))
    return ops, const(0) if total is None else total


def flat_index(
    indices: Sequence[SSAValue], shape: Sequence[int], ivs: Mapping[SSAValue, int]
) -> Digits | None:
    """Returns the row-major offset of an access into `shape` as digits of `ivs`, or None."""
    flat: Digits = ()
    stride = 1
    for index, size in reversed(list(zip(indices, shape, strict=True))):
        digits = digits_of(index, ivs)
        if digits is None:
            return None
        flat = scaled(digits, stride) + flat
        stride *= size
    return flat
