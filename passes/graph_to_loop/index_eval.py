"""Evaluating loop-level index arithmetic with numpy over a grid of index values.

Used by rewrites that must prove a property of an index expression for every point of a
(small) index space (a causal mask's condition), and by tests that check index maps on a grid.
"""

from __future__ import annotations

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import FloatAttr, IntegerAttr
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


FLOAT_OPS = {
    "arith.addf": np.add,
    "arith.subf": np.subtract,
    "arith.mulf": np.multiply,
    "arith.index_cast": lambda x: x,
    "arith.sitofp": lambda x: np.asarray(x, np.float64),
    "arith.select": np.where,
}
"""Float ops of index values (a mask built from `graph.iota`), evaluated while exact."""
CMPF = {1: np.equal, 2: np.greater, 3: np.greater_equal, 4: np.less, 5: np.less_equal}
CMPF |= {13: np.not_equal}
"""The `arith.cmpf` predicates `fuse` emits: oeq ogt oge olt ole une."""
EXACT = 2**24
"""Integers up to this are exact in f32: float values past it (or not integers) are not
evaluated, since the device's f32 rounding (or fused multiply-adds) could differ."""


def constant_index(value: SSAValue) -> int | None:
    """Returns the value of an integer `arith.constant`, else None."""
    op = value.owner
    if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
        return op.value.value.data
    return None


def on_grid(value: SSAValue, env: dict[SSAValue, np.ndarray]) -> np.ndarray | None:
    """Evaluate index arithmetic and comparisons over the grid `env` binds; None for any
    value that is not built from the bound indices and constants by such ops (float ops
    included while every value they give is an integer that f32 holds exactly)."""
    if value in env:
        return env[value]
    op = value.owner
    if (constant := constant_index(value)) is not None:
        result = np.int64(constant)
    elif isinstance(op, arith.ConstantOp) and isinstance(op.value, FloatAttr):
        result = np.float64(op.value.value.data)
    elif isinstance(op, arith.CmpiOp | arith.CmpfOp) or (
        isinstance(op, Operation) and op.name in (*INDEX_OPS, *FLOAT_OPS)
    ):
        operands = [on_grid(v, env) for v in op.operands]
        if any(o is None for o in operands):
            return None
        if isinstance(op, arith.CmpiOp):
            result = CMPI[op.predicate.value.data](*operands)
        elif isinstance(op, arith.CmpfOp):
            if op.predicate.value.data not in CMPF:
                return None
            result = CMPF[op.predicate.value.data](*operands)
        elif op.name in INDEX_OPS:
            result = INDEX_OPS[op.name](*operands)
        else:
            result = FLOAT_OPS[op.name](*operands)
            floats = np.asarray(result)
            if floats.dtype.kind == "f" and not (
                np.all(np.abs(floats) <= EXACT) and np.all(floats == np.round(floats))
            ):
                return None
    else:
        return None
    env[value] = result
    return result
