"""The `graph` dialect: tensor programs with value semantics (see docs/ir.md).

Every op takes and returns static ranked tensors of f32, f16 or bf16, except: 8-bit floats
(f8E4M3FN, f8E5M2: what `graph.cast` converts and the data-movement ops carry), integer
inputs (i32 or i64: the ids `graph.gather` reads, what `graph.cast` converts, the indices
`graph.argmax` gives) and masks (i1:
what `graph.compare` makes and `graph.select` reads), which the shape and data-movement ops
carry too. Broadcasting is explicit, so elementwise binary ops
require identical operand and result types. Composite ops (softmax, norms, linear,
attention, argmax) are kept whole until `decompose` lowers them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    I64,
    AnyFloat,
    BoolAttr,
    DenseArrayBase,
    DenseIntOrFPElementsAttr,
    Float32Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    StringAttr,
    TensorType,
    bf16,
    f8E4M3FN,
    f8E5M2,
    f16,
    f32,
    i32,
    i64,
)
from xdsl.ir import Attribute, BlockArgument, Dialect, OpResult, SSAValue
from xdsl.irdl import (
    AnyAttr,
    AttrSizedOperandSegments,
    IRDLOperation,
    ParamAttrConstraint,
    ParsePropInAttrDict,
    VarConstraint,
    base,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    prop_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.traits import ConstantLike, Pure
from xdsl.utils.exceptions import VerifyException

import tinyopt.dialects.hex_floats  # noqa: F401  (hex float elements read as bits, as printed)

FLOAT_TYPES: tuple[AnyFloat, ...] = (f32, f16, bf16)
"""Element types graph tensors may carry."""
FP8_TYPES: tuple[AnyFloat, ...] = (f8E4M3FN, f8E5M2)
"""8-bit float storage: what `graph.cast` converts to and from a float type and the ops that
only move elements carry; arithmetic takes them after a cast (as torch's float8 tensors)."""
FP8_SCALE_BLOCK = 128
"""Elements of K (and of rows or columns, 128×128) one FP8 block scale covers (torch's
`_scaled_mm` `BlockWise1x128` / `BlockWise128x128`): one FP8 wgmma K step."""
ID_TYPES: tuple[IntegerType, ...] = (i32, i64)
"""Element types of the ids `graph.gather` reads."""
BOOL = IntegerType(1)
"""Element type of masks: the result of `graph.compare`, the condition of `graph.select`."""
DATA_TYPES: tuple[Attribute, ...] = (*FLOAT_TYPES, *FP8_TYPES, BOOL, *ID_TYPES)
"""Element types that ops which only move elements (reshape, slice, ...) may carry."""

MAX_EXTENT = 2**63 - 1
"""The largest dimension of a graph tensor: loop bounds are i64. (A tensor of more elements
than that is refused by `tile`, which names the kernel.)"""

_FALSE = BoolAttr.from_bool(False)


def _fmt_shape(shape: Sequence[int]) -> str:
    """`4x8`, `?x8` for a dynamic dim (xDSL holds it as the lowest i64), `scalar` for rank 0."""
    return "x".join(str(d) if d >= 0 else "?" for d in shape) if shape else "scalar"


def reduced_shape(shape: Sequence[int], dims: Sequence[int], keepdim: bool) -> tuple[int, ...]:
    """Return the shape left after reducing `dims` of `shape` (kept as 1s when `keepdim`)."""
    if keepdim:
        return tuple(1 if i in dims else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in dims)


def matmul_shape(lhs: Sequence[int], rhs: Sequence[int]) -> tuple[int, ...]:
    """Return the result shape of `[..B, M, K] x [..B, K, N]` (operands assumed valid)."""
    return (*lhs[:-1], rhs[-1])


class GraphOp(IRDLOperation):
    """Base of all graph ops: pure, with helpers that raise well-worded verify errors."""

    traits = traits_def(Pure())
    ELEMENT_TYPES: ClassVar[tuple[Attribute, ...]] = FLOAT_TYPES
    """What `tensor` accepts: floats, unless the op only moves elements."""

    def verify(self, verify_nested_ops: bool = True) -> None:
        """Check that each operand is defined before this op, then verify the op.

        xDSL does not check dominance, and passes walking the graph would loop forever or
        fail on a cycle such as `%a = graph.add %a, %x`."""
        for i, operand in enumerate(self.operands):
            block = self.parent
            if block is None or not isinstance(operand, OpResult) or operand.op.parent is not block:
                continue
            op = operand.op.next_op
            while op is not None and op is not self:
                op = op.next_op
            if op is None:
                name = f"%{operand.name_hint}" if operand.name_hint else f"operand {i}"
                raise self.fail(f"{name} is used before it is defined")
        super().verify(verify_nested_ops)

    def fail(self, message: str) -> VerifyException:
        """Build a VerifyException prefixed with the op name (callers `raise` it)."""
        return VerifyException(f"{self.name}: {message}")

    def tensor(self, what: str, value: SSAValue | Attribute) -> TensorType[AnyFloat]:
        """Check that `value` (or a type) is a non-empty float tensor; return its type."""
        type_ = value.type if isinstance(value, SSAValue) else value
        if not isinstance(type_, TensorType):
            raise self.fail(f"{what} must be a ranked tensor, got {type_}")
        if type_.element_type not in self.ELEMENT_TYPES:
            *rest, last = map(str, self.ELEMENT_TYPES)
            raise self.fail(
                f"{what} element type must be {', '.join(rest)} or {last}, got {type_.element_type}"
            )
        if any(d < 0 for d in type_.get_shape()):
            raise self.fail(
                f"{what} type {type_} has a dynamic dimension (graph tensors have static shapes)"
            )
        if 0 in type_.get_shape():
            raise self.fail(
                f"{what} shape {_fmt_shape(type_.get_shape())} has a dimension of size 0 "
                "(empty tensors are not supported)"
            )
        if max(type_.get_shape(), default=0) > MAX_EXTENT:
            raise self.fail(
                f"{what} shape {_fmt_shape(type_.get_shape())} has a dimension larger than "
                "2^63 - 1 (loop bounds are 64-bit)"
            )
        return type_  # pyright: ignore[reportUnknownVariableType]

    def operand_and_result(self) -> tuple[TensorType, TensorType]:
        """Returns the tensor types of `x` and `result` after checking they share a dtype."""
        src = self.tensor("operand", self.x)  # pyright: ignore[reportAttributeAccessIssue]
        dst = self.tensor("result", self.result)  # pyright: ignore[reportAttributeAccessIssue]
        self.same_dtype(("operand", src), ("result", dst))
        return src, dst

    def same_dtype(self, *named: tuple[str, TensorType[AnyFloat]]) -> None:
        """Check that all the named tensor types share one element type."""
        first_name, first = named[0]
        for name, type_ in named[1:]:
            if type_.element_type != first.element_type:
                raise self.fail(
                    f"element types differ: {first_name} is {first.element_type}, "
                    f"{name} is {type_.element_type}"
                )

    def expect_shape(self, what: str, type_: TensorType[AnyFloat], shape: Sequence[int]) -> None:
        """Check that `type_` has exactly `shape`."""
        if type_.get_shape() != tuple(shape):
            raise self.fail(
                f"{what} shape must be {_fmt_shape(shape)}, got {_fmt_shape(type_.get_shape())}"
            )

    def check_dim(self, what: str, dim: int, rank: int) -> None:
        """Check that `dim` indexes a tensor of rank `rank` (negative dims are not allowed)."""
        if not 0 <= dim < rank:
            raise self.fail(f"{what} {dim} is out of range for rank {rank}")


class UnaryOp(GraphOp):
    """Elementwise op `x -> y` where y has exactly x's type."""

    T: ClassVar = VarConstraint("T", base(TensorType))
    x = operand_def(T)
    result = result_def(T)

    assembly_format = "$x attr-dict `:` type($result)"

    def __init__(self, x: SSAValue):
        super().__init__(operands=[x], result_types=[x.type])

    def verify_(self) -> None:
        self.tensor("operand", self.x)


@irdl_op_definition
class NegOp(UnaryOp):
    name = "graph.neg"


@irdl_op_definition
class AbsOp(UnaryOp):
    name = "graph.abs"


@irdl_op_definition
class ExpOp(UnaryOp):
    name = "graph.exp"


@irdl_op_definition
class LogOp(UnaryOp):
    name = "graph.log"


@irdl_op_definition
class SqrtOp(UnaryOp):
    name = "graph.sqrt"


@irdl_op_definition
class RsqrtOp(UnaryOp):
    name = "graph.rsqrt"


@irdl_op_definition
class ReciprocalOp(UnaryOp):
    name = "graph.reciprocal"


@irdl_op_definition
class TanhOp(UnaryOp):
    name = "graph.tanh"


@irdl_op_definition
class SigmoidOp(UnaryOp):
    """Elementwise 1/(1+exp(-x))."""

    name = "graph.sigmoid"


@irdl_op_definition
class ReluOp(UnaryOp):
    name = "graph.relu"


@irdl_op_definition
class GeluOp(UnaryOp):
    """Elementwise exact GELU: x * (1 + erf(x / sqrt(2))) / 2."""

    name = "graph.gelu"


@irdl_op_definition
class GeluTanhOp(UnaryOp):
    """Elementwise GELU, tanh form: x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) / 2, as
    torch's `gelu(approximate="tanh")` (GPT-2's), computed in f32 and rounded once."""

    name = "graph.gelu_tanh"


@irdl_op_definition
class CosOp(UnaryOp):
    name = "graph.cos"


@irdl_op_definition
class SinOp(UnaryOp):
    name = "graph.sin"


@irdl_op_definition
class ErfOp(UnaryOp):
    """Elementwise error function."""

    name = "graph.erf"


@irdl_op_definition
class Log1pOp(UnaryOp):
    """Elementwise log(1 + x), exact near 0 where log of 1 + x is not."""

    name = "graph.log1p"


@irdl_op_definition
class Expm1Op(UnaryOp):
    """Elementwise exp(x) - 1, exact near 0 where exp(x) - 1 is not."""

    name = "graph.expm1"


@irdl_op_definition
class FloorOp(UnaryOp):
    """Elementwise largest integer not above x (±inf, NaN and ±0 unchanged)."""

    name = "graph.floor"


@irdl_op_definition
class CeilOp(UnaryOp):
    """Elementwise smallest integer not below x (-0.5 gives -0.0)."""

    name = "graph.ceil"


@irdl_op_definition
class RoundOp(UnaryOp):
    """Elementwise nearest integer, halves to the even one (2.5 gives 2, -0.5 gives -0.0), as
    torch.round and numpy.rint."""

    name = "graph.round"


@irdl_op_definition
class TruncOp(UnaryOp):
    """Elementwise x rounded toward zero to an integer (-1.5 gives -1)."""

    name = "graph.trunc"


@irdl_op_definition
class SiluOp(UnaryOp):
    """Elementwise x * sigmoid(x)."""

    name = "graph.silu"


@irdl_op_definition
class CastOp(GraphOp):
    """Convert a tensor to another element type, keeping its shape.

    Floats convert to floats (8-bit floats, `FP8_TYPES`, to and from f32, f16 and bf16, rounded
    as torch rounds: tinyopt.backends.fp8); an integer input (i32, i64) or a mask (i1) converts
    to a float (a mask to 0 or 1), a float to a mask (`x != 0`, NaN is true, as in torch), and
    a float to an integer by truncation (the frontend returns computed integers, exact in f32,
    this way).
    """

    name = "graph.cast"
    ELEMENT_TYPES: ClassVar = DATA_TYPES
    x = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = "$x attr-dict `:` type($x) `->` type($result)"

    def __init__(self, x: SSAValue, element_type: Attribute):
        assert isinstance(x.type, TensorType)
        super().__init__(operands=[x], result_types=[TensorType(element_type, x.type.get_shape())])

    def verify_(self) -> None:
        src = self.tensor("operand", self.x)
        dst = self.tensor("result", self.result)
        if src.get_shape() != dst.get_shape():
            raise self.fail(
                f"shapes differ: operand is {_fmt_shape(src.get_shape())}, "
                f"result is {_fmt_shape(dst.get_shape())}"
            )
        if src.element_type == dst.element_type:
            raise self.fail(f"operand and result are both {src.element_type}; cast must convert")
        if (dst.element_type in ID_TYPES or dst.element_type == BOOL) and (
            src.element_type not in FLOAT_TYPES
        ):
            raise self.fail(f"cannot convert {src.element_type} to {dst.element_type}")
        if FP8_TYPES.count(src.element_type) + FP8_TYPES.count(dst.element_type) and not (
            {src.element_type, dst.element_type} & set(FLOAT_TYPES)
        ):
            raise self.fail(
                f"cannot convert {src.element_type} to {dst.element_type} (8-bit floats convert "
                "to and from f32, f16 and bf16)"
            )


class BinaryOp(GraphOp):
    """Elementwise op `(lhs, rhs) -> y`; all three share one type (broadcast explicitly)."""

    T: ClassVar = VarConstraint("T", base(TensorType))
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(T)

    assembly_format = "$lhs `,` $rhs attr-dict `:` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        super().__init__(operands=[lhs, rhs], result_types=[lhs.type])

    def verify_(self) -> None:
        self.tensor("operands", self.lhs)


@irdl_op_definition
class AddOp(BinaryOp):
    name = "graph.add"


@irdl_op_definition
class SubOp(BinaryOp):
    name = "graph.sub"


@irdl_op_definition
class MulOp(BinaryOp):
    name = "graph.mul"


@irdl_op_definition
class DivOp(BinaryOp):
    name = "graph.div"


@irdl_op_definition
class MaxOp(BinaryOp):
    name = "graph.max"


@irdl_op_definition
class MinOp(BinaryOp):
    name = "graph.min"


@irdl_op_definition
class PowOp(BinaryOp):
    name = "graph.pow"


@irdl_op_definition
class Atan2Op(BinaryOp):
    """Elementwise angle of the point (x, y) = (rhs, lhs) in [-pi, pi], as torch.atan2(y, x)
    and C's atan2: the quadrant from both signs, ±0 and ±inf arguments included (atan2(±0, -1)
    is ±pi, atan2(inf, inf) is pi/4)."""

    name = "graph.atan2"


@irdl_op_definition
class FmodOp(BinaryOp):
    """Elementwise C `fmod(lhs, rhs)` (torch.fmod): lhs − n·rhs with n = trunc(lhs / rhs),
    exact, with the sign of lhs; NaN where lhs is ±inf or rhs is ±0, lhs where rhs is ±inf."""

    name = "graph.fmod"


@irdl_op_definition
class RemainderOp(BinaryOp):
    """Elementwise torch.remainder(lhs, rhs) (Python's `%`): lhs − n·rhs with n =
    floor(lhs / rhs), with the sign of rhs. Computed as torch does: `m = fmod(lhs, rhs)`, then
    `m + rhs` (one rounding: remainder(-1e-30, 1) is 1) where m is not 0 and its sign differs
    from rhs's. A zero result keeps lhs's sign (numpy.remainder gives it rhs's), and
    remainder(-5, inf) is inf."""

    name = "graph.remainder"


@irdl_op_definition
class CopySignOp(BinaryOp):
    """Elementwise |lhs| with the sign bit of rhs (torch.copysign, C's copysign): −0.0 counts
    as negative, and so does a NaN whose sign bit is set."""

    name = "graph.copysign"


COMPARE_PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")
"""`graph.compare` predicates; all but `ne` are false when an operand is NaN (IEEE, as torch)."""


@irdl_op_definition
class CompareOp(GraphOp):
    """Elementwise comparison of two float tensors of one type, giving a mask (i1)."""

    name = "graph.compare"
    T: ClassVar = VarConstraint("T", base(TensorType))
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(TensorType)
    predicate = prop_def(StringAttr)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$lhs `,` $rhs attr-dict `:` type($lhs) `->` type($result)"

    def __init__(self, lhs: SSAValue, rhs: SSAValue, predicate: str):
        assert isinstance(lhs.type, TensorType)
        super().__init__(
            operands=[lhs, rhs],
            result_types=[TensorType(BOOL, lhs.type.get_shape())],
            properties={"predicate": StringAttr(predicate)},
        )

    def verify_(self) -> None:
        src = self.tensor("operands", self.lhs)
        if self.predicate.data not in COMPARE_PREDICATES:
            raise self.fail(
                f"predicate must be one of {', '.join(COMPARE_PREDICATES)}, "
                f"got {self.predicate.data!r}"
            )
        result = self.result.type
        if not isinstance(result, TensorType) or result != TensorType(BOOL, src.get_shape()):
            raise self.fail(f"result must be {TensorType(BOOL, src.get_shape())}, got {result}")


@irdl_op_definition
class SelectOp(GraphOp):
    """Elementwise `cond ? lhs : rhs` (torch.where): an i1 mask of the result's shape picks
    between two float tensors of one type."""

    name = "graph.select"
    T: ClassVar = VarConstraint("T", base(TensorType))
    cond = operand_def(TensorType)
    lhs = operand_def(T)
    rhs = operand_def(T)
    result = result_def(T)

    assembly_format = "$cond `,` $lhs `,` $rhs attr-dict `:` type($cond) `,` type($result)"

    def __init__(self, cond: SSAValue, lhs: SSAValue, rhs: SSAValue):
        super().__init__(operands=[cond, lhs, rhs], result_types=[lhs.type])

    def verify_(self) -> None:
        dst = self.tensor("operands", self.lhs)
        cond = self.cond.type
        if cond != TensorType(BOOL, dst.get_shape()):
            raise self.fail(f"cond must be {TensorType(BOOL, dst.get_shape())}, got {cond}")


@irdl_op_definition
class IotaOp(GraphOp):
    """A tensor whose every element is its own index along `dim` (torch.arange, the row and
    column numbers of a causal mask). It has no operands: `fuse` computes it from the index
    of the kernel that reads it, so it never occupies memory."""

    name = "graph.iota"
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr[I64])

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "attr-dict `:` type($result)"

    def __init__(self, type_: TensorType, dim: int):
        super().__init__(result_types=[type_], properties={"dim": IntegerAttr(dim, i64)})

    def verify_(self) -> None:
        dst = self.tensor("result", self.result)
        self.check_dim("dim", self.dim.value.data, dst.get_num_dims())


