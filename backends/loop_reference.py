"""Numpy executor for loop-level modules: a host `func.func` over memrefs and its `loop.kernel`s.

The host function runs op by op (`memref.alloc`, `memref.get_global`, `loop.launch`,
`func.return`); each launched kernel is compiled once into Python closures and run scalar by
scalar with Python floats (`loop.parallel` iterates its index space, `loop.reduce` folds its
body's elements with its `combine` region from the `init` identity). It is slow and meant
for tiny shapes: it checks what a pass produced against `run_reference`, not speed. Buffers
follow `run_reference`'s convention (bf16 buffers are float32 arrays holding bf16 values).
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import (
    DenseIntOrFPElementsAttr,
    FloatAttr,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    bf16,
    f16,
    f32,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue

from tinyopt.backends.fp8 import fp8_format
from tinyopt.backends.reference import numpy_dtype, round_to_bf16
from tinyopt.dialects import loop
from tinyopt.dialects.runtime_scalar import check_value, describe, host_bounds

Env = dict[SSAValue, Any]


def _div(a: float, b: float) -> float:
    if b != 0.0:
        return a / b
    if a == 0.0 or math.isnan(a):
        return math.nan
    return math.copysign(math.inf, a) * math.copysign(1.0, b)


def _exp(x: float) -> float:
    return math.inf if x >= 709.0 else math.exp(x)  # NaN stays NaN


def _log(x: float) -> float:
    if x > 0.0:
        return math.log(x)
    return -math.inf if x == 0.0 else math.nan


def _log1p(x: float) -> float:
    if x > -1.0:
        return math.log1p(x)
    return -math.inf if x == -1.0 else math.nan


def _expm1(x: float) -> float:
    return math.inf if x >= 709.0 else math.expm1(x)  # NaN stays NaN


def _sqrt(x: float) -> float:
    return math.sqrt(x) if x >= 0.0 else math.nan


def _periodic(fn: Callable[[float], float]) -> Callable[[float], float]:
    """`math.sin` or `math.cos` giving NaN at ±inf, as C's do, where `math`'s raise."""
    return lambda x: math.nan if math.isinf(x) else fn(x)


def _max(a: float, b: float) -> float:
    """`arith.maximumf` (IEEE 754-2019 maximum, PTX `max.NaN`): NaN if either is NaN, and
    -0.0 below +0.0, where Python's `max` returns its first argument of two equal ones."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b == 0.0:
        return b if math.copysign(1.0, a) < 0.0 else a
    return max(a, b)


def _min(a: float, b: float) -> float:
    """`arith.minimumf`: as `_max`, -0.0 below +0.0."""
    if math.isnan(a) or math.isnan(b):
        return math.nan
    if a == b == 0.0:
        return a if math.copysign(1.0, a) < 0.0 else b
    return min(a, b)


def _pow(a: float, b: float) -> float:
    """C's `pow`; Python's raises where it overflows or divides by a zero base, whose
    infinity takes the base's sign when the exponent is an odd integer: pow(-0.0, -1) and
    pow(-2, 1025) are -inf."""
    try:
        result = a**b
    except (OverflowError, ZeroDivisionError):
        odd = b.is_integer() and math.fmod(b, 2.0) != 0.0
        return math.copysign(math.inf, a) if odd else math.inf
    return result if isinstance(result, float) else math.nan


def _fmod(a: float, b: float) -> float:
    """C's fmod; `math.fmod` raises where C gives NaN (an infinite a, a zero b)."""
    if math.isinf(a) or b == 0.0:
        return math.nan
    return math.fmod(a, b)


