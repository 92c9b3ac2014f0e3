"""Evaluating loop-level index arithmetic with numpy over a grid of index values.

Used by rewrites that must prove a property of an index expression for every point of a
(small) index space (a causal mask's condition), and by tests that check index maps on a grid.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation, SSAValue

INDEX_OPS = {
    "arith.addi": np.add,
    "arith.subi": np.subtract,
    "arith.muli": np.multiply,
    "arith.divui": np.floor_divide,
    "arith.remui": np.remainder,
    "arith.maxsi": np.maximum,
    "arith.minsi": np.minimum,
    "arith.andi": np.logical_and,
    "arith.ori": np.logical_or,
}
CMPI = (
    *(np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal),
    *(np.less, np.less_equal, np.greater, np.greater_equal),
)
"""`arith.cmpi` predicates eq ne slt sle sgt sge ult ule ugt uge on (non-negative) indices."""


def constant_index(value: SSAValue) -> int | None:
    """Returns the value of an integer `arith.constant`, else None."""
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def on_grid(value: SSAValue, env: dict[SSAValue, np.ndarray]) -> np.ndarray | None:
    """Evaluate index arithmetic and comparisons over the grid `env` binds; None for any
    value that is not built from the bound indices and constants by such ops."""
    if value in env:
        return env[value]
    op = value.owner
    if (constant := constant_index(value)) is not None:
        result = np.int64(constant)
    elif isinstance(op, arith.CmpiOp) or (isinstance(op, Operation) and op.name in INDEX_OPS):
        operands = [on_grid(v, env) for v in op.operands]
        if any(o is None for o in operands):
            return None
        if isinstance(op, arith.CmpiOp):
            result = CMPI[op.predicate.value.data](*operands)
        else:
            result = INDEX_OPS[op.name](*operands)
    else:
        return None
    env[value] = result
    return result