class ReduceOp(GraphOp):
    """Reduction of `x` over `dims`; reduced dims are dropped, or kept as 1 with `keepdim`."""

    x = operand_def(TensorType)
    result = result_def(TensorType)
    dims = prop_def(DenseArrayBase.constr(i64))
    keepdim = prop_def(BoolAttr, default_value=_FALSE)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($x) `->` type($result)"

    def __init__(self, x: SSAValue, dims: Sequence[int], keepdim: bool = False):
        assert isinstance(x.type, TensorType)
        shape = reduced_shape(x.type.get_shape(), dims, keepdim)
        super().__init__(
            operands=[x],
            result_types=[TensorType(x.type.element_type, shape)],
            properties={
                "dims": DenseArrayBase.from_list(i64, dims),
                "keepdim": BoolAttr.from_bool(keepdim),
            },
        )

    @property
    def dim_list(self) -> tuple[int, ...]:
        """The reduced dimensions as Python ints."""
        return self.dims.get_values()

    def verify_(self) -> None:
        src, dst = self.operand_and_result()
        dims = self.dim_list
        if not dims:
            raise self.fail("dims must not be empty")
        for d in dims:
            self.check_dim("reduced dim", d, src.get_num_dims())
        if len(set(dims)) != len(dims):
            raise self.fail(f"dims contain duplicates: {list(dims)}")
        shape = reduced_shape(src.get_shape(), dims, bool(self.keepdim.value.data))
        self.expect_shape("result", dst, shape)