_SCALAR: dict[str, Callable[..., Any]] = {
    "arith.addf": lambda a, b: a + b,
    "arith.subf": lambda a, b: a - b,
    "arith.mulf": lambda a, b: a * b,
    "arith.divf": _div,
    "arith.maximumf": _max,
    "arith.minimumf": _min,
    "arith.negf": lambda a: -a,
    "arith.extf": lambda a: a,
    "arith.addi": lambda a, b: a + b,
    "arith.subi": lambda a, b: a - b,
    "arith.muli": lambda a, b: a * b,
    "arith.maxsi": max,
    "arith.minsi": min,
    "arith.select": lambda c, a, b: a if c else b,
    "arith.index_cast": int,
    "arith.sitofp": float,
    "arith.fptosi": lambda a: int(a) if math.isfinite(a) else 0,
    "arith.divui": lambda a, b: a // b,
    "arith.remui": lambda a, b: a % b,
    "math.absf": abs,
    "math.exp": _exp,
    "math.log": _log,
    "math.sqrt": _sqrt,
    "math.rsqrt": lambda a: _div(1.0, _sqrt(a)),
    "math.tanh": math.tanh,
    "math.erf": math.erf,
    "math.cos": _periodic(math.cos),
    "math.sin": _periodic(math.sin),
    "math.log1p": _log1p,
    "math.expm1": _expm1,
    # numpy's roundings, not math's: those give ints (-0.0 lost) and raise on inf and NaN.
    "math.floor": lambda a: float(np.floor(a)),
    "math.ceil": lambda a: float(np.ceil(a)),
    "math.roundeven": lambda a: float(np.rint(a)),
    "math.trunc": lambda a: float(np.trunc(a)),
    "math.powf": _pow,
    "math.atan2": math.atan2,
    "math.copysign": math.copysign,
    "llvm.frem": _fmod,
}


_CMPI: tuple[Callable[[int, int], bool], ...] = (
    operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge,
    operator.lt, operator.le, operator.gt, operator.ge,
)  # fmt: skip
"""`arith.cmpi` predicates eq ne slt sle sgt sge ult ule ugt uge on (non-negative) indices."""

_CMPF: dict[int, Callable[[float, float], bool]] = {
    1: operator.eq, 2: operator.gt, 3: operator.ge, 4: operator.lt, 5: operator.le, 13: operator.ne,
}  # fmt: skip
"""The `arith.cmpf` predicates `fuse` emits: oeq ogt oge olt ole (false on NaN, as Python's
comparisons) and une (true on NaN, as Python's `!=`)."""


F32_MAX = float(np.finfo(np.float32).max)


def _to_f32(value: float) -> float:
    """Round an f32 op's result to f32 (`run_loop_module`'s `round_f32`)."""
    if -F32_MAX <= value <= F32_MAX or value != value:
        return float(np.float32(value))
    with np.errstate(over="ignore"):
        return float(np.float32(value))


def _round(value: float, element_type: Attribute) -> float:
    """Round a scalar to the precision of a narrower float type."""
    if element_type == f16:
        with np.errstate(over="ignore"):
            return float(np.float16(value))
    if element_type == bf16:
        with np.errstate(over="ignore"):
            return float(round_to_bf16(np.array([value], dtype=np.float32))[0])
    if fmt := fp8_format(element_type):
        return float(fmt.round(np.array([value]))[0])
    return value


