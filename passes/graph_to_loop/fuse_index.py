"""Symbolic index expressions that `fuse` uses to inline producers by index substitution.

An element of a tensor is addressed by one expression per dimension, built from the
kernel's loop variables (`Var`), integer constants (`Const`), ids read from an integer
tensor (`Loaded`, a gather's), runtime scalars (`Scalar`, a dynamic slice's offset) and `+`,
`*`, `floordiv`, `mod`, `max`, `min` and `-` by constants (`Bin`). The constructors fold
constants and use the variables' extents to simplify the `div`/`mod` patterns that reshapes
produce, so that `reshape` back and forth along matching dimensions costs no index arithmetic
at all.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from operator import mul as mul_int
from typing import Literal

from xdsl.ir import SSAValue

BinKind = Literal["add", "mul", "div", "rem", "max", "min", "sub"]


@dataclass(frozen=True)
class Var:
    """A loop variable ranging over `0 ..< extent`; `id` is unique within one kernel."""

    id: int
    extent: int


@dataclass(frozen=True)
class Const:
    """An integer constant index."""

    value: int


@dataclass(frozen=True)
class Loaded:
    """The integer held by tensor `ids` (a function argument) at `point`; any value at all."""

    ids: SSAValue
    point: Point


@dataclass(frozen=True)
class Scalar:
    """The runtime scalar `value` (a 0-d integer function argument, passed to the kernel by
    value), known to lie in `0 ..= hi`: the host checks it before launching."""

    value: SSAValue
    hi: int


@dataclass(frozen=True)
class Bin:
    """`lhs <kind> rhs` on non-negative indices (`div` is floor division; `sub` only ever
    subtracts a constant its `lhs` is known to be at least)."""

    kind: BinKind
    lhs: Index
    rhs: Index


Index = Var | Const | Loaded | Scalar | Bin
"""One dimension's index expression."""

Point = tuple[Index, ...]
"""The index of one tensor element: an expression per dimension."""


UNBOUNDED = 2**63
"""The bound of an id read from memory (any value of an i64)."""


def bound(e: Index) -> int:
    """Return an exclusive upper bound of `e`'s values."""
    match e:
        case Var(extent=extent):
            return extent
        case Const(value=value):
            return value + 1
        case Loaded():
            return UNBOUNDED
        case Scalar(hi=hi):
            return hi + 1
        case Bin("add", lhs, rhs):
            return bound(lhs) + bound(rhs) - 1
        case Bin("mul", lhs, rhs):
            return (bound(lhs) - 1) * (bound(rhs) - 1) + 1
        case Bin("div", lhs, Const(value=c)):
            return (bound(lhs) - 1) // c + 1
        case Bin("rem", lhs, Const(value=c)):
            return min(c, bound(lhs))
        case Bin("max", lhs, Const(value=c)):
            return max(c + 1, bound(lhs))
        case Bin("min", lhs, Const(value=c)):
            return min(c + 1, bound(lhs))
        case Bin("sub", lhs, Const(value=c)):
            return bound(lhs) - c
        case _:
            raise AssertionError(f"unexpected index expression {e}")


def add(a: Index, b: Index) -> Index:
    """Return `a + b`, folded."""
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.value + b.value)
    if a == Const(0):
        return b
    if b == Const(0):
        return a
    match a, b:  # `(x div c) * c + x mod c` is x: a dim split by a reshape and merged back
        case Bin("mul", Bin("div", x, Const(value=c)), Const(value=m)), Bin("rem", y, rem_by):
            if x == y and c == m and rem_by == Const(c):
                return x
    return Bin("add", a, b)


def mul(a: Index, c: int) -> Index:
    """Return `a * c`, folded."""
    if c == 0:
        return Const(0)
    if c == 1:
        return a
    if isinstance(a, Const):
        return Const(a.value * c)
    return Bin("mul", a, Const(c))