@irdl_op_definition
class ReduceSumOp(ReduceOp):
    name = "graph.reduce_sum"


@irdl_op_definition
class ReduceProdOp(ReduceOp):
    name = "graph.reduce_prod"


@irdl_op_definition
class ReduceMaxOp(ReduceOp):
    name = "graph.reduce_max"


@irdl_op_definition
class ReduceMinOp(ReduceOp):
    name = "graph.reduce_min"


@irdl_op_definition
class ReduceMeanOp(ReduceOp):
    name = "graph.reduce_mean"


ARGMAX_EXTENT = 2**24
"""The largest dim `graph.argmax` reduces: `decompose` computes the index in f32, whose
integers are exact up to 2^24."""


@irdl_op_definition
class ArgmaxOp(GraphOp):
    """The index of the largest element of float `x` along `dim`, as torch.argmax: the first
    one on a tie, and NaN counts as the largest (the first NaN wins). The result is an i32 or
    i64 tensor (its type says which) of x's shape without `dim`, or with size 1 there with
    `keepdim`. A composite: `decompose` lowers it to compares, selects, an iota and two
    reductions computing the index in f32, so `dim` holds at most 2^24 elements."""

    name = "graph.argmax"
    x = operand_def(TensorType)
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    keepdim = prop_def(BoolAttr, default_value=_FALSE)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($x) `->` type($result)"

    def __init__(self, x: SSAValue, dim: int, keepdim: bool = False, index_type: Attribute = i64):
        assert isinstance(x.type, TensorType)
        shape = reduced_shape(x.type.get_shape(), [dim], keepdim)
        super().__init__(
            operands=[x],
            result_types=[TensorType(index_type, shape)],
            properties={"dim": IntegerAttr(dim, i64), "keepdim": BoolAttr.from_bool(keepdim)},
        )

    def verify_(self) -> None:
        src = self.tensor("operand", self.x)
        dst = self.result.type
        if not isinstance(dst, TensorType) or dst.element_type not in ID_TYPES:
            raise self.fail(f"result must be a tensor of i32 or i64 (the indices), got {dst}")
        dim = self.dim.value.data
        self.check_dim("dim", dim, src.get_num_dims())
        extent = src.get_shape()[dim]
        if extent > ARGMAX_EXTENT:
            raise self.fail(
                f"dim {dim} has {extent} elements, more than 2^24: the index is computed in "
                "f32, exact only up to 2^24"
            )
        shape = reduced_shape(src.get_shape(), [dim], bool(self.keepdim.value.data))
        self.expect_shape("result", dst, shape)