class _Interpreter:
    """Runs the ops of loop kernels over numpy buffers."""

    def __init__(self, module: ModuleOp, round_f32: bool = False):
        self.round_f32 = round_f32
        self.kernels: dict[str, tuple[_Block, int]] = {}
        self.symbols: dict[str, Operation] = {}
        for op in module.ops:
            name = op.properties.get("sym_name")
            if name is not None:
                self.symbols[name.data] = op

    def run_host(self, function: func.FuncOp, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Run a host function on copies of `arrays` (and the values of its runtime scalars,
        checked against their bounds first) and return its result buffers."""
        env: Env = {}
        bounds = host_bounds(function)
        if len(arrays) != len(function.args):
            raise ValueError(
                f"@{function.sym_name.data} takes {len(function.args)} arguments, got {len(arrays)}"
            )
        for arg, array in zip(function.args, arrays, strict=True):
            name = describe(function, arg)
            if arg.index in bounds:
                env[arg] = check_value(name, np.asarray(array)[()], bounds[arg.index])
                continue
            if not isinstance(arg.type, MemRefType):
                raise ValueError(
                    f"{name} is a {arg.type}: run_loop_module runs loop-level host "
                    "functions (after fuse), whose arguments are memrefs"
                )
            held = np.array(array, dtype=numpy_dtype(arg.type.element_type))
            if held.shape != arg.type.get_shape():
                raise ValueError(f"{name} is {arg.type}: got an array of shape {list(held.shape)}")
            env[arg] = held
        for op in function.body.block.ops:
            if isinstance(op, memref.AllocOp):
                type_ = op.memref.type
                assert isinstance(type_, MemRefType)
                env[op.memref] = np.zeros(type_.get_shape(), numpy_dtype(type_.element_type))
            elif isinstance(op, memref.GetGlobalOp):
                env[op.memref] = self._global(op.name_.root_reference.data)
            elif isinstance(op, memref.CollapseShapeOp):
                view = env[op.src].reshape(op.result.type.get_shape())
                assert np.shares_memory(view, env[op.src]), "a collapse_shape view copied"
                env[op.result] = view
            elif isinstance(op, loop.LaunchOp):
                self._launch(op.callee.root_reference.data, [env[a] for a in op.args])
            elif isinstance(op, func.ReturnOp):
                return [np.array(env[v]) for v in op.arguments]
            else:
                raise NotImplementedError(f"run_loop_module cannot run host op '{op.name}'")
        raise ValueError(f"@{function.sym_name.data} has no func.return")

    def _launch(self, name: str, buffers: list[np.ndarray]) -> None:
        """Run kernel `name` on `buffers`, compiling it on its first launch."""
        if name not in self.kernels:
            kernel = self.symbols[name]
            if not isinstance(kernel, loop.KernelOp):
                raise ValueError(
                    f"@{name} is a {kernel.name}: run_loop_module runs loop kernels (after fuse, "
                    "before tile)"
                )
            compiler = _Compiler(self.round_f32)
            self.kernels[name] = (compiler.block(kernel.body.block), len(compiler.slots))
        body, size = self.kernels[name]
        env: list[Any] = [None] * size
        for arg, buffer in zip(body.args, buffers, strict=True):
            env[arg] = buffer
        body.run(env)

    def _global(self, name: str) -> np.ndarray:
        op = self.symbols[name]
        assert isinstance(op, memref.GlobalOp)
        value = op.initial_value
        assert isinstance(value, DenseIntOrFPElementsAttr)
        type_ = op.type
        assert isinstance(type_, MemRefType)
        values = np.array(value.get_values(), dtype=np.float64)
        if value.is_splat():
            values = np.full(type_.get_shape(), values[0])
        return values.reshape(type_.get_shape()).astype(numpy_dtype(type_.element_type))


Step = Callable[[list[Any]], None]
"""One op compiled to a closure over the value slots of its kernel."""


@dataclass
class _Block:
    """A block compiled to steps: its argument slots, its steps, the slots it yields."""

    args: list[int]
    steps: list[Step]
    yields: list[int]

    def run(self, env: list[Any]) -> None:
        for step in self.steps:
            step(env)


class _Compiler:
    """Compiles a kernel's ops to closures once; values live in slots of one list.

    Interpreting the IR op by op spent most of its time in xDSL's property accessors and
    SSA-value hashing; a kernel body runs once per point of its index space.
    """

    def __init__(self, round_f32: bool) -> None:
        self.slots: dict[SSAValue, int] = {}
        self.round_f32 = round_f32

    def slot(self, value: SSAValue) -> int:
        return self.slots.setdefault(value, len(self.slots))

    def block(self, block: Block) -> _Block:
        args = [self.slot(a) for a in block.args]
        steps: list[Step] = []
        for op in block.ops:
            if isinstance(op, loop.YieldOp):
                return _Block(args, steps, [self.slot(v) for v in op.arguments])
            steps.append(self.step(op))
        return _Block(args, steps, [])

    def step(self, op: Operation) -> Step:
        ins = [self.slot(o) for o in op.operands]
        out = self.slot(op.results[0]) if op.results else -1
        if op.name in _SCALAR:
            fn = _SCALAR[op.name]
            if self.round_f32 and op.results and op.results[0].type == f32:
                return _scalar_step(lambda *a, fn=fn: _to_f32(fn(*a)), ins, out)
            return _scalar_step(fn, ins, out)
        if op.name == "arith.constant":
            value = op.properties["value"]
            assert isinstance(value, FloatAttr | IntegerAttr)
            return _scalar_step(lambda v=value.value.data: v, [], out)
        if isinstance(op, arith.CmpiOp):
            return _scalar_step(_CMPI[op.predicate.value.data], ins, out)
        if isinstance(op, arith.CmpfOp):
            return _scalar_step(_CMPF[op.predicate.value.data], ins, out)
        if op.name == "arith.truncf":
            type_ = op.results[0].type
            return _scalar_step(lambda a: _round(a, type_), ins, out)
        if isinstance(op, memref.LoadOp):
            buffer, indices = ins[0], ins[1:]

            def load(env: list[Any]) -> None:
                env[out] = float(env[buffer][tuple([env[i] for i in indices])])

            return load
        if isinstance(op, memref.StoreOp):
            value, buffer, indices = ins[0], ins[1], ins[2:]

            def store(env: list[Any]) -> None:
                env[buffer][tuple([env[i] for i in indices])] = env[value]

            return store
        if isinstance(op, loop.ParallelOp):
            return _parallel_step(self.block(op.body.block), op.extents)
        if isinstance(op, loop.ReduceOp):
            body, combine = self.block(op.body.block), self.block(op.combine.block)
            return _reduce_step(body, combine, op.extents, ins, [self.slot(r) for r in op.res])
        raise NotImplementedError(f"run_loop_module cannot run kernel op '{op.name}'")


def _scalar_step(fn: Callable[..., Any], ins: list[int], out: int) -> Step:
    if len(ins) == 1:
        (a,) = ins
        return lambda env: env.__setitem__(out, fn(env[a]))
    if len(ins) == 2:
        a, b = ins
        return lambda env: env.__setitem__(out, fn(env[a], env[b]))
    return lambda env: env.__setitem__(out, fn(*[env[i] for i in ins]))


def _parallel_step(body: _Block, extents: Sequence[int]) -> Step:
    def parallel(env: list[Any]) -> None:
        for point in itertools.product(*(range(e) for e in extents)):
            for arg, index in zip(body.args, point):
                env[arg] = index
            body.run(env)

    return parallel


def _reduce_step(
    body: _Block, combine: _Block, extents: Sequence[int], init: list[int], res: list[int]
) -> Step:
    def reduce(env: list[Any]) -> None:
        state = [env[i] for i in init]
        for point in itertools.product(*(range(e) for e in extents)):
            for arg, index in zip(body.args, point):
                env[arg] = index
            body.run(env)
            for arg, value in zip(combine.args, state + [env[i] for i in body.yields]):
                env[arg] = value
            combine.run(env)
            state = [env[i] for i in combine.yields]
        for slot, value in zip(res, state):
            env[slot] = value

    return reduce


def run_loop_module(
    module: ModuleOp, func_name: str, *arrays: np.ndarray, round_f32: bool = False
) -> list[np.ndarray]:
    """Run host function `func_name` of a loop-level module on `arrays`; return its results.

    Float arithmetic runs in Python floats, rounded at stores and truncations: accuracy tests
    of an algorithm (a rewrite against its float64 reference) see the algorithm, not f32's
    rounding. `round_f32` rounds every f32 op's result to f32 as the GPU and torch do, for
    comparisons with torch's f32 results (the frontend fuzzer), where a tie such as
    sqrt(x·x) > |x| must come out as it does there."""
    interpreter = _Interpreter(module, round_f32)
    function = interpreter.symbols.get(func_name)
    if not isinstance(function, func.FuncOp):
        raise ValueError(f"module has no func.func @{func_name}")
    return interpreter.run_host(function, arrays)
