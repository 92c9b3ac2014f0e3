"""Runtime scalars: 0-d i32/i64 function arguments used as positions or lengths (docs/ir.md).

In a graph function a runtime scalar is a `tensor<i32>` or `tensor<i64>` argument read only
as the offset of `graph.dynamic_slice` / `graph.dynamic_update_slice` (each use accepts the
offsets `0 ..= extent - window`) or as the number of valid keys of `graph.attention` (`Sq` or 1
`..= Skv`). An argument attribute `tinyopt.bounds` on the graph function bounds it too (what
`decompose` leaves of an attention's bounds). Its bounds are the intersection of all these.
`fuse` makes it an `i32`/`i64` argument of the host function, carrying its bounds as the
argument attribute `tinyopt.bounds = array<i64: lo, hi>`, and of every kernel that reads it,
passed by value. Every executor checks the value given for it against those bounds before
running anything (`check_value`): a position out of range is an error naming the input and
the bound, never a memory fault or a clamp.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xdsl.dialects import func
from xdsl.dialects.builtin import ArrayAttr, DenseArrayBase, DictionaryAttr, IntegerType, i64
from xdsl.ir import BlockArgument
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.dialects import graph

BOUNDS_ATTR = "tinyopt.bounds"
"""Host function argument attribute of a runtime scalar: `array<i64: lo, hi>`, inclusive."""


class ScalarRangeError(ValueError):
    """A runtime scalar given outside its bounds (or not an integer)."""


@dataclass(frozen=True)
class ScalarBounds:
    """The values a runtime scalar may take, `lo ..= hi`, and the use that sets each end."""

    lo: int
    hi: int
    lo_role: str
    hi_role: str


def runtime_scalars(function: func.FuncOp) -> dict[BlockArgument, ScalarBounds]:
    """The runtime scalars of a graph function with their bounds; raises a
    `DiagnosticException` for one also read as a tensor, or whose uses accept no value."""
    found: dict[BlockArgument, ScalarBounds] = {}
    declared = host_bounds(function)
    for arg in function.args:
        uses = [b for u in arg.uses if (b := _use_bounds(u.operation, u.index)) is not None]
        if arg.index in declared:
            lo, hi = declared[arg.index]
            uses.append((lo, hi, f"its {BOUNDS_ATTR} attribute"))
        if not uses:
            continue
        name = describe(function, arg)
        for use in arg.uses:
            if _use_bounds(use.operation, use.index) is None:
                raise DiagnosticException(
                    f"{name} is a runtime scalar ({uses[0][2]}) and cannot also be read as a "
                    f"tensor (by {use.operation.name})"
                )
        bounds: ScalarBounds | None = None
        for lo, hi, role in uses:
            if bounds is None:
                bounds = ScalarBounds(lo, hi, role, role)
                continue
            if lo > bounds.lo:
                bounds = ScalarBounds(lo, bounds.hi, role, bounds.hi_role)
            if hi < bounds.hi:
                bounds = ScalarBounds(bounds.lo, hi, bounds.lo_role, role)
        assert bounds is not None
        if bounds.lo > bounds.hi:
            raise DiagnosticException(
                f"{name} has no valid value: {bounds.lo_role} needs at least "
                f"{bounds.lo}, {bounds.hi_role} at most {bounds.hi}"
            )
        found[arg] = bounds
    return found


def _use_bounds(op: object, index: int) -> tuple[int, int, str] | None:
    """The bounds a use as operand `index` of `op` sets, with what it is; None for a use that
    reads the argument as a tensor."""
    if isinstance(op, graph.DynamicOffsetOp) and op.operands[index] is op.offset_value:
        return (*op.offset_bounds(), op.offset_role())
    if isinstance(op, graph.AttentionOp) and op.operands[index] is op.valid:
        return (*op.valid_bounds(), op.valid_role())
    return None


def describe(function: func.FuncOp, arg: BlockArgument) -> str:
    """Names a function argument: `@f argument 2 (%pos)`."""
    hint = f" (%{arg.name_hint})" if arg.name_hint else ""
    return f"@{function.sym_name.data} argument {arg.index}{hint}"


def bounds_attr(bounds: ScalarBounds) -> DictionaryAttr:
    """The argument attributes of a runtime scalar on the host function."""
    return DictionaryAttr({BOUNDS_ATTR: DenseArrayBase.from_list(i64, [bounds.lo, bounds.hi])})


def host_bounds(function: func.FuncOp) -> dict[int, tuple[int, int]]:
    """The bounds of the runtime scalars of a host function, by argument position."""
    found: dict[int, tuple[int, int]] = {}
    attrs = function.arg_attrs
    if not isinstance(attrs, ArrayAttr):
        return found
    for position, attr in enumerate(attrs.data):
        if isinstance(attr, DictionaryAttr) and BOUNDS_ATTR in attr.data:
            value = attr.data[BOUNDS_ATTR]
            if not (
                isinstance(value, DenseArrayBase)
                and value.elt_type == i64
                and len(value.get_values()) == 2
            ):
                raise DiagnosticException(
                    f"@{function.sym_name.data} argument {position}: {BOUNDS_ATTR} must be "
                    f"array<i64: lo, hi>, got {value}"
                )
            lo, hi = value.get_values()
            found[position] = (int(lo), int(hi))
    return found


def is_scalar_type(t: object) -> bool:
    """Whether a host or kernel argument type is a runtime scalar's (`i32` or `i64`)."""
    return isinstance(t, IntegerType) and t in graph.ID_TYPES


def check_value(name: str, value: object, bounds: tuple[int, int]) -> int:
    """Return the integer given for a runtime scalar after checking it against its bounds;
    raises `ScalarRangeError` naming the input and the bound."""
    lo, hi = bounds
    exact = False  # an array of one element is refused, not read; so is a bool
    if getattr(value, "shape", ()) == () and not isinstance(value, bool | np.bool_):
        try:
            number = int(value)  # type: ignore[call-overload]
            exact = number == value
        except (TypeError, ValueError, OverflowError):  # OverflowError: an infinite float
            pass
    if not exact:
        raise ScalarRangeError(f"{name} is a runtime scalar: give an integer, got {value!r}")
    if number < lo:
        raise ScalarRangeError(f"{name} is {number}, below its smallest value {lo}")
    if number > hi:
        raise ScalarRangeError(f"{name} is {number}, past its largest value {hi}")
    return number
