"""Scalar f32 code for one element of a graph elementwise op, as `arith`/`math` ops.

All kernel math is in f32: f16/bf16 values are extended right after their load and
truncated right before their store, and `graph.cast` to a narrower type rounds through a
truncf/extf pair so the value carries the narrower precision. Masks are i1 scalars (an
`arith.cmpf`, or a loaded `bool`) and integer inputs stay integers until `graph.cast`
converts them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import pi, sqrt
from typing import Protocol

from xdsl.dialects import arith, llvm, math
from xdsl.dialects.builtin import FloatAttr, IntegerType, f32
from xdsl.ir import Attribute, Operation, SSAValue

from tinyopt.dialects import graph


class ScalarBuilder(Protocol):
    """Where scalar code goes: `emit` inserts an op and returns its result."""

    def const(self, value: float) -> SSAValue:
        """Return an f32 constant."""

    def emit(self, op: Operation) -> SSAValue:
        """Insert `op` and return its single result."""


_Lower = Callable[[ScalarBuilder, Sequence[SSAValue]], SSAValue]


def _sigmoid(b: ScalarBuilder, x: SSAValue) -> SSAValue:
    e = b.emit(math.ExpOp(b.emit(arith.NegfOp(x))))
    return b.emit(arith.DivfOp(b.const(1.0), b.emit(arith.AddfOp(b.const(1.0), e))))


def _gelu(b: ScalarBuilder, x: SSAValue) -> SSAValue:
    erf = b.emit(math.ErfOp(b.emit(arith.MulfOp(x, b.const(0.70710678)))))
    half_x = b.emit(arith.MulfOp(b.const(0.5), x))
    return b.emit(arith.MulfOp(half_x, b.emit(arith.AddfOp(b.const(1.0), erf))))


GELU_TANH_K = sqrt(2 / pi)
"""sqrt(2/pi), GELU's tanh-form scale."""


def _gelu_tanh(b: ScalarBuilder, x: SSAValue) -> SSAValue:
    """`x / (1 + exp(-2u))`, u = sqrt(2/pi)·(x + 0.044715·x³): the same function as
    `0.5·x·(1 + tanh(u))` (1 + tanh(u) = 2 / (1 + exp(-2u))), an exp, an FMA and a divide
    where `tanhf` is a call of about 30 instructions, in a GEMM's epilogue. exp(-2u) overflows
    to inf for x below about -9.3, where the quotient is -0, as GELU rounds there."""
    square = b.emit(arith.MulfOp(x, x))
    slope = b.emit(arith.MulfOp(square, b.const(-2 * GELU_TANH_K * 0.044715)))
    exponent = b.emit(arith.MulfOp(x, b.emit(arith.AddfOp(slope, b.const(-2 * GELU_TANH_K)))))
    e = b.emit(math.ExpOp(exponent))
    return b.emit(arith.DivfOp(x, b.emit(arith.AddfOp(b.const(1.0), e))))


def _pow(b: ScalarBuilder, x: SSAValue, y: SSAValue) -> SSAValue:
    """`x ** y` as C's `pow`; a constant exponent of 2, 3, 0.5, -1 or -2 is multiplies, a
    square root or a reciprocal (exact where `powf` is not, and a fraction of its cost in a
    GEMM epilogue: GPT-2's GELU cubes its input). The square root keeps `pow`'s values where
    it differs: pow(-0, 0.5) = +0 (sqrt(x + 0)) and pow(-inf, 0.5) = +inf (torch's `x ** 0.5`
    is a plain sqrt, which the frontend captures as `graph.sqrt`)."""
    owner = y.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, FloatAttr):
        exponent = owner.value.value.data
        if exponent in (2.0, 3.0, -2.0):
            power = b.emit(arith.MulfOp(x, x))
            if exponent == 3.0:
                power = b.emit(arith.MulfOp(power, x))
            return power if exponent > 0 else b.emit(arith.DivfOp(b.const(1.0), power))
        if exponent == -1.0:
            return b.emit(arith.DivfOp(b.const(1.0), x))
        if exponent == 0.5:
            root = b.emit(math.SqrtOp(b.emit(arith.AddfOp(x, b.const(0.0)))))
            minus_inf = b.emit(arith.CmpfOp(x, b.const(float("-inf")), "oeq"))
            return b.emit(arith.SelectOp(minus_inf, b.const(float("inf")), root))
    return b.emit(math.PowFOp(x, y))