def div(a: Index, c: int) -> Index:
    """Return `a floordiv c`, simplified with the variables' extents."""
    if c == 1:
        return a
    if bound(a) <= c:
        return Const(0)
    match a:
        case Const(value=v):
            return Const(v // c)
        case Bin("add", Bin("mul", x, Const(value=m)), y) if m % c == 0 and bound(y) <= c:
            return mul(x, m // c)
        case _:
            return Bin("div", a, Const(c))


def rem(a: Index, c: int) -> Index:
    """Return `a mod c`, simplified with the variables' extents."""
    if c == 1:
        return Const(0)
    if bound(a) <= c:
        return a
    match a:
        case Const(value=v):
            return Const(v % c)
        case Bin("add", Bin("mul", _, Const(value=m)), y) if m % c == 0:
            return rem(y, c)
        case _:
            return Bin("rem", a, Const(c))


def shift_into(e: Index, offset: int, size: int) -> Index:
    """Return `e - offset` clamped to `0 ..< size`, folded.

    A concat reads each operand at the clamped index, so that the operands it does not
    select at a point are still read in bounds.
    """
    if isinstance(e, Const):
        return Const(min(max(e.value - offset, 0), size - 1))
    if offset > 0:
        e = Bin("sub", Bin("max", e, Const(offset)), Const(offset))
    return e if bound(e) <= size else Bin("min", e, Const(size - 1))


def free_vars(e: Index) -> set[Var]:
    """Return the loop variables `e` depends on."""
    match e:
        case Var():
            return {e}
        case Const() | Scalar():
            return set()
        case Loaded(point=point):
            return point_vars(point)
        case Bin(_, lhs, rhs):
            return free_vars(lhs) | free_vars(rhs)
        case _:
            raise AssertionError(f"unexpected index expression {e}")


def point_vars(point: Point) -> set[Var]:
    """Return the loop variables any dimension of `point` depends on."""
    return set().union(*(free_vars(e) for e in point))


def broadcast_point(point: Point, src_shape: Sequence[int]) -> Point:
    """Map a point of a broadcast result to its operand (right-aligned, size-1 dims read 0)."""
    lead = len(point) - len(src_shape)
    return tuple(Const(0) if s == 1 else point[lead + i] for i, s in enumerate(src_shape))


def transpose_point(point: Point, perm: Sequence[int]) -> Point:
    """Map a point of a transpose result (result dim i is operand dim perm[i]) to its operand."""
    src: list[Index] = [Const(0)] * len(perm)
    for i, p in enumerate(perm):
        src[p] = point[i]
    return tuple(src)


def slice_point(point: Point, dim: int, start: int, step: int) -> Point:
    """Map a point of a slice result (dim `dim` from `start` by `step`) to its operand."""
    return (*point[:dim], add(mul(point[dim], step), Const(start)), *point[dim + 1 :])


def dynamic_slice_point(point: Point, dim: int, offset: Scalar) -> Point:
    """Map a point of a dynamic slice result (dim `dim` from a runtime offset) to its operand."""
    return (*point[:dim], add(point[dim], offset), *point[dim + 1 :])


def gather_point(point: Point, ids: SSAValue, id_rank: int, rows: int) -> Point:
    """Map a point of a gather result to its table: the id at the leading dims, clamped."""
    row = Bin("min", Bin("max", Loaded(ids, point[:id_rank]), Const(0)), Const(rows - 1))
    return (row, *point[id_rank:])


def _groups(shape: Sequence[int], cuts: Sequence[int]) -> list[list[int]]:
    """Return the dims of `shape` between each two consecutive `cuts` of its prefix product."""
    dims: list[list[int]] = [[] for _ in cuts]
    for k, before in zip(range(len(shape)), accumulate(shape, mul_int, initial=1)):
        dims[bisect_right(cuts, before) - 1].append(k)
    return dims


def reshape_point(point: Point, dst_shape: Sequence[int], src_shape: Sequence[int]) -> Point:
    """Map a point of a row-major reshape result to its operand.

    Both shapes are cut where their prefix products agree; within each group the dims are
    linearized over `dst_shape` and delinearized over `src_shape`, so dims the two shapes share
    map one to one and a split or a merge costs index arithmetic only inside its own group.
    """
    cuts = sorted(
        set(accumulate(dst_shape, mul_int, initial=1))
        & set(accumulate(src_shape, mul_int, initial=1))
    )
    src_point: list[Index] = []
    for dst_dims, src_dims in zip(_groups(dst_shape, cuts), _groups(src_shape, cuts)):
        linear: Index = Const(0)
        for k in dst_dims:
            linear = add(mul(linear, dst_shape[k]), point[k])
        middle: list[Index] = []
        for k in reversed(src_dims):
            middle.insert(0, rem(linear, src_shape[k]))
            linear = div(linear, src_shape[k])
        src_point.extend(middle)
    return tuple(src_point)
