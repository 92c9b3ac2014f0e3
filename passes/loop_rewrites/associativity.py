"""Associativity checker: decides whether a sequential fold `s' = f(s, x)` is a monoid reduction.

A step function (docs/associativity.md) is a `func.func` over the state tuple and one element,
with its initial state in `tinyopt.init`. `check_associative` looks for a merge `g` with
`fold(A ++ B) = g(fold(A), fold(B))`: a template on the states themselves or a composition of
the maps `s ↦ f(s, x)` (affine, max-affine), each tested on random chunk pairs with edge values
in float64. When none fits it reports a counterexample, and proves that no merge exists when two
chunks with equal folds behave differently after the same prefix. `CheckAssocPass`
(`check-assoc`) annotates each step function with its verdict and adds the derived merges.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from xdsl.context import Context
from xdsl.dialects import arith, func
from xdsl.dialects.builtin import ArrayAttr, FloatAttr, ModuleOp, StringAttr
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from tinyopt.passes.loop_rewrites.step_function import (
    ASSOCIATIVE_OPS,
    PREDICATES,
    show_value,
    unwrapped,
    INIT_ATTR,
    VERDICT_ATTR,
    RTOL,
    EDGE_VALUES,
    NUMERIC,
    FORMULA,
    Value,
    StepError,
    Ops,
    IROps,
    StepFunction,
    Candidate,
    Counterexample,
    Verdict,
    State,
    Chunk,
)


def _agrees(expected: State, got: State, scales: Sequence[float]) -> bool:
    """Whether `got` matches `expected` wherever `expected` is not NaN, relative to `scales`.

    A NaN where `expected` is infinite is accepted too: the merge met `inf·0` or `inf − inf`
    where the fold had overflowed, which says nothing about the algebra.
    """
    for e, g, scale in zip(expected, got, scales, strict=True):
        if math.isnan(e) or (math.isinf(e) and math.isnan(g)):
            continue
        if math.isnan(g):
            return False
        if math.isinf(e) or math.isinf(g):
            if e != g:
                return False
        elif abs(e - g) > RTOL * max(abs(e), abs(g), scale):
            return False
    return True


def _scales(states: list[State]) -> list[float]:
    """The largest finite magnitude each state component took along a fold."""
    return [
        max((abs(float(v)) for v in column if math.isfinite(v)), default=0.0)
        for column in zip(*states)
    ]


def _trials(n_elem: int, seed: int) -> list[tuple[Chunk, Chunk]]:
    """Chunk pairs: small integers first (readable counterexamples), then random, then edges."""
    rng = np.random.default_rng(seed)

    def chunk(length: int, draw: Callable[[], float]) -> Chunk:
        return [tuple(draw() for _ in range(n_elem)) for _ in range(length)]

    def small() -> float:
        return float(rng.integers(-2, 3))

    def normal() -> float:
        return float(rng.normal() * rng.choice([0.5, 3.0, 1000.0]))

    def edgy() -> float:
        return float(rng.choice(EDGE_VALUES)) if rng.random() < 0.3 else normal()

    pairs = []
    for draw, count, longest in ((small, 60, 3), (normal, 200, 8), (edgy, 200, 8)):
        for _ in range(count):
            sizes = rng.integers(1, longest + 1, size=2)
            pairs.append((chunk(int(sizes[0]), draw), chunk(int(sizes[1]), draw)))
    return pairs


def _test(step: StepFunction, candidate: Candidate, seed: int) -> Counterexample | None:
    """Return the first chunk pair on which `candidate` disagrees with the fold, else None."""
    for a, b in _trials(step.n_elem, seed):
        if any(math.isnan(v) for v in step.final(a) + step.final(b)):
            continue
        states = step.fold(a + b)
        merged = candidate.combined(step, a, b)
        if not _agrees(states[-1], merged, _scales(states)):
            return Counterexample(a, b, states[-1], merged)
    return None


def _depends_on(value: SSAValue, args: Sequence[BlockArgument]) -> bool:
    """Whether `value` is computed from any of `args`."""
    if isinstance(value, BlockArgument):
        return value in args
    return any(_depends_on(o, args) for o in value.owner.operands)


def _componentwise(step: StepFunction) -> Candidate | None:
    """`s_i' = s_i ⊕ m(x)` for each component with ⊕ associative: merge with ⊕ componentwise."""
    (ret,) = [op for op in step.op.body.block.ops if isinstance(op, func.ReturnOp)]
    state_args = step.op.args[: step.n_state]
    names = []
    for arg, value in zip(state_args, ret.arguments):
        owner = value.owner
        if not isinstance(owner, Operation) or owner.name not in ASSOCIATIVE_OPS:
            return None
        lhs, rhs = owner.operands
        if not any(
            o is arg and not _depends_on(p, state_args) for o, p in ((lhs, rhs), (rhs, lhs))
        ):
            return None
        names.append(owner.name)

    def merge(ops: Ops, a: list[Value], b: list[Value]) -> list[Value]:
        return [ops.call(n, x, y) for n, x, y in zip(names, a, b)]

    kinds = ", ".join(dict.fromkeys(ASSOCIATIVE_OPS[n] for n in names))
    return Candidate(f"componentwise {kinds}", merge)


def _step_itself(step: StepFunction) -> Candidate | None:
    """`f(s, x) = s ⊕ x` with x shaped like the state: merge(a, b) = f(a, b)."""
    if step.n_elem != step.n_state:
        return None

    def merge(ops: Ops, a: list[Value], b: list[Value]) -> list[Value]:
        return step.apply(ops, a, b)

    return Candidate("the step applied to the other chunk's state, f(a, b)", merge)


def _rescaling(step: StepFunction, k: int) -> Candidate:
    """The online-softmax merge with running maximum `s_k`; other components are rescaled."""

    def merge(ops: Ops, a: list[Value], b: list[Value]) -> list[Value]:
        m = ops.call("arith.maximumf", a[k], b[k])
        ea = ops.call("math.exp", ops.call("arith.subf", a[k], m))
        eb = ops.call("math.exp", ops.call("arith.subf", b[k], m))
        return [
            m
            if i == k
            else ops.call(
                "arith.addf", ops.call("arith.mulf", x, ea), ops.call("arith.mulf", y, eb)
            )
            for i, (x, y) in enumerate(zip(a, b))
        ]

    m = step.state_names()[k]
    return Candidate(
        f"online-softmax rescaling with running maximum {m}: {m} = max({m}_a, {m}_b), every other "
        f"component c = c_a·exp({m}_a − {m}) + c_b·exp({m}_b − {m})",
        merge,
    )


def _welford(step: StepFunction, roles: tuple[int, int, int]) -> Candidate:
    """Chan et al.'s parallel merge of (count, mean, M2) in the state positions `roles`."""
    i_n, i_mean, i_m2 = roles

    def merge(ops: Ops, a: list[Value], b: list[Value]) -> list[Value]:
        add, sub, mul, div = (
            lambda p, q, name=name: ops.call(name, p, q)
            for name in ("arith.addf", "arith.subf", "arith.mulf", "arith.divf")
        )
        n = add(a[i_n], b[i_n])
        delta = sub(b[i_mean], a[i_mean])
        mean = add(a[i_mean], div(mul(delta, b[i_n]), n))
        m2 = add(add(a[i_m2], b[i_m2]), div(mul(mul(delta, delta), mul(a[i_n], b[i_n])), n))
        out = [n, n, n]
        out[i_n], out[i_mean], out[i_m2] = n, mean, m2
        return out

    names = step.state_names()
    n, mean, m2 = (names[i] for i in roles)
    return Candidate(
        f"Welford's parallel merge of (count, mean, M2) = ({n}, {mean}, {m2}): "
        f"{n} = {n}_a + {n}_b, δ = {mean}_b − {mean}_a, {mean} = {mean}_a + δ·{n}_b/{n}, "
        f"{m2} = {m2}_a + {m2}_b + δ²·{n}_a·{n}_b/{n}",
        merge,
    )