@irdl_op_definition
class MatmulOp(GraphOp):
    """Matrix product `[..B, M, K] x [..B, K, N] -> [..B, M, N]`: one rank, batch dims equal."""

    name = "graph.matmul"
    lhs = operand_def(TensorType)
    rhs = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = (
        "$lhs `,` $rhs attr-dict `:` `(` type($lhs) `,` type($rhs) `)` `->` type($result)"
    )

    def __init__(self, lhs: SSAValue, rhs: SSAValue):
        assert isinstance(lhs.type, TensorType) and isinstance(rhs.type, TensorType)
        shape = matmul_shape(lhs.type.get_shape(), rhs.type.get_shape())
        super().__init__(
            operands=[lhs, rhs], result_types=[TensorType(lhs.type.element_type, shape)]
        )

    def verify_(self) -> None:
        lhs = self.tensor("lhs", self.lhs)
        rhs = self.tensor("rhs", self.rhs)
        dst = self.tensor("result", self.result)
        self.same_dtype(("lhs", lhs), ("rhs", rhs), ("result", dst))
        lrank, rrank = lhs.get_num_dims(), rhs.get_num_dims()
        if lrank != rrank or lrank < 2:
            raise self.fail(
                "operands must have the same rank, at least 2 (no broadcasting: broadcast the "
                f"other operand first), got lhs rank {lrank}, rhs rank {rrank}"
            )
        ls, rs = lhs.get_shape(), rhs.get_shape()
        if ls[:-2] != rs[:-2]:
            batch = ("x".join(map(str, s[:-2])) for s in (ls, rs))
            raise self.fail("batch dims differ: lhs has B={}, rhs has B={}".format(*batch))
        if ls[-1] != rs[-2]:
            raise self.fail(f"contraction dims differ: lhs has K={ls[-1]}, rhs has K={rs[-2]}")
        self.expect_shape("result", dst, matmul_shape(ls, rs))


@irdl_op_definition
class TransposeOp(GraphOp):
    """Permute dimensions: result dim i is operand dim perm[i]."""

    ELEMENT_TYPES: ClassVar = DATA_TYPES

    name = "graph.transpose"
    x = operand_def(TensorType)
    result = result_def(TensorType)
    perm = prop_def(DenseArrayBase.constr(i64))

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($x) `->` type($result)"

    def __init__(self, x: SSAValue, perm: Sequence[int]):
        assert isinstance(x.type, TensorType)
        shape = [x.type.get_shape()[p] for p in perm]
        super().__init__(
            operands=[x],
            result_types=[TensorType(x.type.element_type, shape)],
            properties={"perm": DenseArrayBase.from_list(i64, perm)},
        )

    @property
    def perm_list(self) -> tuple[int, ...]:
        """The permutation as Python ints."""
        return self.perm.get_values()

    def verify_(self) -> None:
        src, dst = self.operand_and_result()
        perm = self.perm_list
        if sorted(perm) != list(range(src.get_num_dims())):
            raise self.fail(
                f"perm {list(perm)} is not a permutation of 0..{src.get_num_dims() - 1}"
            )
        self.expect_shape("result", dst, [src.get_shape()[p] for p in perm])


class ShapeChangeOp(GraphOp):
    """Base of ops giving one tensor a new shape (the result type's), keeping its dtype."""

    ELEMENT_TYPES: ClassVar = DATA_TYPES

    x = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = "$x attr-dict `:` type($x) `->` type($result)"

    def __init__(self, x: SSAValue, shape: Sequence[int]):
        assert isinstance(x.type, TensorType)
        super().__init__(operands=[x], result_types=[TensorType(x.type.element_type, shape)])


@irdl_op_definition
class ReshapeOp(ShapeChangeOp):
    """Reinterpret a tensor (row-major) with the result type's shape."""

    name = "graph.reshape"

    def verify_(self) -> None:
        src, dst = self.operand_and_result()
        if src.element_count() != dst.element_count():
            raise self.fail(
                f"element counts differ: operand has {src.element_count()}, "
                f"result has {dst.element_count()}"
            )


@irdl_op_definition
class BroadcastOp(ShapeChangeOp):
    """Broadcast with numpy rules (right-aligned; each operand dim equal or 1)."""

    name = "graph.broadcast"

    def verify_(self) -> None:
        src, dst = self.operand_and_result()
        ss, ds = src.get_shape(), dst.get_shape()
        if len(ss) > len(ds):
            raise self.fail(f"operand rank {len(ss)} exceeds result rank {len(ds)}")
        for i, s in enumerate(ss):
            d = ds[len(ds) - len(ss) + i]
            if s not in (1, d):
                raise self.fail(
                    f"operand dim {i} has size {s}, which cannot broadcast to {d} "
                    f"({_fmt_shape(ss)} -> {_fmt_shape(ds)})"
                )


