"""Numpy reference executor for `func.func`s of graph ops (composites included).

Numpy has no bfloat16: arrays for bf16 tensors are float32 arrays holding bf16-representable
values (see `round_to_bf16`), and likewise for the 8-bit floats (tinyopt.backends.fp8).
`random_inputs` follows that convention and `run_reference` accepts it. Integer tensors (the
ids of `graph.gather`) are int32/int64 arrays, masks (i1) bool arrays.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from xdsl.dialects.builtin import (
    AnyFloat,
    ModuleOp,
    TensorType,
    bf16,
    f8E4M3FN,
    f8E5M2,
    f16,
    f32,
    i32,
    i64,
)
from xdsl.dialects.func import FuncOp, ReturnOp
from xdsl.ir import Attribute, Operation, SSAValue

from tinyopt.backends.fp8 import fp8_format
from tinyopt.dialects import graph
from tinyopt.dialects.runtime_scalar import check_value, describe, runtime_scalars

Handler = Callable[[Operation, list[np.ndarray]], np.ndarray]
"""Computes an op's single result from its operand arrays."""

_HANDLERS: dict[type[Operation], Handler] = {}

_erf = np.vectorize(math.erf, otypes=[np.float64])


def round_to_bf16(a: np.ndarray) -> np.ndarray:
    """Round to the nearest bf16 value (ties to even); return float32 holding bf16 values."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    # Adding 0x7FFF plus the lowest kept bit and truncating is round-half-to-even.
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    out = rounded.view(np.float32)
    # The carry trick would turn a NaN payload into inf; keep NaNs as NaNs.
    return np.where(np.isnan(a), np.float32(np.nan), out).reshape(np.shape(a))


_NUMPY_DTYPES = {
    f32: np.float32,
    bf16: np.float32,
    f8E4M3FN: np.float32,
    f8E5M2: np.float32,
    f16: np.float16,
    i64: np.int64,
    i32: np.int32,
    graph.BOOL: np.bool_,
}


def numpy_dtype(element_type: Attribute) -> np.dtype:
    """Return the numpy dtype that stores tensors of `element_type` (bf16, FP8 -> float32)."""
    if element_type not in _NUMPY_DTYPES:
        raise TypeError(f"no numpy dtype for element type {element_type}")
    return np.dtype(_NUMPY_DTYPES[element_type])


def _to_element_type(a: np.ndarray, element_type: Attribute) -> np.ndarray:
    """Round `a` to the precision of `element_type`, stored in its numpy dtype."""
    if fmt := fp8_format(element_type):
        return fmt.round(a)
    out = a.astype(numpy_dtype(element_type))
    return round_to_bf16(out) if element_type == bf16 else out


def _find_func(module_or_func: ModuleOp | FuncOp) -> FuncOp:
    if isinstance(module_or_func, FuncOp):
        return module_or_func
    if not isinstance(module_or_func, ModuleOp):
        raise ValueError(
            f"run_reference takes a parsed module (tinyopt.compiler.parse), got "
            f"{type(module_or_func).__name__}"
        )
    for op in module_or_func.ops:
        if isinstance(op, FuncOp) and op.body.blocks:
            return op
    raise ValueError("module contains no func.func with a body")


def _tensor_type(value: SSAValue) -> TensorType[AnyFloat]:
    assert isinstance(value.type, TensorType)
    return value.type  # pyright: ignore[reportUnknownVariableType]


def random_inputs(module_or_func: ModuleOp | FuncOp, seed: int) -> list[np.ndarray]:
    """Return standard-normal arrays matching the function's arguments.

    Each array has its argument's shape and numpy dtype (`numpy_dtype`); bf16 arguments get
    float32 arrays rounded to bf16-representable values. Integer arguments (gather ids) are
    uniform over the rows of the smallest table they index, and 0 or 1 when they index no
    table (a padding mask); runtime scalars are uniform over their bounds; masks (i1) are true
    or false with even odds.
    """
    rng = np.random.default_rng(seed)
    arrays: list[np.ndarray] = []
    function = _find_func(module_or_func)
    scalars = runtime_scalars(function)
    for arg in function.args:
        type_ = _tensor_type(arg)
        if arg in scalars:
            value = rng.integers(scalars[arg].lo, scalars[arg].hi + 1)
            arrays.append(np.array(value, dtype=numpy_dtype(type_.element_type)))
            continue
        if type_.element_type in graph.ID_TYPES:
            rows = [
                _tensor_type(use.operation.operands[0]).get_shape()[0]
                for use in arg.uses
                if isinstance(use.operation, graph.GatherOp) and use.index == 1
            ]
            ids = rng.integers(0, min(rows, default=2), type_.get_shape())
            arrays.append(ids.astype(numpy_dtype(type_.element_type)))
            continue
        if type_.element_type == graph.BOOL:
            arrays.append(rng.random(type_.get_shape()) < 0.5)
            continue
        sample = rng.standard_normal(type_.get_shape())
        arrays.append(_to_element_type(sample, type_.element_type))
    return arrays


def run_reference(
    module_or_func: ModuleOp | FuncOp,
    *arrays: np.ndarray,
    dtype: type[np.floating] | np.dtype | None = np.float64,
) -> list[np.ndarray]:
    """Run a function of graph ops on numpy arrays and return its results.

    Every op computes in `dtype` (float64 by default). With `dtype=None` each result is
    instead rounded to its op's element type (bf16 as float32 holding bf16 values), which
    mimics a device computing in the program's own precision. A module runs its first
    `func.func`. `graph.cast` always rounds to its target element type.
    """
    func = _find_func(module_or_func)
    args = func.args
    if len(arrays) != len(args):
        raise ValueError(f"@{func.sym_name.data} takes {len(args)} arguments, got {len(arrays)}")
    env: dict[SSAValue, np.ndarray] = {}
    for arg, bounds in runtime_scalars(func).items():
        check_value(describe(func, arg), arrays[arg.index], (bounds.lo, bounds.hi))
    for i, (arg, array) in enumerate(zip(args, arrays, strict=True)):
        if not isinstance(arg.type, TensorType):
            raise ValueError(
                f"argument {i} of @{func.sym_name.data} is a {arg.type}: run_reference runs "
                "graph functions (before fuse), whose arguments are tensors"
            )
        type_ = _tensor_type(arg)
        if np.shape(array) != type_.get_shape():
            raise ValueError(
                f"argument {i} of @{func.sym_name.data} has shape {np.shape(array)}, "
                f"expected {type_.get_shape()}"
            )
        env[arg] = _convert(np.asarray(array), type_.element_type, dtype)

    # Like device code, inf/nan propagate silently (e.g. exp overflow, log of 0).
    with np.errstate(all="ignore"):
        for op in func.body.block.ops:
            operands = [env[o] for o in op.operands]
            if isinstance(op, ReturnOp):
                return [np.array(a) for a in operands]
            handler = _HANDLERS.get(type(op))
            if handler is None:
                raise NotImplementedError(f"run_reference cannot run op '{op.name}'")
            result = op.results[0]
            env[result] = _convert(handler(op, operands), _tensor_type(result).element_type, dtype)
    raise ValueError(f"@{func.sym_name.data} has no func.return")


def _convert(
    a: np.ndarray, element_type: Attribute, dtype: type[np.floating] | np.dtype | None
) -> np.ndarray:
    if element_type in (*graph.ID_TYPES, graph.BOOL):
        return a.astype(numpy_dtype(element_type), copy=False)
    if dtype is None:
        return _to_element_type(a, element_type)
    return a.astype(dtype, copy=False)


def _handles(*op_types: type[Operation]) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        for op_type in op_types:
            _HANDLERS[op_type] = handler
        return handler

    return register


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)) for x >= 0, exp(x) / (1 + exp(x)) below: neither overflows, and the
    tails keep their relative accuracy (sigmoid(-40) is 4.2e-18, where the tanh form
    0.5 * (1 + tanh(x / 2)) cancels to 0 below about -37)."""
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _gelu(x: np.ndarray) -> np.ndarray:
    return (0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))).astype(x.dtype)