class NotInFamily(Exception):
    """The step's map `s ↦ f(s, x)` leaves the affine and max-affine families."""


@dataclass(frozen=True)
class _X:
    """A value independent of the state: `v` in some `Ops`, or a constant `const` (`v` None)."""

    v: Value
    const: float | None = None


@dataclass(frozen=True)
class _Affine:
    """The map `s ↦ c·s + d`."""

    c: _X
    d: _X


@dataclass(frozen=True)
class _MaxAffine:
    """The map `s ↦ max(c·s + d, e)` with a constant `c ≥ 0`."""

    c: _X
    d: _X
    e: _X


_Form = _X | _Affine | _MaxAffine


class _MapAlgebra:
    """Arithmetic on state-independent values with constant folding, in some `Ops`."""

    def __init__(self, ops: Ops):
        self.ops = ops

    def const(self, value: float) -> _X:
        return _X(None, value)

    def value(self, x: _X) -> Value:
        """The value of `x` in `ops`, emitting a constant only where one is used."""
        return self.ops.const(x.const) if x.v is None else x.v

    def op(self, name: str, *args: _X) -> _X:
        consts = [a.const for a in args]
        if all(c is not None for c in consts):
            return self.const(float(NUMERIC.call(name, *consts)))
        if name == "arith.addf" and 0.0 in consts:
            return args[1 - consts.index(0.0)]
        if name == "arith.mulf" and 1.0 in consts:
            return args[1 - consts.index(1.0)]
        if name == "arith.mulf" and 0.0 in consts:
            return self.const(0.0)
        return _X(self.ops.call(name, *(self.value(a) for a in args)))

    def add(self, p: _X, q: _X) -> _X:
        return self.op("arith.addf", p, q)

    def mul(self, p: _X, q: _X) -> _X:
        return self.op("arith.mulf", p, q)


