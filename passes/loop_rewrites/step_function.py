"""A fold's step function `s' = f(s, x)` read from a `func.func`, evaluated three ways (numbers,
formulas, IR), and the candidate merges and verdicts the associativity checker works with."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import arith, func
from xdsl.dialects import math as mathd
from xdsl.dialects.builtin import ArrayAttr, FloatAttr
from xdsl.ir import Attribute, Block, Operation, SSAValue

INIT_ATTR = "tinyopt.init"
"""The attribute of a step function that holds its initial state."""

VERDICT_ATTR = "tinyopt.assoc"
"""The attribute `check-assoc` sets on a step function: its verdict in one line."""

RTOL = 1e-7
"""Relative tolerance of a comparison, relative to the largest magnitude the fold went through."""

PREDICATES = (
    *("false", "oeq", "ogt", "oge", "olt", "ole", "one", "ord"),
    *("ueq", "ugt", "uge", "ult", "ule", "une", "uno", "true"),
)
"""`arith.cmpf` predicates in the order of their integer encoding."""

EDGE_VALUES = (math.inf, -math.inf, 1e30, -1e30, 0.0, -0.0, 1e-310, -1e-310, 1e15, -7.0)
"""Values mixed into the random chunks: infinities, huge and denormal magnitudes, signed zeros."""

Value = Any
"""A value in one interpretation of the IR: a float, an SSA value or a formula string."""

_OPS: dict[str, tuple[Callable[..., Value], type[Operation]]] = {
    "arith.addf": (operator.add, arith.AddfOp),
    "arith.subf": (operator.sub, arith.SubfOp),
    "arith.mulf": (operator.mul, arith.MulfOp),
    "arith.divf": (operator.truediv, arith.DivfOp),
    "arith.maximumf": (np.maximum, arith.MaximumfOp),
    "arith.minimumf": (np.minimum, arith.MinimumfOp),
    "arith.maxnumf": (np.fmax, arith.MaxnumfOp),
    "arith.minnumf": (np.fmin, arith.MinnumfOp),
    "math.powf": (np.power, mathd.PowFOp),
    "arith.negf": (operator.neg, arith.NegfOp),
    "math.absf": (np.abs, mathd.AbsFOp),
    "math.exp": (np.exp, mathd.ExpOp),
    "math.exp2": (np.exp2, mathd.Exp2Op),
    "math.expm1": (np.expm1, mathd.ExpM1Op),
    "math.log": (np.log, mathd.LogOp),
    "math.log1p": (np.log1p, mathd.Log1pOp),
    "math.log2": (np.log2, mathd.Log2Op),
    "math.sqrt": (np.sqrt, mathd.SqrtOp),
    "math.rsqrt": (lambda a: 1.0 / np.sqrt(a), mathd.RsqrtOp),
    "math.sin": (np.sin, mathd.SinOp),
    "math.cos": (np.cos, mathd.CosOp),
    "math.tanh": (np.tanh, mathd.TanhOp),
}
"""The arith/math ops a step function may use: how each evaluates in float64, and its IR op."""
_INFIX = {"arith.addf": "+", "arith.subf": "-", "arith.mulf": "*", "arith.divf": "/"}
_FUNCTION_NAMES = {
    "arith.maximumf": "max",
    "arith.minimumf": "min",
    "arith.maxnumf": "maxnum",
    "arith.minnumf": "minnum",
    "math.powf": "pow",
    "math.absf": "abs",
}
_COMPARISONS = {"eq": "==", "gt": ">", "ge": ">=", "lt": "<", "le": "<=", "ne": "!="}
_COMPARE = {name: getattr(operator, name) for name in _COMPARISONS}
ASSOCIATIVE_OPS = {
    "arith.addf": "sum",
    "arith.mulf": "product",
    "arith.maximumf": "max",
    "arith.minimumf": "min",
    "arith.maxnumf": "max",
    "arith.minnumf": "min",
}


class StepError(Exception):
    """A step function the checker cannot read (bad signature, init or op)."""


class Ops:
    """One interpretation of scalar IR: how constants, ops, comparisons and selects evaluate."""

    def const(self, value: float) -> Value:
        """Return a constant."""
        raise NotImplementedError

    def call(self, name: str, *args: Value) -> Value:
        """Apply the arith/math op `name` to `args`."""
        raise NotImplementedError

    def cmp(self, predicate: str, lhs: Value, rhs: Value) -> Value:
        """Compare two values with an `arith.cmpf` predicate."""
        raise NotImplementedError

    def select(self, cond: Value, a: Value, b: Value) -> Value:
        """Return `a` where `cond` holds, else `b`."""
        raise NotImplementedError


class NumericOps(Ops):
    """Evaluates in float64 numpy scalars (IEEE infinities and NaNs, no exceptions)."""

    def const(self, value: float) -> Value:
        return np.float64(value)

    def call(self, name: str, *args: Value) -> Value:
        return np.float64(_OPS[name][0](*args))

    def cmp(self, predicate: str, lhs: Value, rhs: Value) -> Value:
        """Compare with MLIR's ordered/unordered semantics."""
        if predicate in ("false", "true"):
            return predicate == "true"
        unordered = bool(np.isnan(lhs) or np.isnan(rhs))
        if predicate in ("ord", "uno"):
            return unordered == (predicate == "uno")
        holds = bool(_COMPARE[predicate[1:]](lhs, rhs))
        return unordered or holds if predicate[0] == "u" else not unordered and holds

    def select(self, cond: Value, a: Value, b: Value) -> Value:
        return a if cond else b