def _gelu_tanh(x: np.ndarray) -> np.ndarray:
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)
    return (0.5 * x * (1.0 + np.tanh(inner))).astype(x.dtype)


def _softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def _remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """torch.remainder: fmod's result plus b where it is not 0 and its sign differs from b's;
    a zero keeps a's sign, where `np.remainder` gives it b's."""
    m = np.fmod(a, b)
    return np.where((m != 0) & ((m < 0) != (b < 0)), m + b, m)


_UNARY: dict[type[Operation], Callable[[np.ndarray], np.ndarray]] = {
    graph.NegOp: np.negative,
    graph.AbsOp: np.abs,
    graph.ExpOp: np.exp,
    graph.LogOp: np.log,
    graph.SqrtOp: np.sqrt,
    graph.RsqrtOp: lambda x: 1.0 / np.sqrt(x),
    graph.ReciprocalOp: lambda x: 1.0 / x,
    graph.TanhOp: np.tanh,
    graph.SigmoidOp: _sigmoid,
    graph.ReluOp: lambda x: _maximum(x, np.zeros_like(x)),
    graph.GeluOp: _gelu,
    graph.GeluTanhOp: _gelu_tanh,
    graph.ErfOp: _erf,
    graph.CosOp: np.cos,
    graph.SinOp: np.sin,
    graph.Log1pOp: np.log1p,
    graph.Expm1Op: np.expm1,
    graph.FloorOp: np.floor,
    graph.CeilOp: np.ceil,
    graph.RoundOp: np.rint,
    graph.TruncOp: np.trunc,
    graph.SiluOp: lambda x: x * _sigmoid(x),
}