def _map_form(step: StepFunction, alg: _MapAlgebra, element: Sequence[Value]) -> _Form:
    """Derive the map `s ↦ f(s, x)` of a scalar-state step symbolically, in `alg`'s ops."""
    ops = alg.ops
    s_arg, *x_args = step.op.args
    env: dict[SSAValue, _Form] = {s_arg: _Affine(alg.const(1.0), alg.const(0.0))}
    env |= {a: _X(v) for a, v in zip(x_args, element, strict=True)}
    for op in step.op.body.block.ops:
        if isinstance(op, func.ReturnOp):
            return env[op.arguments[0]]
        args = [env[o] for o in op.operands]
        if isinstance(op, arith.ConstantOp):
            env[op.result] = alg.const(float(op.value.value.data))  # type: ignore[union-attr]
        elif all(isinstance(a, _X) for a in args):
            if isinstance(op, arith.CmpfOp):
                predicate = PREDICATES[op.predicate.value.data]
                lhs, rhs = (alg.value(a) for a in args)  # type: ignore[arg-type]
                env[op.result] = _X(ops.cmp(predicate, lhs, rhs))
            elif isinstance(op, arith.SelectOp):
                env[op.result] = _X(ops.select(*(alg.value(a) for a in args)))  # type: ignore[arg-type]
            else:
                env[op.results[0]] = alg.op(op.name, *args)  # type: ignore[arg-type]
        else:
            env[op.results[0]] = _map_op(alg, op.name, args)
    raise StepError(f"step function @{step.name} has no func.return")