def _remainder(b: ScalarBuilder, x: SSAValue, y: SSAValue) -> SSAValue:
    """torch.remainder(x, y) as torch computes it: `m = fmod(x, y)`, plus y where m is not 0
    and its sign differs from y's, that is where `y < 0 ? m > 0 : m < 0` (false for a NaN m,
    which stays NaN); a zero m keeps x's sign, as in torch."""
    m = b.emit(llvm.FRemOp(x, y))
    zero = b.const(0.0)
    wrong_sign = b.emit(
        arith.SelectOp(
            b.emit(arith.CmpfOp(y, zero, "olt")),
            b.emit(arith.CmpfOp(m, zero, "ogt")),
            b.emit(arith.CmpfOp(m, zero, "olt")),
        )
    )
    return b.emit(arith.SelectOp(wrong_sign, b.emit(arith.AddfOp(m, y)), m))


_ELEMENTWISE: dict[type[Operation], _Lower] = {
    graph.NegOp: lambda b, a: b.emit(arith.NegfOp(a[0])),
    graph.AbsOp: lambda b, a: b.emit(math.AbsFOp(a[0])),
    graph.ExpOp: lambda b, a: b.emit(math.ExpOp(a[0])),
    graph.LogOp: lambda b, a: b.emit(math.LogOp(a[0])),
    graph.SqrtOp: lambda b, a: b.emit(math.SqrtOp(a[0])),
    graph.RsqrtOp: lambda b, a: b.emit(math.RsqrtOp(a[0])),
    graph.ReciprocalOp: lambda b, a: b.emit(arith.DivfOp(b.const(1.0), a[0])),
    graph.TanhOp: lambda b, a: b.emit(math.TanhOp(a[0])),
    graph.SigmoidOp: lambda b, a: _sigmoid(b, a[0]),
    graph.ReluOp: lambda b, a: b.emit(arith.MaximumfOp(a[0], b.const(0.0))),
    graph.GeluOp: lambda b, a: _gelu(b, a[0]),
    graph.GeluTanhOp: lambda b, a: _gelu_tanh(b, a[0]),
    graph.SiluOp: lambda b, a: b.emit(arith.MulfOp(a[0], _sigmoid(b, a[0]))),
    graph.AddOp: lambda b, a: b.emit(arith.AddfOp(a[0], a[1])),
    graph.SubOp: lambda b, a: b.emit(arith.SubfOp(a[0], a[1])),
    graph.MulOp: lambda b, a: b.emit(arith.MulfOp(a[0], a[1])),
    graph.DivOp: lambda b, a: b.emit(arith.DivfOp(a[0], a[1])),
    graph.MaxOp: lambda b, a: b.emit(arith.MaximumfOp(a[0], a[1])),
    graph.MinOp: lambda b, a: b.emit(arith.MinimumfOp(a[0], a[1])),
    graph.PowOp: lambda b, a: _pow(b, a[0], a[1]),
    graph.Atan2Op: lambda b, a: b.emit(math.Atan2Op(a[0], a[1])),
    # LLVM's `frem` is C's fmod, exact (MLIR's `arith.remf` lowers to it; xDSL has no remf).
    graph.FmodOp: lambda b, a: b.emit(llvm.FRemOp(a[0], a[1])),
    graph.RemainderOp: lambda b, a: _remainder(b, a[0], a[1]),
    graph.CopySignOp: lambda b, a: b.emit(math.CopySignOp(a[0], a[1])),
    graph.ErfOp: lambda b, a: b.emit(math.ErfOp(a[0])),
    graph.CosOp: lambda b, a: b.emit(math.CosOp(a[0])),
    graph.SinOp: lambda b, a: b.emit(math.SinOp(a[0])),
    graph.Log1pOp: lambda b, a: b.emit(math.Log1pOp(a[0])),
    graph.Expm1Op: lambda b, a: b.emit(math.ExpM1Op(a[0])),
    graph.FloorOp: lambda b, a: b.emit(math.FloorOp(a[0])),
    graph.CeilOp: lambda b, a: b.emit(math.CeilOp(a[0])),
    graph.RoundOp: lambda b, a: b.emit(math.RoundEvenOp(a[0])),
    graph.TruncOp: lambda b, a: b.emit(math.TruncOp(a[0])),
    graph.SelectOp: lambda b, a: b.emit(arith.SelectOp(a[0], a[1], a[2])),
}

