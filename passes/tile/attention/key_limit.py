"""The last key an attention kernel's rows can see, as a function of its runtime scalars.

A cache compiled for a capacity of keys holds L valid ones at a step (`graph.attention ...
valid(%L)`): `decompose` masks the keys past L − Sq + i with −inf, through a window of an iota
at offset L, which `fuse` inlines as `sitofp(L + j)` compared with the key's own index. The
schedules would still visit every key up to the capacity; this module proves, from the score's
expression, that every key j with a·j > B(rows, scalars) scores −inf, so the blocks stop at the
last key the step can see (`decode_split.py`; `wgmma.py`, for a chunk of many queries).

The proof reads the selects on the way from the yielded score: `select(c, s, −inf)` masks the
keys where c is false (`select(c, −inf, s)` where it is true). Where c compares two values that
are affine in j, the nest's row indices and the kernel's integer arguments (`arith` integer
arithmetic, integer casts, float arithmetic on integers that is exact), c is an inequality
`a·j ≤ B`; a > 0 bounds the seen keys above. Float steps are exact because every value is an
integer below 2^24 in magnitude over the index ranges and the scalars' bounds (the host
function's `tinyopt.bounds`); the row terms take their largest value over every row, so one
bound holds for every group of rows. Anything else (a mask loaded from memory, a scalar
without bounds) gives no bound, and the kernel visits every key, masked as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import FloatAttr, IndexType, IntegerAttr, IntegerType, ModuleOp
from xdsl.ir import BlockArgument, SSAValue

from tinyopt.dialects import loop
from tinyopt.dialects.runtime_scalar import host_bounds
from tinyopt.passes.tile.emit import Emitter, Mapping

if TYPE_CHECKING:  # the matchers import the schedules that import this module
    from tinyopt.passes.tile.attention.attention_match import Attention
    from tinyopt.passes.tile.attention.decode_match import DecodeAttention

EXACT_FLOAT = 1 << 24
"""Integers of at most this magnitude are exact in f32 (and every sum of two of them below it)."""
EXACT_INT = 1 << 62
"""Bound on index arithmetic the proof accepts (no int64 overflow on the way)."""

Form = dict[SSAValue | None, int]
"""An affine form: coefficient by variable (None: the constant term)."""


@dataclass(frozen=True)
class KeyLimit:
    """Keys j past `slope`·j ≤ `offset` + Σ coefficient·scalar score −inf in every row."""

    slope: int
    offset: int
    scalars: tuple[tuple[BlockArgument, int], ...]
    """(kernel argument, coefficient): the runtime scalars the bound moves with."""
    rows: tuple[tuple[SSAValue, int, int], ...] = ()
    """(row index, coefficient c, its largest value): row r's own bound is `offset` − Σ
    max(0, c·largest) + Σ c·r, so a group of rows may stop earlier than every row (a causal
    chunk's first query tile)."""


def kernel_scalar_bounds(module: ModuleOp, kernel: loop.KernelOp) -> dict[int, tuple[int, int]]:
    """The bounds of the kernel's integer arguments, by position: the union over its launches
    of the host function arguments' `tinyopt.bounds`; an argument some launch passes anything
    else is left out."""
    name = kernel.sym_name.data
    found: dict[int, tuple[int, int]] = {}
    unknown: set[int] = set()
    for function in module.ops:
        if not isinstance(function, func.FuncOp):
            continue
        declared = host_bounds(function)
        for launch in function.walk():
            if not isinstance(launch, loop.LaunchOp) or launch.callee.root_reference.data != name:
                continue
            for position, operand in enumerate(launch.operands):
                if not isinstance(operand.type, IntegerType):
                    continue
                host = isinstance(operand, BlockArgument) and operand.owner is function.body.block
                if not host or operand.index not in declared:  # type: ignore[union-attr]
                    unknown.add(position)
                    continue
                lo, hi = declared[operand.index]  # type: ignore[union-attr]
                old = found.get(position, (lo, hi))
                found[position] = (min(lo, old[0]), max(hi, old[1]))
    return {p: b for p, b in found.items() if p not in unknown}


def key_limit(
    a: Attention | DecodeAttention, bounds: dict[int, tuple[int, int]]
) -> KeyLimit | None:
    """The bound on the keys any row of `a` sees, or None where the score gives none. The
    nest's indices but the last (the head dim's) are the rows'."""
    j = a.reduce.body.block.args[0]
    kernel = a.nest.parent_op()
    assert isinstance(kernel, loop.KernelOp)
    rows = a.nest.body.block.args[:-1]
    ranges: dict[SSAValue, tuple[int, int]] = {j: (0, a.reduce.extents[0] - 1)}
    for iv, extent in zip(rows, a.nest.extents[:-1]):
        ranges[iv] = (0, extent - 1)
    for position, arg in enumerate(kernel.body.block.args):
        if position in bounds:
            ranges[arg] = bounds[position]
    forms = _Forms(ranges)
    score = a.reduce.body.block.last_op.operands[0]  # type: ignore[union-attr]
    while isinstance(select := score.owner, arith.SelectOp):
        kept_if_true = _is_minus_inf(select.rhs)
        if not kept_if_true and not _is_minus_inf(select.lhs):
            return None
        bound = _inequality(forms, select.cond, kept_if_true, j, rows)
        if bound is not None:
            return bound
        score = select.lhs if kept_if_true else select.rhs
    return None


def seen_keys(
    em: Emitter,
    limit: KeyLimit,
    mapping: Mapping,
    keys: int,
    rows: dict[SSAValue, tuple[SSAValue, SSAValue]] | None = None,
) -> SSAValue:
    """Emits the number of keys any row may see: ⌊(offset + Σ c·scalar) / slope⌋ + 1, in
    [0, keys] (an index). With `rows` (row index → the first and last value a group of rows
    takes), the row terms of those indices are the group's largest instead of every row's."""
    offset, terms = limit.offset, []
    for iv, coefficient, largest in limit.rows:
        if rows is not None and iv in rows:
            offset -= max(0, coefficient * largest)
            terms.append((rows[iv][1 if coefficient > 0 else 0], coefficient))
    total: SSAValue = em.index(offset)
    for value, coefficient in terms:
        total = em.add(total, em.mul(value, coefficient))
    for arg, coefficient in limit.scalars:
        scalar = mapping.get(arg, arg)
        as_index = em.value(arith.IndexCastOp(scalar, IndexType()))
        term = em.value(arith.MuliOp(as_index, em.index(coefficient)))
        total = em.value(arith.AddiOp(total, term))
    if limit.slope != 1:
        total = em.value(arith.FloorDivSIOp(total, em.index(limit.slope)))
    seen = em.value(arith.AddiOp(total, em.index(1)))
    seen = em.value(arith.MaxSIOp(seen, em.index(0)))
    return em.value(arith.MinSIOp(seen, em.index(keys)))


def tile_seen_keys(
    em: Emitter, limit: KeyLimit, a: Attention, mapping: Mapping, q0: SSAValue, rows: int
) -> SSAValue:
    """Emits the keys the query rows q0 … q0 + rows − 1 (clamped to the last) of the batch index
    in `mapping` may see, at least one: a row with no key to see gives what the whole loop
    did. The end of a prefill schedule's key loop over a cache of L valid keys."""
    s_q = a.nest.extents[-2]
    last = em.value(arith.MinSIOp(em.add(q0, rows - 1), em.index(s_q - 1)))
    group = {iv: (mapping[iv], mapping[iv]) for iv in a.batch} | {a.i: (q0, last)}
    seen = seen_keys(em, limit, mapping, a.reduce.extents[0], group)
    return em.value(arith.MaxSIOp(seen, em.index(1)))


def _is_minus_inf(value: SSAValue) -> bool:
    owner = value.owner
    return (
        isinstance(owner, arith.ConstantOp)
        and isinstance(owner.value, FloatAttr)
        and owner.value.value.data == float("-inf")
    )


_LESS = {"ole": "le", "ule": "le", "olt": "lt", "ult": "lt", "sle": "le", "slt": "lt"}
_GREATER = {"oge": "ge", "uge": "ge", "ogt": "gt", "ugt": "gt", "sge": "ge", "sgt": "gt"}
_NEGATION = {"le": "gt", "lt": "ge", "ge": "lt", "gt": "le"}
_UNSIGNED_INT = ("ule", "ult", "uge", "ugt")


def _inequality(
    forms: _Forms, cond: SSAValue, holds: bool, j: SSAValue, rows: Sequence[SSAValue]
) -> KeyLimit | None:
    """The bound a key kept where `cond` is `holds` obeys, if `cond` is an affine compare."""
    compare = cond.owner
    if not isinstance(compare, arith.CmpfOp | arith.CmpiOp):
        return None
    name = _predicate_name(compare)
    relation = _LESS.get(name) or _GREATER.get(name)
    lhs, rhs = forms.of(compare.lhs), forms.of(compare.rhs)
    if relation is None or lhs is None or rhs is None:
        return None
    if isinstance(compare, arith.CmpiOp) and name in _UNSIGNED_INT:
        if forms.range_of(lhs)[0] < 0 or forms.range_of(rhs)[0] < 0:
            return None
    if not holds:
        relation = _NEGATION[relation]
    # lhs - rhs (relation) 0, made `diff ≤ 0` over the integers.
    diff = _combine(lhs, rhs, -1)
    if relation in ("ge", "gt"):
        diff = {k: -c for k, c in diff.items()}
    if relation in ("lt", "gt"):
        diff[None] = diff.get(None, 0) + 1
    slope = diff.get(j, 0)
    if slope <= 0:
        return None
    offset = -diff.get(None, 0)
    row_terms = []
    for iv in rows:  # the row terms' largest value over every row
        coefficient = -diff.get(iv, 0)
        offset += max(0, coefficient * forms.ranges[iv][1])
        if coefficient:
            row_terms.append((iv, coefficient, forms.ranges[iv][1]))
    scalars = []
    for variable, coefficient in diff.items():
        if variable is None or variable is j or variable in rows:
            continue
        if not isinstance(variable, BlockArgument):
            return None
        scalars.append((variable, -coefficient))
    return KeyLimit(slope, offset, tuple(scalars), tuple(row_terms))


def _predicate_name(compare: arith.CmpfOp | arith.CmpiOp) -> str:
    names = (
        arith.CMPF_COMPARISON_OPERATIONS
        if isinstance(compare, arith.CmpfOp)
        else arith.CMPI_COMPARISON_OPERATIONS
    )
    return names[compare.predicate.value.data]


def _combine(x: Form, y: Form, sign: int) -> Form:
    out = dict(x)
    for key, coefficient in y.items():
        out[key] = out.get(key, 0) + sign * coefficient
    return {k: c for k, c in out.items() if c}


class _Forms:
    """Affine forms of values over the variables with known ranges (memoized)."""

    def __init__(self, ranges: dict[SSAValue, tuple[int, int]]) -> None:
        self.ranges = ranges
        self._memo: dict[SSAValue, Form | None] = {}

    def range_of(self, form: Form) -> tuple[int, int]:
        lo = hi = form.get(None, 0)
        for variable, coefficient in form.items():
            if variable is None:
                continue
            a, b = (coefficient * r for r in self.ranges[variable])
            lo, hi = lo + min(a, b), hi + max(a, b)
        return lo, hi

    def _fits(self, form: Form, limit: int) -> Form | None:
        lo, hi = self.range_of(form)
        return form if max(-lo, hi) <= limit else None

    def of(self, value: SSAValue) -> Form | None:
        if value not in self._memo:
            self._memo[value] = self._compute(value)
        return self._memo[value]

    def _compute(self, value: SSAValue) -> Form | None:
        if value in self.ranges:
            return {value: 1}
        op = value.owner
        is_float = not isinstance(value.type, IntegerType | IndexType)
        limit = EXACT_FLOAT if is_float else EXACT_INT
        if isinstance(op, arith.ConstantOp):
            attr = op.value
            if isinstance(attr, IntegerAttr):
                return {None: attr.value.data}
            if isinstance(attr, FloatAttr) and float(attr.value.data).is_integer():
                number = int(attr.value.data)
                return {None: number} if abs(number) <= limit else None
            return None
        if isinstance(op, arith.IndexCastOp | arith.SIToFPOp | arith.ExtSIOp):
            inner = self.of(op.operands[0])
            return None if inner is None else self._fits(inner, limit)
        if isinstance(op, arith.AddiOp | arith.AddfOp | arith.SubiOp | arith.SubfOp):
            x, y = self.of(op.operands[0]), self.of(op.operands[1])
            if x is None or y is None:
                return None
            sign = 1 if isinstance(op, arith.AddiOp | arith.AddfOp) else -1
            return self._fits(_combine(x, y, sign), limit)
        if isinstance(op, arith.MuliOp | arith.MulfOp):
            x, y = self.of(op.operands[0]), self.of(op.operands[1])
            if x is None or y is None:
                return None
            if set(y) <= {None}:
                x, y = y, x
            if not set(x) <= {None}:
                return None
            factor = x.get(None, 0)
            return self._fits({k: c * factor for k, c in y.items() if c * factor}, limit)
        return None