def _map_op(alg: _MapAlgebra, name: str, args: list[_Form]) -> _Form:
    """Apply op `name` to forms of which at least one depends on the state."""
    neg1 = alg.const(-1.0)
    if name == "arith.negf":
        return _map_op(alg, "arith.mulf", [args[0], neg1])
    if name == "arith.subf":
        rhs = args[1]
        negated = (
            alg.op("arith.mulf", rhs, neg1)
            if isinstance(rhs, _X)
            else _map_op(alg, "arith.mulf", [rhs, neg1])
        )
        return _map_op(alg, "arith.addf", [args[0], negated])
    if name == "arith.divf" and isinstance(args[1], _X):
        return _map_op(alg, "arith.mulf", [args[0], alg.op("arith.divf", alg.const(1.0), args[1])])
    if name in ("arith.addf", "arith.mulf", "arith.maximumf", "arith.maxnumf"):
        p, q = args if not isinstance(args[0], _X) else args[::-1]
        if name == "arith.addf" and isinstance(p, _Affine) and isinstance(q, _Affine):
            return _Affine(alg.add(p.c, q.c), alg.add(p.d, q.d))
        if name == "arith.addf" and isinstance(q, _X):
            if isinstance(p, _Affine):
                return _Affine(p.c, alg.add(p.d, q))
            if isinstance(p, _MaxAffine):
                return _MaxAffine(p.c, alg.add(p.d, q), alg.add(p.e, q))
        if name == "arith.mulf" and isinstance(q, _X):
            if isinstance(p, _Affine):
                return _Affine(alg.mul(p.c, q), alg.mul(p.d, q))
            if isinstance(p, _MaxAffine) and q.const is not None and q.const >= 0.0:
                return _MaxAffine(alg.mul(p.c, q), alg.mul(p.d, q), alg.mul(p.e, q))
        if name != "arith.addf" and name != "arith.mulf" and isinstance(q, _X):
            if isinstance(p, _Affine) and p.c.const is not None and p.c.const >= 0.0:
                return _MaxAffine(p.c, p.d, q)
            if isinstance(p, _MaxAffine):
                return _MaxAffine(p.c, p.d, alg.op("arith.maximumf", p.e, q))
    raise NotInFamily(f"{name} of a state-dependent value leaves the affine and max-affine maps")


def _affine_family(step: StepFunction) -> Candidate:
    """Composition of affine maps `s ↦ p·s + q`."""

    def lift(ops: Ops, x: list[Value]) -> list[Value]:
        alg = _MapAlgebra(ops)
        form = _map_form(step, alg, x)
        assert isinstance(form, _Affine)
        return [alg.value(form.c), alg.value(form.d)]

    def merge(ops: Ops, a: list[Value], b: list[Value]) -> list[Value]:
        p = ops.call("arith.mulf", a[0], b[0])
        return [p, ops.call("arith.addf", ops.call("arith.mulf", b[0], a[1]), b[1])]

    def apply(ops: Ops, p: list[Value]) -> list[Value]:
        return [ops.call("arith.addf", ops.call("arith.mulf", p[0], ops.const(step.init[0])), p[1])]

    p, q = lift(FORMULA, _element_names(step))
    return Candidate(
        f"composition of affine maps s ↦ p·s + q: each element gives p = {unwrapped(p)}, "
        f"q = {unwrapped(q)}; (p_a, q_a) then (p_b, q_b) = (p_a·p_b, p_b·q_a + q_b), identity "
        f"(1, 0); the state is p·{show_value(step.init[0])} + q",
        merge,
        ("p", "q"),
        lift,
        apply,
        (1.0, 0.0),
    )