@irdl_op_definition
class SliceOp(GraphOp):
    """Take every `step`-th index of dim `dim` from `start` on; the result type gives how many."""

    name = "graph.slice"
    ELEMENT_TYPES: ClassVar = DATA_TYPES
    x = operand_def(TensorType)
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr[I64])
    start = prop_def(IntegerAttr[I64])
    step = prop_def(IntegerAttr[I64])

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($x) `->` type($result)"

    def __init__(self, x: SSAValue, dim: int, start: int, size: int, step: int = 1):
        assert isinstance(x.type, TensorType)
        shape = list(x.type.get_shape())
        shape[dim] = size
        super().__init__(
            operands=[x],
            result_types=[TensorType(x.type.element_type, shape)],
            properties={
                "dim": IntegerAttr(dim, i64),
                "start": IntegerAttr(start, i64),
                "step": IntegerAttr(step, i64),
            },
        )

    def verify_(self) -> None:
        src, dst = self.operand_and_result()
        dim, start, step = (a.value.data for a in (self.dim, self.start, self.step))
        self.check_dim("dim", dim, src.get_num_dims())
        if step < 1:
            raise self.fail(f"step must be at least 1, got {step}")
        if dst.get_num_dims() != src.get_num_dims():
            raise self.fail(
                f"result rank must be the operand's, {src.get_num_dims()}, got "
                f"{dst.get_num_dims()} (a slice keeps dim {dim}; reshape to drop it)"
            )
        size = dst.get_shape()[dim]
        shape = list(src.get_shape())
        shape[dim] = size
        self.expect_shape("result", dst, shape)
        if size < 1 or start < 0 or start + (size - 1) * step >= src.get_shape()[dim]:
            raise self.fail(
                f"{size} indices from {start} by {step} do not fit in dim {dim} of size "
                f"{src.get_shape()[dim]}"
            )


@irdl_op_definition
class ConcatOp(GraphOp):
    """Concatenate tensors along `dim`; all other dims and the dtype must agree."""

    name = "graph.concat"
    ELEMENT_TYPES: ClassVar = DATA_TYPES
    inputs = var_operand_def(TensorType)
    result = result_def(TensorType)
    dim = prop_def(IntegerAttr[I64])

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$inputs attr-dict `:` `(` type($inputs) `)` `->` type($result)"

    def __init__(self, inputs: Sequence[SSAValue], dim: int):
        types = [x.type for x in inputs]
        assert all(isinstance(t, TensorType) for t in types)
        shape = list(types[0].get_shape())  # pyright: ignore[reportAttributeAccessIssue]
        shape[dim] = sum(t.get_shape()[dim] for t in types)  # pyright: ignore
        element_type = types[0].element_type  # pyright: ignore[reportAttributeAccessIssue]
        super().__init__(
            operands=[list(inputs)],
            result_types=[TensorType(element_type, shape)],
            properties={"dim": IntegerAttr(dim, i64)},
        )

    def verify_(self) -> None:
        if not self.inputs:
            raise self.fail("needs at least one operand")
        named = [
            (f"operand {i}", self.tensor(f"operand {i}", x)) for i, x in enumerate(self.inputs)
        ]
        dst = self.tensor("result", self.result)
        self.same_dtype(*named, ("result", dst))
        dim = self.dim.value.data
        first = named[0][1]
        self.check_dim("dim", dim, first.get_num_dims())
        outside = [d for i, d in enumerate(first.get_shape()) if i != dim]
        for name, type_ in named[1:]:
            if type_.get_num_dims() != first.get_num_dims():
                raise self.fail(
                    f"{name} has rank {type_.get_num_dims()}, operand 0 has rank "
                    f"{first.get_num_dims()}"
                )
            if [d for i, d in enumerate(type_.get_shape()) if i != dim] != outside:
                raise self.fail(
                    f"{name} shape {_fmt_shape(type_.get_shape())} differs from operand 0 "
                    f"({_fmt_shape(first.get_shape())}) outside dim {dim}"
                )
        shape = list(first.get_shape())
        shape[dim] = sum(type_.get_shape()[dim] for _, type_ in named)
        self.expect_shape("result", dst, shape)


@irdl_op_definition
class GatherOp(GraphOp):
    """Rows of `table` picked by integer `ids`, clamped into the table (docs/ir.md); kernels
    with 32-bit indices truncate ids of 2^31 and more before clamping."""

    name = "graph.gather"
    table = operand_def(TensorType)
    ids = operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = (
        "$table `,` $ids attr-dict `:` `(` type($table) `,` type($ids) `)` `->` type($result)"
    )

    def __init__(self, table: SSAValue, ids: SSAValue):
        assert isinstance(table.type, TensorType) and isinstance(ids.type, TensorType)
        shape = (*ids.type.get_shape(), *table.type.get_shape()[1:])
        super().__init__(
            operands=[table, ids], result_types=[TensorType(table.type.element_type, shape)]
        )

    def verify_(self) -> None:
        table = self.tensor("table", self.table)
        dst = self.tensor("result", self.result)
        self.same_dtype(("table", table), ("result", dst))
        ids = self.ids.type
        if not isinstance(ids, TensorType) or ids.element_type not in ID_TYPES:
            raise self.fail(f"ids must be a ranked tensor of i32 or i64, got {ids}")
        if table.get_num_dims() < 1:
            raise self.fail("table must have rank at least 1")
        self.expect_shape("result", dst, (*ids.get_shape(), *table.get_shape()[1:]))


class DynamicOffsetOp(GraphOp):
    """Base of the ops that place a window along `dim` at a runtime offset: a 0-d i32/i64
    function argument (a runtime scalar, docs/ir.md), in `0 ..= extent - window` (checked on
    the host value before anything runs, never clamped)."""

    ELEMENT_TYPES: ClassVar = DATA_TYPES
    dim = prop_def(IntegerAttr[I64])

    @property
    def offset_value(self) -> SSAValue:
        """The runtime scalar giving the window's first index."""
        raise NotImplementedError

    def window(self) -> tuple[int, int]:
        """The (window, extent) sizes along `dim`: the offset lies in 0 ..= extent − window."""
        raise NotImplementedError

    def offset_bounds(self) -> tuple[int, int]:
        """The smallest and largest offset this op accepts."""
        window, extent = self.window()
        return 0, extent - window

    def offset_role(self) -> str:
        """Says what the offset places, for diagnostics naming the bound."""
        window, extent = self.window()
        dim = self.dim.value.data
        return f"the offset of {self.name} ({window} of the {extent} indices of dim {dim})"

    def check_window(self, window: int, extent: int) -> None:
        """Check that a window of `window` indices fits in `dim`'s `extent`."""
        if window > extent:
            raise self.fail(
                f"a window of {window} indices does not fit in dim {self.dim.value.data} of "
                f"size {extent}"
            )

    def check_offset(self) -> None:
        """Check that the offset is a 0-d integer function argument."""
        offset = self.offset_value
        type_ = offset.type
        if not (
            isinstance(type_, TensorType)
            and type_.get_num_dims() == 0
            and type_.element_type in ID_TYPES
        ):
            raise self.fail(f"offset must be a 0-d tensor of i32 or i64, got {type_}")
        if not isinstance(offset, BlockArgument):
            raise self.fail(
                "offset must be a function argument (a runtime scalar), not a value computed "
                "in the graph"
            )