_CMPF = {"eq": "oeq", "ne": "une", "lt": "olt", "le": "ole", "gt": "ogt", "ge": "oge"}
"""`graph.compare` predicates as `arith.cmpf` ones: ordered (false on NaN) but for `ne`."""

ELEMENTWISE_OPS: tuple[type[Operation], ...] = (*_ELEMENTWISE, graph.CastOp, graph.CompareOp)
"""The graph ops `lower_elementwise` handles."""


def lower_elementwise(op: Operation, args: Sequence[SSAValue], b: ScalarBuilder) -> SSAValue:
    """Emit the scalar code of elementwise `op` applied to scalars `args` (f32 but masks)."""
    if isinstance(op, graph.CompareOp):
        return b.emit(arith.CmpfOp(args[0], args[1], _CMPF[op.predicate.data]))
    if isinstance(op, graph.CastOp):
        return _cast(b, args[0], element_type(op.results[0].type))
    return _ELEMENTWISE[type(op)](b, args)


def _cast(b: ScalarBuilder, value: SSAValue, target: Attribute) -> SSAValue:
    """Convert a scalar for `graph.cast`: a float to a mask (`!= 0`), a mask to 0 or 1, an
    integer to the nearest float; floats round to the target's precision."""
    if target == graph.BOOL:
        return b.emit(arith.CmpfOp(value, b.const(0.0), "une"))
    if isinstance(target, IntegerType):
        return b.emit(arith.FPToSIOp(value, target))
    if value.type == graph.BOOL:
        value = b.emit(arith.SelectOp(value, b.const(1.0), b.const(0.0)))
    elif isinstance(value.type, IntegerType):
        value = b.emit(arith.SIToFPOp(value, f32))
    return round_to(b, value, target)


def element_type(type_: Attribute) -> Attribute:
    """Return the element type of a shaped type."""
    return type_.element_type  # type: ignore[attr-defined]


def to_f32(b: ScalarBuilder, value: SSAValue) -> SSAValue:
    """Extend a loaded f16/bf16 scalar to f32 (f32, masks and integers pass through)."""
    if value.type == f32 or isinstance(value.type, IntegerType):
        return value
    return b.emit(arith.ExtFOp(value, f32))


def from_f32(b: ScalarBuilder, value: SSAValue, type_: Attribute) -> SSAValue:
    """Truncate an f32 scalar to the element type of the buffer it is stored to (a mask or
    an integer is stored as it is); a value just extended from that type is stored as the
    narrow value it came from (`cast` to bf16 before a bf16 store rounds once, not twice)."""
    if value.type == type_:
        return value
    if isinstance(value.owner, arith.ExtFOp) and value.owner.input.type == type_:
        return value.owner.input
    return b.emit(arith.TruncFOp(value, type_))


def round_to(b: ScalarBuilder, value: SSAValue, type_: Attribute) -> SSAValue:
    """Round an f32 scalar to the precision of `type_`, keeping it f32."""
    return value if type_ == f32 else to_f32(b, from_f32(b, value, type_))