def _max_affine_family(step: StepFunction) -> Candidate:
    """Composition of max-affine maps `s ↦ max(c·s + d, e)` with constant `c ≥ 0`."""

    def lift(ops: Ops, x: list[Value]) -> list[Value]:
        alg = _MapAlgebra(ops)
        form = _map_form(step, alg, x)
        assert isinstance(form, _MaxAffine)
        return [alg.value(form.c), alg.value(form.d), alg.value(form.e)]

    def merge(ops: Ops, a: list[Value], b: list[Value]) -> list[Value]:
        c = ops.call("arith.mulf", a[0], b[0])
        d = ops.call("arith.addf", ops.call("arith.mulf", b[0], a[1]), b[1])
        shifted = ops.call("arith.addf", ops.call("arith.mulf", b[0], a[2]), b[1])
        return [c, d, ops.call("arith.maxnumf", shifted, b[2])]

    def apply(ops: Ops, p: list[Value]) -> list[Value]:
        line = ops.call("arith.addf", ops.call("arith.mulf", p[0], ops.const(step.init[0])), p[1])
        return [ops.call("arith.maxnumf", line, p[2])]

    c, d, e = lift(FORMULA, _element_names(step))
    return Candidate(
        f"composition of max-affine maps s ↦ max(c·s + d, e) (c ≥ 0): each element gives "
        f"c = {unwrapped(c)}, d = {unwrapped(d)}, e = {unwrapped(e)}; (c_a, d_a, e_a) then "
        "(c_b, d_b, e_b) = (c_a·c_b, c_b·d_a + d_b, maxnum(c_b·e_a + d_b, e_b)), identity "
        f"(1, 0, -inf); the state is maxnum(c·{show_value(step.init[0])} + d, e)",
        merge,
        ("c", "d", "e"),
        lift,
        apply,
        (1.0, 0.0, -math.inf),
    )


def _element_names(step: StepFunction) -> list[str]:
    args = step.op.args[step.n_state :]
    return [a.name_hint or f"x{i}" for i, a in enumerate(args)]


def _state_candidates(step: StepFunction) -> list[Candidate]:
    """The merge templates on the states themselves that apply to this step's shape."""
    found = [c for c in (_componentwise(step), _step_itself(step)) if c is not None]
    if step.n_state >= 2:
        found += [_rescaling(step, k) for k in range(step.n_state)]
    if step.n_state == 3:
        found += [_welford(step, roles) for roles in itertools.permutations(range(3))]
    return found


def _map_candidate(step: StepFunction) -> Candidate:
    """The map-family candidate of a scalar-state step; raises `NotInFamily` when none."""
    if step.n_state != 1:
        raise NotInFamily("map families are only derived for a scalar state")
    form = _map_form(step, _MapAlgebra(NUMERIC), [np.float64(0.5)] * step.n_elem)
    if isinstance(form, _X):
        raise NotInFamily("the step ignores the state")
    return _affine_family(step) if isinstance(form, _Affine) else _max_affine_family(step)


def _no_merge_witness(step: StepFunction) -> Counterexample | None:
    """Find chunks A, B, B' with fold(B) = fold(B') but fold(A++B) ≠ fold(A++B').

    Such a triple proves that no function of (fold(A), fold(B)) gives fold(A++B). The search
    enumerates short chunks of small integers and groups them by their fold.
    """
    values = (-2.0, -1.0, 0.0, 1.0, 2.0)
    elements = list(itertools.product(values, repeat=step.n_elem))[:125]
    chunks: list[Chunk] = [[e] for e in elements]
    chunks += [[e, f] for e, f in itertools.product(elements, repeat=2)][:1500]
    groups: dict[State, list[Chunk]] = {}
    for chunk in chunks:
        state = step.final(chunk)
        if all(math.isfinite(v) for v in state):
            groups.setdefault(tuple(float(v) for v in state), []).append(chunk)
    for a in chunks[:60]:
        start = step.final(a)
        for fold_b, group in groups.items():
            first = step.final(group[0], start)
            for other in group[1:]:
                second = step.final(other, start)
                scales = _scales([first, second])
                if all(map(math.isfinite, first + second)) and not _agrees(first, second, scales):
                    return Counterexample(a, group[0], first, second, other, fold_b)
    return None


def _emit(
    name: str, step: StepFunction, args: list[str], body: Callable[[Ops, list[Value]], list[Value]]
) -> func.FuncOp:
    """Build `func.func @name(args: T...)` whose body `body` emits with `IROps`."""
    block = Block(arg_types=[step.type] * len(args))
    for arg, hint in zip(block.args, args):
        arg.name_hint = hint
    results = body(IROps(block, step.type), list(block.args))
    block.add_op(func.ReturnOp(*results))
    for op in reversed(list(block.ops)):  # drop what the merge does not use (pure ops only)
        if op.results and not any(r.uses for r in op.results):
            block.erase_op(op)
    return func.FuncOp(name, ([step.type] * len(args), [step.type] * len(results)), Region(block))