@irdl_op_definition
class DynamicSliceOp(DynamicOffsetOp):
    """`x` with dim `dim` holding the indices `offset ..< offset + n` (n from the result type),
    `offset` a runtime scalar: the rows of a RoPE table at a step's positions."""

    name = "graph.dynamic_slice"
    x = operand_def(TensorType)
    offset = operand_def(TensorType)
    result = result_def(TensorType)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$x `[` $offset `]` attr-dict `:` `(` type($x) `,` type($offset) `)` `->` type($result)"
    )

    def __init__(self, x: SSAValue, offset: SSAValue, dim: int, size: int):
        assert isinstance(x.type, TensorType)
        shape = list(x.type.get_shape())
        shape[dim] = size
        super().__init__(
            operands=[x, offset],
            result_types=[TensorType(x.type.element_type, shape)],
            properties={"dim": IntegerAttr(dim, i64)},
        )

    @property
    def offset_value(self) -> SSAValue:
        return self.offset

    def window(self) -> tuple[int, int]:
        dim = self.dim.value.data
        return shape_dim(self.result, dim), shape_dim(self.x, dim)

    def verify_(self) -> None:
        src, dst = self.operand_and_result()
        dim = self.dim.value.data
        self.check_dim("dim", dim, src.get_num_dims())
        self.check_offset()
        shape = list(src.get_shape())
        if dst.get_num_dims() == len(shape):
            self.check_window(dst.get_shape()[dim], shape[dim])
            shape[dim] = dst.get_shape()[dim]
        self.expect_shape("result", dst, shape)


@irdl_op_definition
class DynamicUpdateSliceOp(DynamicOffsetOp):
    """`x` with the indices `offset ..< offset + n` of dim `dim` replaced by `update` (n its
    size there), `offset` a runtime scalar: a step's keys written into a KV cache. `fuse`
    writes it in place into `x`, which must be a function argument read by nothing else, and
    the function must return the result (the aliasing rule, docs/ir.md)."""

    name = "graph.dynamic_update_slice"
    x = operand_def(TensorType)
    update = operand_def(TensorType)
    offset = operand_def(TensorType)
    result = result_def(TensorType)

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = (
        "$x `[` $offset `]` `,` $update attr-dict `:` "
        "`(` type($x) `,` type($offset) `,` type($update) `)` `->` type($result)"
    )

    def __init__(self, x: SSAValue, update: SSAValue, offset: SSAValue, dim: int):
        super().__init__(
            operands=[x, update, offset],
            result_types=[x.type],
            properties={"dim": IntegerAttr(dim, i64)},
        )

    @property
    def offset_value(self) -> SSAValue:
        return self.offset

    def window(self) -> tuple[int, int]:
        dim = self.dim.value.data
        return shape_dim(self.update, dim), shape_dim(self.x, dim)

    def verify_(self) -> None:
        src, dst = self.operand_and_result()
        update = self.tensor("update", self.update)
        self.same_dtype(("operand", src), ("update", update))
        dim = self.dim.value.data
        self.check_dim("dim", dim, src.get_num_dims())
        self.check_offset()
        self.expect_shape("result", dst, src.get_shape())
        shape = list(src.get_shape())
        if update.get_num_dims() == len(shape):
            self.check_window(update.get_shape()[dim], shape[dim])
            shape[dim] = update.get_shape()[dim]
        self.expect_shape("update", update, shape)


def shape_dim(value: SSAValue, dim: int) -> int:
    """The extent of dim `dim` of a tensor value."""
    assert isinstance(value.type, TensorType)
    return value.type.get_shape()[dim]


def is_splat(value: DenseIntOrFPElementsAttr) -> bool:
    """Whether every element of a dense attribute is the same: its bytes compared, not its
    unpacked values (xDSL's `is_splat` unpacks every element)."""
    data = value.data.data
    return data == data[: _element_bytes(value)] * len(value)


def first_value(value: DenseIntOrFPElementsAttr) -> float:
    """The first element of a dense attribute, without unpacking the others."""
    element = value.get_element_type()
    kind = IntegerAttr if isinstance(element, IntegerType | IndexType) else FloatAttr
    return kind.unpack(element, value.data.data[: _element_bytes(value)], 1)[0].value.data  # type: ignore


def _element_bytes(value: DenseIntOrFPElementsAttr) -> int:
    return len(value.data.data) // max(len(value), 1)


@irdl_op_definition
class ConstantOp(GraphOp):
    """A constant tensor given by a dense (possibly splat) value."""

    name = "graph.constant"
    T: ClassVar = VarConstraint("T", AnyAttr())
    value = prop_def(ParamAttrConstraint(DenseIntOrFPElementsAttr, (T, AnyAttr())))
    result = result_def(T)

    traits = traits_def(Pure(), ConstantLike())
    assembly_format = "attr-dict $value"

    def __init__(self, value: DenseIntOrFPElementsAttr):
        super().__init__(result_types=[value.type], properties={"value": value})

    @staticmethod
    def splat(value: float, type_: TensorType[AnyFloat]) -> ConstantOp:
        """Build a constant of type `type_` with every element equal to `value`."""
        return ConstantOp(DenseIntOrFPElementsAttr.from_list(type_, [value]))

    @staticmethod
    def scalar(value: float, like: TensorType[AnyFloat]) -> ConstantOp:
        """Build `value` as a one-element constant of `like`'s rank and element type, to be
        broadcast to `like`: xDSL stores every element of a dense attribute, so a splat of
        an activation's shape holds one copy per element."""
        one = TensorType(like.element_type, [1] * like.get_num_dims())
        return ConstantOp.splat(value, one)

    def verify_(self) -> None:
        self.tensor("value", self.result)


@irdl_op_definition
class SoftmaxOp(GraphOp):
    """Softmax along `dim`."""

    name = "graph.softmax"
    T: ClassVar = VarConstraint("T", base(TensorType))
    x = operand_def(T)
    result = result_def(T)
    dim = prop_def(IntegerAttr[I64])

    irdl_options = (ParsePropInAttrDict(),)
    assembly_format = "$x attr-dict `:` type($result)"

    def __init__(self, x: SSAValue, dim: int):
        super().__init__(
            operands=[x], result_types=[x.type], properties={"dim": IntegerAttr(dim, i64)}
        )

    def verify_(self) -> None:
        src = self.tensor("operand", self.x)
        self.check_dim("dim", self.dim.value.data, src.get_num_dims())


F16_TINY = 2.0**-14
"""f16's smallest normal number: an eps below it f16 holds with fewer bits, or as 0."""