class FormulaOps(Ops):
    """Builds a fully parenthesized infix formula (strings) for describing merges in words."""

    def const(self, value: float) -> Value:
        return f"{value:g}"

    def call(self, name: str, *args: Value) -> Value:
        """Format an op: infix for + - * /, a function call otherwise."""
        if name in _INFIX:
            return f"({args[0]} {_INFIX[name]} {args[1]})"
        if name == "arith.negf":
            return f"-{args[0]}"
        fname = _FUNCTION_NAMES.get(name, name.split(".")[1])
        return f"{fname}({', '.join(args)})"

    def cmp(self, predicate: str, lhs: Value, rhs: Value) -> Value:
        return f"{lhs} {_COMPARISONS.get(predicate[1:], predicate)} {rhs}"

    def select(self, cond: Value, a: Value, b: Value) -> Value:
        """Format a select as C's conditional expression."""
        return f"({cond} ? {a} : {b})"


def unwrapped(formula: str) -> str:
    """Drop the outer parentheses of a formula when they enclose all of it."""
    if not (formula.startswith("(") and formula.endswith(")")):
        return formula
    depth = 0
    for i, ch in enumerate(formula):
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth == 0 and i < len(formula) - 1:
            return formula
    return formula[1:-1]


class IROps(Ops):
    """Appends arith/math ops to a block; values are SSA values of one float type."""

    def __init__(self, block: Block, type_: Attribute):
        self.block = block
        self.type = type_

    def _add(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def const(self, value: float) -> Value:
        return self._add(arith.ConstantOp(FloatAttr(value, self.type)))  # type: ignore[arg-type]

    def call(self, name: str, *args: Value) -> Value:
        return self._add(_OPS[name][1](*args))

    def cmp(self, predicate: str, lhs: Value, rhs: Value) -> Value:
        return self._add(arith.CmpfOp(lhs, rhs, predicate))

    def select(self, cond: Value, a: Value, b: Value) -> Value:
        return self._add(arith.SelectOp(cond, a, b))


NUMERIC = NumericOps()
FORMULA = FormulaOps()

State = tuple[float, ...]
Chunk = list[tuple[float, ...]]


@dataclass
class StepFunction:
    """A parsed step function: `n_state` state arguments, then `n_elem` element arguments."""

    op: func.FuncOp
    n_state: int
    init: State

    @property
    def name(self) -> str:
        return self.op.sym_name.data

    @property
    def n_elem(self) -> int:
        return len(self.op.args) - self.n_state

    @property
    def type(self) -> Attribute:
        """The float type of the state."""
        return self.op.function_type.outputs.data[0]

    def state_names(self) -> list[str]:
        """Names of the state components: the arguments' names, else s0, s1, …."""
        return [a.name_hint or f"s{i}" for i, a in enumerate(self.op.args[: self.n_state])]

    @classmethod
    def from_func(cls, op: func.FuncOp) -> StepFunction:
        """Read a step function, raising `StepError` naming what is wrong with it."""
        where = f"step function @{op.sym_name.data}"
        outputs = list(op.function_type.outputs.data)
        inputs = list(op.function_type.inputs.data)
        n_state = len(outputs)
        if n_state == 0 or inputs[:n_state] != outputs or len(inputs) <= n_state:
            raise StepError(
                f"{where}: arguments must be the state (the result types, in order) followed "
                "by at least one element argument"
            )
        init = op.attributes.get(INIT_ATTR)
        if not isinstance(init, ArrayAttr) or not all(isinstance(v, FloatAttr) for v in init):
            raise StepError(f"{where}: {INIT_ATTR} must be an array of float attributes")
        if len(init) != n_state:
            raise StepError(
                f"{where}: {INIT_ATTR} has {len(init)} values but the state has {n_state}"
            )
        supported = {*_OPS, "arith.constant", "arith.cmpf", "arith.select", "func.return"}
        for inner in op.body.walk():
            if inner.name not in supported:
                raise StepError(f"{where}: unsupported op '{inner.name}'")
        if len(op.body.blocks) != 1:
            raise StepError(f"{where}: the body must be a single block")
        values = tuple(float(v.value.data) for v in init)  # type: ignore[union-attr]
        return cls(op, n_state, values)

    def apply(self, ops: Ops, state: Sequence[Value], element: Sequence[Value]) -> list[Value]:
        """Interpret the step's body in `ops` on one state and one element."""
        env: dict[SSAValue, Value] = dict(zip(self.op.args, [*state, *element], strict=True))
        for op in self.op.body.block.ops:
            if isinstance(op, func.ReturnOp):
                return [env[v] for v in op.arguments]
            if isinstance(op, arith.ConstantOp):
                env[op.result] = ops.const(float(op.value.value.data))  # type: ignore[union-attr]
            elif isinstance(op, arith.CmpfOp):
                predicate = PREDICATES[op.predicate.value.data]
                env[op.result] = ops.cmp(predicate, env[op.lhs], env[op.rhs])
            elif isinstance(op, arith.SelectOp):
                env[op.result] = ops.select(env[op.cond], env[op.lhs], env[op.rhs])
            else:
                env[op.results[0]] = ops.call(op.name, *(env[o] for o in op.operands))
        raise StepError(f"step function @{self.name} has no func.return")

    def fold(self, chunk: Chunk, start: State | None = None) -> list[State]:
        """Return the states after each element of `chunk`, folded from `start` (or init)."""
        state: State = self.init if start is None else start
        states = []
        for x in chunk:
            state = tuple(self.apply(NUMERIC, state, [np.float64(v) for v in x]))
            states.append(state)
        return states

    def final(self, chunk: Chunk, start: State | None = None) -> State:
        """Return the state after folding all of `chunk`."""
        return self.fold(chunk, start)[-1]


MergeFn = Callable[[Ops, list[Value], list[Value]], list[Value]]


@dataclass(frozen=True)
class Candidate:
    """A candidate merge: on the states themselves, or on map parameters (`lift` given).

    A map-family candidate summarizes a chunk as the composition of its elements' maps: `lift`
    gives each element's map parameters, `merge` composes two (first a, then b) and `apply`
    evaluates the composed map at the initial state.
    """

    description: str
    merge: MergeFn
    params: tuple[str, ...] = ()
    lift: Callable[[Ops, list[Value]], list[Value]] | None = None
    apply: Callable[[Ops, list[Value]], list[Value]] | None = None
    identity: tuple[float, ...] = ()

    def summarize(self, step: StepFunction, chunk: Chunk) -> list[Value]:
        """Summarize a chunk: its final state, or its composed map parameters."""
        if self.lift is None:
            return list(step.final(chunk))
        params = [np.float64(v) for v in self.identity]
        for x in chunk:
            params = self.merge(NUMERIC, params, self.lift(NUMERIC, [np.float64(v) for v in x]))
        return params

    def combined(self, step: StepFunction, a: Chunk, b: Chunk) -> State:
        """Return the state of `a ++ b` computed by merging the two chunks' summaries."""
        merged = self.merge(NUMERIC, self.summarize(step, a), self.summarize(step, b))
        return tuple(merged if self.apply is None else self.apply(NUMERIC, merged))


@dataclass
class Counterexample:
    """Chunks A and B whose sequential fold differs from a merge of their folds."""

    a: Chunk
    b: Chunk
    fold_ab: State
    merged: State
    b_prime: Chunk | None = None
    """A chunk with the same fold as B but another fold after A: no merge of states exists."""
    fold_b: State | None = None

    def text(self) -> str:
        """The counterexample in one line (two when it proves no merge exists)."""
        line = (
            f"counterexample A={show_chunk(self.a)} B={show_chunk(self.b)}: fold(A++B) = "
            f"{show_state(self.fold_ab)} but merge(fold(A), fold(B)) = {show_state(self.merged)}"
        )
        if self.b_prime is None or self.fold_b is None:
            return line
        return (
            f"{line}\n  since B'={show_chunk(self.b_prime)} has fold(B') = fold(B) = "
            f"{show_state(self.fold_b)} and fold(A++B') = {show_state(self.merged)}, "
            "no merge of the states can give both"
        )


@dataclass
class Verdict:
    """The checker's answer for one step function."""

    name: str
    associative: bool
    description: str
    """The merge in words, or why none was found."""
    merge_ir: list[func.FuncOp] = field(default_factory=list)
    counterexample: Counterexample | None = None

    def summary(self) -> str:
        """One line: `associative: merge = …` or `not associative: counterexample …`."""
        if self.associative:
            return f"associative: merge = {self.description}"
        head = f"not associative: {self.counterexample.text()}" if self.counterexample else ""
        return "\n  ".join(p for p in (head or "not associative", self.description) if p)

    def report(self) -> str:
        """The summary after the function name, then the merge IR of a positive verdict."""
        lines = [f"@{self.name}: {self.summary()}", *(str(f) for f in self.merge_ir)]
        return "\n".join(lines)


def show_value(value: float) -> str:
    return f"{value:.6g}"


def show_state(state: Sequence[float]) -> str:
    if len(state) == 1:
        return show_value(state[0])
    return "(" + ", ".join(map(show_value, state)) + ")"


def show_chunk(chunk: Chunk) -> str:
    return "[" + ", ".join(show_state(x) for x in chunk) + "]"