def _merge_ir(step: StepFunction, candidate: Candidate) -> list[func.FuncOp]:
    """The derived merge as functions: `@f_merge`, plus `@f_lift` and `@f_apply` for maps."""
    names = list(candidate.params) or step.state_names()
    pair = [f"{n}_a" for n in names] + [f"{n}_b" for n in names]
    k = len(names)
    merge = _emit(f"{step.name}_merge", step, pair, lambda o, v: candidate.merge(o, v[:k], v[k:]))
    if candidate.lift is None or candidate.apply is None:
        return [merge]
    merge.attributes["tinyopt.identity"] = ArrayAttr(
        [FloatAttr(v, step.type) for v in candidate.identity]
    )  # type: ignore[arg-type]
    lift, apply = candidate.lift, candidate.apply
    return [
        _emit(f"{step.name}_lift", step, _element_names(step), lift),
        merge,
        _emit(f"{step.name}_apply", step, names, apply),
    ]


def _describe(step: StepFunction, candidate: Candidate) -> str:
    """The candidate's words, with the merge formula for the generic state templates."""
    if candidate.lift is not None or not candidate.description.startswith(("component", "the ")):
        return candidate.description
    names = step.state_names()
    a, b = [f"{n}_a" for n in names], [f"{n}_b" for n in names]
    formulas = candidate.merge(FORMULA, a, b)
    return f"{candidate.description}: " + ", ".join(
        f"{n} = {unwrapped(f)}" for n, f in zip(names, formulas)
    )


def check_associative(step_func: func.FuncOp, seed: int = 0) -> Verdict:
    """Decide whether a step function's fold has a merge, derive it or give a counterexample.

    Raises `StepError` when the function is not a readable step function.
    """
    step = StepFunction.from_func(step_func)
    with np.errstate(all="ignore"):
        failures = []
        for candidate in _state_candidates(step):
            failure = _test(step, candidate, seed)
            if failure is None:
                return Verdict(
                    step.name, True, _describe(step, candidate), _merge_ir(step, candidate)
                )
            failures.append(failure)
        witness = _no_merge_witness(step)
        try:
            candidate = _map_candidate(step)
        except NotInFamily as exc:
            reason = f"the maps s ↦ f(s, x): {exc}"
        else:
            failure = _test(step, candidate, seed)
            if failure is None:
                return Verdict(step.name, True, candidate.description, _merge_ir(step, candidate))
            failures.append(failure)
            reason = f"the {candidate.description.split(':')[0]} does not fit"
        counterexample = witness or (failures[0] if failures else None)
        if witness is None:
            tried = "; ".join(c.description.split(":")[0] for c in _state_candidates(step))
            reason += f"; no merge template fits (tried {tried or 'none'})"
        return Verdict(step.name, False, reason, counterexample=counterexample)


def step_functions(module: ModuleOp) -> list[func.FuncOp]:
    """Return the module's step functions: `func.func`s with a `tinyopt.init` attribute."""
    return [op for op in module.ops if isinstance(op, func.FuncOp) and INIT_ATTR in op.attributes]


@dataclass(frozen=True)
class CheckAssocPass(ModulePass):
    """Annotate step functions with their associativity verdict and add their merges."""

    name: ClassVar[str] = "check-assoc"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        """Set `tinyopt.assoc` on each step function; insert the merge functions after it."""
        for step_func in step_functions(op):
            verdict = check_associative(step_func)
            step_func.attributes[VERDICT_ATTR] = StringAttr(verdict.summary().splitlines()[0])
            block = op.body.block
            anchor: Operation = step_func
            for merge in verdict.merge_ir:
                block.insert_op_after(merge, anchor)
                anchor = merge