def norm_in_f32(element: Attribute, eps: float) -> bool:
    """Whether a norm of `element` values with `eps` computes its statistics, eps and 1 / rms
    in f32 (its result rounded once to `element`), as torch does: f16 with an eps below its
    smallest normal number (1e-8 or BERT's 1e-12 are 0 in f16: a row of equal values gave
    NaN). bf16 holds any such eps to 2^-9 of itself, as f16 holds a normal one to 2^-11."""
    return element == f16 and eps < F16_TINY


class NormOp(GraphOp):
    """Normalization over the last dim with a per-channel weight (shared verifier)."""

    x = operand_def(TensorType)
    weight = operand_def(TensorType)
    result = result_def(TensorType)
    eps = prop_def(FloatAttr[Float32Type])

    irdl_options = (ParsePropInAttrDict(),)

    def verify_(self) -> None:
        x = self.tensor("x", self.x)
        dst = self.tensor("result", self.result)
        named = [("x", x), ("result", dst)]
        if x.get_num_dims() < 1:
            raise self.fail("x must have rank at least 1")
        if dst != x:
            raise self.fail(f"result type {dst} must equal x type {x}")
        for name, operand in self.channel_operands():
            type_ = self.tensor(name, operand)
            named.append((name, type_))
            self.expect_shape(name, type_, x.get_shape()[-1:])
        self.same_dtype(*named)

    def channel_operands(self) -> list[tuple[str, SSAValue]]:
        """The 1-D per-channel operands with their names."""
        return [("weight", self.weight)]


@irdl_op_definition
class RmsNormOp(NormOp):
    """RMS norm over the last dim: x / sqrt(mean(x^2) + eps) * weight."""

    name = "graph.rms_norm"

    assembly_format = (
        "$x `,` $weight attr-dict `:` `(` type($x) `,` type($weight) `)` `->` type($result)"
    )

    def __init__(self, x: SSAValue, weight: SSAValue, eps: float):
        super().__init__(
            operands=[x, weight],
            result_types=[x.type],
            properties={"eps": FloatAttr(eps, f32)},
        )


@irdl_op_definition
class LayerNormOp(NormOp):
    """Layer norm over the last dim (biased variance): (x - mean) / sqrt(var + eps) * w + b."""

    name = "graph.layer_norm"
    # Redeclared so the operand order is (x, weight, bias): IRDL lists a subclass's own
    # fields before inherited ones.
    x = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = operand_def(TensorType)

    assembly_format = (
        "$x `,` $weight `,` $bias attr-dict `:` "
        "`(` type($x) `,` type($weight) `,` type($bias) `)` `->` type($result)"
    )

    def __init__(self, x: SSAValue, weight: SSAValue, bias: SSAValue, eps: float):
        super().__init__(
            operands=[x, weight, bias],
            result_types=[x.type],
            properties={"eps": FloatAttr(eps, f32)},
        )

    def channel_operands(self) -> list[tuple[str, SSAValue]]:
        """The weight and bias operands with their names."""
        return [("weight", self.weight), ("bias", self.bias)]


@irdl_op_definition
class LinearOp(GraphOp):
    """Torch-style linear layer: `x [.., K]`, `weight [N, K]`, optional `bias [N]` -> `[.., N]`."""

    name = "graph.linear"
    x = operand_def(TensorType)
    weight = operand_def(TensorType)
    bias = opt_operand_def(TensorType)
    result = result_def(TensorType)

    assembly_format = (
        "$x `,` $weight (`,` $bias^)? attr-dict `:` "
        "`(` type($x) `,` type($weight) (`,` type($bias)^)? `)` `->` type($result)"
    )

    def __init__(self, x: SSAValue, weight: SSAValue, bias: SSAValue | None = None):
        assert isinstance(x.type, TensorType) and isinstance(weight.type, TensorType)
        shape = (*x.type.get_shape()[:-1], weight.type.get_shape()[0])
        super().__init__(
            operands=[x, weight, [] if bias is None else [bias]],
            result_types=[TensorType(x.type.element_type, shape)],
        )

    def verify_(self) -> None:
        x = self.tensor("x", self.x)
        w = self.tensor("weight", self.weight)
        dst = self.tensor("result", self.result)
        named = [("x", x), ("weight", w), ("result", dst)]
        if x.get_num_dims() < 1:
            raise self.fail("x must have rank at least 1")
        if w.get_num_dims() != 2:
            raise self.fail(f"weight must be rank 2 [N, K], got rank {w.get_num_dims()}")
        n, k = w.get_shape()
        if x.get_shape()[-1] != k:
            raise self.fail(
                f"contraction dims differ: x has K={x.get_shape()[-1]}, weight has K={k}"
            )
        if self.bias is not None:
            b = self.tensor("bias", self.bias)
            named.append(("bias", b))
            self.expect_shape("bias", b, [n])
        self.same_dtype(*named)
        self.expect_shape("result", dst, (*x.get_shape()[:-1], n))