def _maximum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`np.maximum` with -0.0 below +0.0, as `arith.maximumf` (IEEE 754-2019 maximum, PTX
    `max.NaN`) that `graph.max` and `graph.relu` lower to; numpy returns either zero."""
    return np.where((a == 0) & (b == 0), a + b, np.maximum(a, b))


def _minimum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """`np.minimum` with -0.0 below +0.0, as `arith.minimumf`."""
    return np.where((a == 0) & (b == 0), -(-a - b), np.minimum(a, b))


def _reduce_max(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """`np.max`, a maximum of zeros +0.0 where one of them is (the kernels' `maximumf`)."""
    m = np.max(x, axis=axis, keepdims=keepdims)
    positive = np.any((x == 0) & ~np.signbit(x), axis=axis, keepdims=keepdims)
    return np.where(m == 0, np.where(positive, 0.0, -0.0), m).astype(m.dtype)


def _reduce_min(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """`np.min`, a minimum of zeros -0.0 where one of them is (the kernels' `minimumf`)."""
    m = np.min(x, axis=axis, keepdims=keepdims)
    negative = np.any((x == 0) & np.signbit(x), axis=axis, keepdims=keepdims)
    return np.where(m == 0, np.where(negative, -0.0, 0.0), m).astype(m.dtype)


def _pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """C's `pow`: numpy takes an exponent of 0.5 as a square root, which gives NaN at -inf and
    -0 at -0 where `pow` (and `powf` on the GPU) gives +inf and +0."""
    power = np.power(x, y)
    half = np.asarray(y) == 0.5
    return np.where(half & (x == -np.inf), np.inf, np.where(half & (x == 0), 0.0, power)).astype(
        power.dtype
    )


_BINARY: dict[type[Operation], Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    graph.AddOp: np.add,
    graph.SubOp: np.subtract,
    graph.MulOp: np.multiply,
    graph.DivOp: np.divide,
    graph.MaxOp: _maximum,
    graph.MinOp: _minimum,
    graph.PowOp: _pow,
    graph.Atan2Op: np.arctan2,
    graph.FmodOp: np.fmod,
    graph.RemainderOp: _remainder,
    graph.CopySignOp: np.copysign,
    graph.MatmulOp: np.matmul,
}


def _prod(x: np.ndarray, axis: tuple[int, ...], keepdims: bool) -> np.ndarray:
    """np.prod accumulating float16 in float32, as the kernels do (bf16 is held in float32)."""
    dtype = np.float32 if x.dtype == np.float16 else None
    return np.prod(x, axis=axis, keepdims=keepdims, dtype=dtype)


_REDUCE: dict[type[Operation], Callable[..., np.ndarray]] = {
    graph.ReduceSumOp: np.sum,
    graph.ReduceProdOp: _prod,
    graph.ReduceMaxOp: _reduce_max,
    graph.ReduceMinOp: _reduce_min,
    graph.ReduceMeanOp: np.mean,
}

_COMPARE: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "eq": np.equal,
    "ne": np.not_equal,
    "lt": np.less,
    "le": np.less_equal,
    "gt": np.greater,
    "ge": np.greater_equal,
}


@_handles(*_UNARY)
def _unary(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    return _UNARY[type(op)](xs[0])


@_handles(*_BINARY)
def _binary(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    return _BINARY[type(op)](xs[0], xs[1])


@_handles(*_REDUCE)
def _reduce(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    assert isinstance(op, graph.ReduceOp)
    keepdim = bool(op.keepdim.value.data)
    return np.asarray(_REDUCE[type(op)](xs[0], axis=op.dim_list, keepdims=keepdim))


@_handles(graph.ArgmaxOp)
def _argmax(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    """torch.argmax: the first index of the largest element, NaN the largest (the first NaN
    wins, even after a +inf)."""
    assert isinstance(op, graph.ArgmaxOp)
    x, dim = xs[0], op.dim.value.data
    nan = np.isnan(x)
    index = np.where(nan.any(axis=dim), np.argmax(nan, axis=dim), np.argmax(x, axis=dim))
    return np.expand_dims(index, dim) if op.keepdim.value.data else index


@_handles(graph.CompareOp)
def _compare(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    assert isinstance(op, graph.CompareOp)
    return _COMPARE[op.predicate.data](xs[0], xs[1])


@_handles(graph.SelectOp)
def _select(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    return np.where(xs[0], xs[1], xs[2])


@_handles(graph.IotaOp)
def _iota(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    assert isinstance(op, graph.IotaOp)
    shape, dim = _tensor_type(op.results[0]).get_shape(), op.dim.value.data
    along = np.arange(shape[dim], dtype=np.float64).reshape([-1] + [1] * (len(shape) - dim - 1))
    return np.broadcast_to(along, shape)


@_handles(graph.CastOp)
def _cast(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    target = _tensor_type(op.results[0]).element_type
    if target == graph.BOOL:
        return xs[0] != 0  # NaN is true, as in torch
    if target in graph.ID_TYPES:
        return np.trunc(xs[0])
    if xs[0].dtype.kind != "f":  # a mask or integer input becomes float64, then rounds
        return _to_element_type(xs[0].astype(np.float64), target).astype(np.float64)
    # in the target's storage, not the source's: f16's 65504 is bf16's 65536, past f16
    return _to_element_type(xs[0], target)


@_handles(graph.TransposeOp)
def _transpose(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    assert isinstance(op, graph.TransposeOp)
    return np.transpose(xs[0], op.perm_list)


@_handles(graph.ReshapeOp)
def _reshape(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    return xs[0].reshape(_tensor_type(op.results[0]).get_shape())


@_handles(graph.BroadcastOp)
def _broadcast(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    return np.broadcast_to(xs[0], _tensor_type(op.results[0]).get_shape())


@_handles(graph.ConstantOp)
def _constant(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    assert isinstance(op, graph.ConstantOp)
    values = np.array(op.value.get_values(), dtype=np.float64)
    return values.reshape(op.value.get_shape())


@_handles(graph.SoftmaxOp)
def _softmax_op(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    assert isinstance(op, graph.SoftmaxOp)
    return _softmax(xs[0], op.dim.value.data)


def _statistics_precision(x: np.ndarray) -> np.ndarray:
    """`x` in at least f32: a norm's statistics and eps are computed in f32 for f16 inputs
    (as torch and the decomposition compute them), its result rounded once to its type."""
    return x.astype(np.promote_types(x.dtype, np.float32))


@_handles(graph.RmsNormOp)
def _rms_norm(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    assert isinstance(op, graph.RmsNormOp)
    x, w = (_statistics_precision(v) for v in xs)
    return x * (1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + op.eps.value.data)) * w


@_handles(graph.LayerNormOp)
def _layer_norm(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    assert isinstance(op, graph.LayerNormOp)
    x, w, b = (_statistics_precision(v) for v in xs)
    centered = x - np.mean(x, axis=-1, keepdims=True)
    var = np.mean(centered * centered, axis=-1, keepdims=True)
    return centered / np.sqrt(var + op.eps.value.data) * w + b


@_handles(graph.LinearOp)
def _linear(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    y = xs[0] @ xs[1].T
    return y + xs[2] if len(xs) == 3 else y


@_handles(graph.AttentionOp)
def _attention(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    assert isinstance(op, graph.AttentionOp)
    q, k, v = xs[:3]
    mask = xs[3:4] if op.mask is not None else []
    k, v = (np.repeat(x, op.groups, axis=1) for x in (k, v))
    scores = (q @ np.swapaxes(k, -1, -2)) * op.scale.value.data
    sq, skv = scores.shape[-2:]
    # The valid keys: all of them, or the first L (a runtime scalar); causal aligns to the end
    # of the valid keys.
    valid = skv if op.valid is None else int(xs[-1])
    if mask and mask[0].dtype == bool:  # lowest, not -inf: a row masked everywhere averages v
        scores = np.where(mask[0], scores, np.finfo(scores.dtype).min)
    elif mask:
        scores = scores + mask[0]
    keys = np.arange(skv)[None, :]
    past = keys >= valid
    if op.causal.value.data:  # query i sees the keys j <= i + L - Sq, and no key past them
        # After the mask: a row whose visible keys are all masked averages v over those keys,
        # never over keys past its causal bound (which tiled kernels do not even load).
        past = keys > np.arange(sq)[:, None] + valid - sq
    scores = np.where(past, -np.inf, scores)
    # As the kernels' acc / max(l, 1): a row whose every score is -inf (a float mask) gives 0,
    # as torch's attention does; elsewhere l >= 1 (the largest score's term is exactly 1).
    top = np.max(scores, axis=-1, keepdims=True)
    terms = np.exp(scores - np.where(top == -np.inf, 0.0, top))
    return (terms / np.maximum(np.sum(terms, axis=-1, keepdims=True), 1.0)) @ v


@_handles(graph.SliceOp)
def _slice(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    assert isinstance(op, graph.SliceOp)
    dim, start, step = (a.value.data for a in (op.dim, op.start, op.step))
    size = _tensor_type(op.results[0]).get_shape()[dim]
    index = [slice(None)] * xs[0].ndim
    index[dim] = slice(start, start + (size - 1) * step + 1, step)
    return xs[0][tuple(index)]


@_handles(graph.DynamicSliceOp)
def _dynamic_slice(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    assert isinstance(op, graph.DynamicSliceOp)
    x, offset = xs
    window, _ = op.window()
    index = [slice(None)] * x.ndim
    index[op.dim.value.data] = slice(int(offset), int(offset) + window)
    return x[tuple(index)]


@_handles(graph.DynamicUpdateSliceOp)
def _dynamic_update_slice(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    assert isinstance(op, graph.DynamicUpdateSliceOp)
    x, update, offset = xs
    window, _ = op.window()
    index = [slice(None)] * x.ndim
    index[op.dim.value.data] = slice(int(offset), int(offset) + window)
    result = np.array(x)
    result[tuple(index)] = update
    return result


@_handles(graph.ConcatOp)
def _concat(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    assert isinstance(op, graph.ConcatOp)
    return np.concatenate(xs, axis=op.dim.value.data)


@_handles(graph.GatherOp)
def _gather(op: Operation, xs: list[np.ndarray]) -> np.ndarray:
    table, ids = xs
    return np.take(table, np.clip(ids, 0, table.shape[0] - 1), axis=0)