@irdl_op_definition
class AttentionOp(GraphOp):
    """Scaled dot-product attention: `softmax(q·kᵀ·scale + mask)·v`.

    q is `[B, H, Sq, D]`; k `[B, KV, Skv, D]` and v `[B, KV, Skv, Dv]` with H a multiple of
    KV (grouped-query attention: query head h reads key/value head h // (H / KV), never
    repeated in memory); the result is `[B, H, Sq, Dv]`. The optional mask broadcasts to
    `[B, H, Sq, Skv]`: a float mask (q's element type) is added to the scores, a boolean one
    (i1) keeps the scores where it is true and masks them elsewhere, as torch's
    `scaled_dot_product_attention` reads it, except that a row it masks everywhere gives the
    mean of v over the row's keys (a masked score is finite and below every kept one, not −inf;
    torch gives 0, and the PyTorch frontend selects 0 there). A row whose every score a float
    mask makes −inf gives 0, as torch's. With `causal`, query i sees the keys j ≤ i + Skv −
    Sq: the diagonal is aligned to the end of the keys, so a chunk of Sq new queries sees the
    whole cache before it (decode, chunked prefill; Sq ≤ Skv). A key past that bound always
    weighs 0: a row whose visible keys a boolean mask masks all gives the mean of v over the
    visible keys.
    """

    name = "graph.attention"
    q = operand_def(TensorType)
    k = operand_def(TensorType)
    v = operand_def(TensorType)
    mask = opt_operand_def(TensorType)
    valid = opt_operand_def(TensorType)
    result = result_def(TensorType)
    scale = prop_def(FloatAttr[Float32Type])
    causal = prop_def(BoolAttr, default_value=_FALSE)

    irdl_options = (ParsePropInAttrDict(), AttrSizedOperandSegments(as_property=True))
    assembly_format = (
        "$q `,` $k `,` $v (`,` $mask^)? (`valid` `(` $valid^ `:` type($valid) `)`)? attr-dict "
        "`:` `(` type($q) `,` type($k) `,` type($v) (`,` type($mask)^)? `)` `->` type($result)"
    )

    def __init__(
        self,
        q: SSAValue,
        k: SSAValue,
        v: SSAValue,
        scale: float,
        causal: bool = False,
        mask: SSAValue | None = None,
        valid: SSAValue | None = None,
    ):
        assert isinstance(q.type, TensorType) and isinstance(v.type, TensorType)
        shape = (*q.type.get_shape()[:-1], v.type.get_shape()[-1])
        super().__init__(
            operands=[q, k, v, [] if mask is None else [mask], [] if valid is None else [valid]],
            result_types=[TensorType(q.type.element_type, shape)],
            properties={"scale": FloatAttr(scale, f32), "causal": BoolAttr.from_bool(causal)},
        )

    @property
    def groups(self) -> int:
        """Query heads per key/value head (1 without GQA)."""
        return self.q_shape[1] // self.k.type.get_shape()[1]  # type: ignore[attr-defined]

    @property
    def q_shape(self) -> tuple[int, ...]:
        return self.q.type.get_shape()  # type: ignore[attr-defined]

    def valid_bounds(self) -> tuple[int, int]:
        """The values the number of valid keys L may take: every query must see a key (with
        `causal`, query 0 sees the keys j ≤ L − Sq), and no key past the cache's."""
        sq, skv = self.q_shape[2], self.k.type.get_shape()[2]  # type: ignore[attr-defined]
        return (sq if self.causal.value.data else 1), skv

    def valid_role(self) -> str:
        """Says what L bounds, for diagnostics naming the bound."""
        sq, skv = self.q_shape[2], self.k.type.get_shape()[2]  # type: ignore[attr-defined]
        causal = ", causal" if self.causal.value.data else ""
        return f"the valid keys of {self.name} ({sq} queries, {skv} keys{causal})"

    def verify_(self) -> None:
        q, k, v = (self.tensor(n, x) for n, x in (("q", self.q), ("k", self.k), ("v", self.v)))
        dst = self.tensor("result", self.result)
        for what, t in (("q", q), ("k", k), ("v", v)):
            if t.get_num_dims() != 4:
                raise self.fail(f"{what} must be rank 4 [B, H, S, D], got rank {t.get_num_dims()}")
        if not q.element_type == k.element_type == v.element_type == dst.element_type:
            raise self.fail(
                f"q, k, v and the result must have one element type, got {q.element_type}, "
                f"{k.element_type}, {v.element_type} and {dst.element_type}"
            )
        (b, h, sq, d), (kb, kv, skv, kd) = q.get_shape(), k.get_shape()
        vb, vh, vs, dv = v.get_shape()
        if (kb, kd) != (b, d) or (vb, vh, vs) != (kb, kv, skv):
            raise self.fail(
                "k must be [B, KV, Skv, D] and v [B, KV, Skv, Dv] for q "
                f"{_fmt_shape(q.get_shape())}, got k {_fmt_shape(k.get_shape())} and v "
                f"{_fmt_shape(v.get_shape())}"
            )
        if h % kv:
            raise self.fail(f"query heads ({h}) must be a multiple of key/value heads ({kv})")
        if dst.get_shape() != (b, h, sq, dv):
            raise self.fail(
                f"result must be {_fmt_shape((b, h, sq, dv))}, got {_fmt_shape(dst.get_shape())}"
            )
        if self.valid is not None:
            valid = self.valid.type
            if not (
                isinstance(valid, TensorType)
                and valid.get_num_dims() == 0
                and valid.element_type in ID_TYPES
            ):
                raise self.fail(f"valid must be a 0-d tensor of i32 or i64, got {valid}")
            if not isinstance(self.valid, BlockArgument):
                raise self.fail(
                    "valid must be a function argument (a runtime scalar), not a value "
                    "computed in the graph"
                )
        if self.causal.value.data and sq > skv:
            raise self.fail(
                f"causal attention needs Sq <= Skv (query i sees keys j <= i + Skv - Sq; the "
                f"first {sq - skv} queries would see none), got Sq={sq}, Skv={skv}"
            )
        if self.mask is not None:
            mask = self.mask.type
            assert isinstance(mask, TensorType)
            if mask.element_type not in (q.element_type, BOOL):
                raise self.fail(
                    f"mask element type must be {q.element_type} (added to the scores) or i1 "
                    f"(true keeps a score), got {mask.element_type}"
                )
            full = (b, h, sq, skv)
            if mask.get_num_dims() != 4 or any(
                m not in (1, f) for m, f in zip(mask.get_shape(), full)
            ):
                raise self.fail(
                    f"mask {_fmt_shape(mask.get_shape())} must be rank 4 and broadcast to the "
                    f"scores {_fmt_shape(full)}"
                )


UNARY_OPS: tuple[type[UnaryOp], ...] = (
    NegOp,
    AbsOp,
    ExpOp,
    LogOp,
    SqrtOp,
    RsqrtOp,
    ReciprocalOp,
    TanhOp,
    SigmoidOp,
    ReluOp,
    GeluOp,
    GeluTanhOp,
    ErfOp,
    SiluOp,
    CosOp,
    SinOp,
    Log1pOp,
    Expm1Op,
    FloorOp,
    CeilOp,
    RoundOp,
    TruncOp,
)
BINARY_OPS: tuple[type[BinaryOp], ...] = (
    AddOp,
    SubOp,
    MulOp,
    DivOp,
    MaxOp,
    MinOp,
    PowOp,
    Atan2Op,
    FmodOp,
    RemainderOp,
    CopySignOp,
)
REDUCE_OPS: tuple[type[ReduceOp], ...] = (
    ReduceSumOp,
    ReduceProdOp,
    ReduceMaxOp,
    ReduceMinOp,
    ReduceMeanOp,
)
MASK_OPS: tuple[type[GraphOp], ...] = (CompareOp, SelectOp)
"""Elementwise ops that make or read masks."""
SHAPE_OPS: tuple[type[GraphOp], ...] = (TransposeOp, ReshapeOp, BroadcastOp)
DATA_MOVEMENT_OPS: tuple[type[GraphOp], ...] = (SliceOp, ConcatOp, GatherOp, DynamicSliceOp)
"""Ops that select elements (RoPE's halves, embedding rows, a table's rows at a runtime
position); `fuse` inlines them."""
OFFSET_OPS: tuple[type[DynamicOffsetOp], ...] = (DynamicSliceOp, DynamicUpdateSliceOp)
"""Ops that read a runtime scalar as an offset."""
COMPOSITE_OPS: tuple[type[GraphOp], ...] = (
    SoftmaxOp,
    RmsNormOp,
    LayerNormOp,
    LinearOp,
    AttentionOp,
    ArgmaxOp,
)

Graph = Dialect(
    "graph",
    [
        *UNARY_OPS,
        CastOp,
        *BINARY_OPS,
        *MASK_OPS,
        IotaOp,
        *REDUCE_OPS,
        MatmulOp,
        *SHAPE_OPS,
        *DATA_MOVEMENT_OPS,
        DynamicUpdateSliceOp,
        ConstantOp,
        *COMPOSITE_OPS,
    ],
    [],
)
