"""Hypothesis strategies for random graph programs and tile knobs, and the checks run on them.

A program is a chain of graph ops over small random shapes (odd sizes, size-1 dims) in one
element type: elementwise unary and binary ops, explicit broadcasts, reductions over random
axes, argmaxes (of arguments), transposes, reshapes, slices, concats, gathers (on i64 ids),
(batched) matmuls, linear, softmax, rms_norm and layer_norm, epilogues that read a value
several times (`y * sigmoid(y) + y`), and masks: selects on an i1 argument, on an integer
input cast to a mask, on a comparison of arguments or on a band of row and column indices
(`graph.iota`), and softmaxes of scores masked with -inf. Masks and argmax's indices are
sometimes returned too (both compared exactly).
Ops with a restricted domain (log, sqrt, rsqrt, reciprocal, exp, div, pow) get operands
through `exp(tanh(x))`, in [1/e, e], so values stay finite in every element type; cos and sin
get `tanh(x)`, so a rounding of their argument stays as small as the argument. reduce_prod
multiplies `exp(tanh(x) · 2^-k)`, 2^k at least the count of elements it multiplies, so its
product stays in [1/e, e]. floor, ceil, round and trunc jump at integers (round at halves),
where a rounding of their operand would move the result by 1: they round an argument, exact
in every element type, and add it to x.
atan2, fmod, remainder and copysign jump too (atan2 by 2π where y changes sign left of the
origin, fmod and remainder at multiples of the divisor, copysign where the sign source changes
sign): they take new arguments, the divisor (sign source) clamped to [0.5, 2] in magnitude by
exact ops, and are added to x.
A mask compares only values every element type holds exactly (arguments, small integers), so
the device and the reference agree on it element for element; a masked softmax keeps column 0
of every row, since a fully masked row is NaN.

`check_loop_level` fuses a program and runs the loop IR with the numpy loop executor against
the graph reference; `check_compiles` lowers it with random knobs and compiles every kernel
with NVRTC. Both return an `Outcome`; a `DiagnosticException` of a pass is a refusal (fine),
any other exception propagates (a bug).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from math import prod

import numpy as np
from hypothesis import strategies as st
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Attribute
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.backends import check
from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import random_inputs, run_reference
from tinyopt.compiler import apply_pipeline, parse

DTYPES = ("f32", "f16", "bf16")
DIMS = (1, 2, 3, 5, 7, 8, 16, 17, 33)
MAX_ELEMENTS = 1024
"""Largest tensor the generator builds, so the scalar loop executor stays fast."""
MAX_INDEX = 256
"""Largest dim a mask indexes with `graph.iota`: bf16 holds integers exactly up to 256."""

SAFE_UNARY = ("neg", "abs", "tanh", "sigmoid", "relu", "gelu", "gelu_tanh", "silu", "erf")
BOUNDED_UNARY = ("cos", "sin", "expm1")
POSITIVE_UNARY = ("exp", "log", "sqrt", "rsqrt", "reciprocal", "log1p")
ROUNDING_UNARY = ("floor", "ceil", "round", "trunc")
SAFE_BINARY = ("add", "sub", "mul", "max", "min")
JUMPING_BINARY = ("atan2", "fmod", "remainder", "copysign")
REDUCTIONS = ("reduce_sum", "reduce_prod", "reduce_max", "reduce_min", "reduce_mean")
PREDICATES = ("eq", "ne", "lt", "le", "gt", "ge")
NEG_INF = {"f32": "0xFF800000", "f16": "0xFC00", "bf16": "0xFF80"}
"""-inf as the bits of a dense literal of each element type (how the printer writes it)."""

Shape = tuple[int, ...]
Value = tuple[str, Shape]


def _t(shape: Shape, dtype: str) -> str:
    return f"tensor<{''.join(f'{d}x' for d in shape)}{dtype}>"


@dataclass
class _Builder:
    """Accumulates a function's arguments, op lines and results; values are (name, shape)."""

    dtype: str
    args: list[Value] = field(default_factory=list)
    lines: list[str] = field(default_factory=list)
    outputs: list[Value] = field(default_factory=list)
    count: int = 0
    elements: dict[str, str] = field(default_factory=dict)
    """Element types of the values not of `dtype`: ids, integer inputs and masks."""

    def element(self, value: Value) -> str:
        return self.elements.get(value[0], self.dtype)

    def type(self, value: Value) -> str:
        return _t(value[1], self.element(value))

    def arg(self, shape: Shape, element: str | None = None) -> Value:
        name = f"%a{len(self.args)}"
        self.args.append((name, shape))
        if element is not None:
            self.elements[name] = element
        return name, shape

    def op(self, text: str, shape: Shape, element: str | None = None) -> Value:
        """Appends `%vN = <text>` and returns the new value (of `element`, else `dtype`)."""
        self.count += 1
        name = f"%v{self.count}"
        self.lines.append(f"  {name} = graph.{text}")
        if element is not None:
            self.elements[name] = element
        return name, shape

    def unary(self, op: str, x: Value) -> Value:
        return self.op(f"{op} {x[0]} : {self.type(x)}", x[1])

    def binary(self, op: str, x: Value, y: Value) -> Value:
        return self.op(f"{op} {x[0]}, {y[0]} : {self.type(x)}", x[1])

    def positive(self, x: Value) -> Value:
        """Returns exp(tanh(x)), a value in [1/e, e]."""
        return self.unary("exp", self.unary("tanh", x))

    def broadcast(self, x: Value, shape: Shape) -> Value:
        element = self.element(x)
        return self.op(f"broadcast {x[0]} : {self.type(x)} -> {_t(shape, element)}", shape, element)

    def cast(self, x: Value, element: str) -> Value:
        return self.op(f"cast {x[0]} : {self.type(x)} -> {_t(x[1], element)}", x[1], element)

    def compare(self, predicate: str, x: Value, y: Value) -> Value:
        text = f'compare {x[0]}, {y[0]} {{predicate = "{predicate}"}}'
        return self.op(f"{text} : {self.type(x)} -> {_t(x[1], 'i1')}", x[1], "i1")

    def select(self, cond: Value, x: Value, y: Value) -> Value:
        return self.op(
            f"select {cond[0]}, {x[0]}, {y[0]} : {self.type(cond)}, {self.type(x)}", x[1]
        )

    def iota(self, shape: Shape, dim: int) -> Value:
        return self.op(f"iota {{dim = {dim}}} : {_t(shape, self.dtype)}", shape)

    def text(self) -> str:
        args = ", ".join(f"{n}: {self.type((n, s))}" for n, s in self.args)
        results = ", ".join(self.type(v) for v in self.outputs)
        names = ", ".join(n for n, _ in self.outputs)
        body = "\n".join(self.lines)
        return (
            f"func.func @fuzz({args}) -> ({results}) {{\n{body}\n"
            f"  func.return {names} : {results}\n}}\n"
        )


def _shape(draw: st.DrawFn, max_rank: int = 3) -> Shape:
    rank = draw(st.integers(1, max_rank))
    dims = tuple(draw(st.sampled_from(DIMS)) for _ in range(rank))
    while prod(dims) > MAX_ELEMENTS:
        dims = dims[1:]
    return dims


def _unary(draw: st.DrawFn, b: _Builder, x: Value) -> Value:
    op = draw(st.sampled_from(SAFE_UNARY + BOUNDED_UNARY + POSITIVE_UNARY + ROUNDING_UNARY))
    if op in ROUNDING_UNARY:
        return b.binary("add", x, b.unary(op, _broadcast_operand(draw, b, x[1])))
    if op in POSITIVE_UNARY:
        x = b.positive(x)
    elif op in BOUNDED_UNARY:
        x = b.unary("tanh", x)
    return b.unary(op, x)


def _broadcast_operand(
    draw: st.DrawFn, b: _Builder, shape: Shape, element: str | None = None
) -> Value:
    """Returns a new argument of `shape`, or a smaller one explicitly broadcast to it."""
    if not draw(st.booleans()):
        return b.arg(shape, element)
    keep = draw(st.integers(0, len(shape)))
    small = tuple(1 if draw(st.booleans()) else d for d in shape[len(shape) - keep :])
    if small == shape:
        return b.arg(shape, element)
    return b.broadcast(b.arg(small, element), shape)


def _constant(draw: st.DrawFn, b: _Builder, literal: str, shape: Shape) -> Value:
    """Returns the constant `literal` (a dense element) broadcast to `shape` from rank 0..n."""
    ones = (1,) * draw(st.integers(0, len(shape)))
    value = b.op(f"constant dense<{literal}> : {_t(ones, b.dtype)}", ones)
    return value if ones == shape else b.broadcast(value, shape)


def _binary(draw: st.DrawFn, b: _Builder, x: Value) -> Value:
    op = draw(st.sampled_from((*SAFE_BINARY, "div", "pow", *JUMPING_BINARY)))
    if op in JUMPING_BINARY:
        return b.binary("add", x, _jumping_binary(draw, b, op, x[1]))
    y = x if draw(st.integers(0, 4)) == 0 else _broadcast_operand(draw, b, x[1])
    if draw(st.booleans()):
        x, y = y, x
    if op == "div":
        return b.binary(op, x, b.positive(y))
    if op == "pow":
        return b.binary(op, b.positive(x), b.unary("tanh", y))
    return b.binary(op, x, y)


def _jumping_binary(draw: st.DrawFn, b: _Builder, op: str, shape: Shape) -> Value:
    """Returns `op` of two new arguments, exact in every element type, so that no rounding
    moves an operand across a jump; fmod's and remainder's divisor (copysign's sign source) is
    `±min(max(|d|, 0.5), 2)` (exact too), so it is never near 0."""
    lhs, rhs = _broadcast_operand(draw, b, shape), _broadcast_operand(draw, b, shape)
    if op != "atan2":
        at_least_half = b.binary("max", b.unary("abs", rhs), _constant(draw, b, "0.5", shape))
        rhs = b.binary("min", at_least_half, _constant(draw, b, "2.0", shape))
        if draw(st.booleans()):
            rhs = b.unary("neg", rhs)
    return b.binary(op, lhs, rhs)


def _reduce(draw: st.DrawFn, b: _Builder, x: Value) -> Value:
    rank = len(x[1])
    dims = sorted(draw(st.sets(st.integers(0, rank - 1), min_size=1, max_size=rank)))
    keepdim = draw(st.booleans())
    if not keepdim and len(dims) == rank:
        keepdim = True  # a rank-0 result has no loop to fuse into; keep a 1-element tensor
    shape = tuple(1 if i in dims else d for i, d in enumerate(x[1]) if keepdim or i not in dims)
    op = draw(st.sampled_from(REDUCTIONS))
    if op == "reduce_prod":
        x = _near_one(draw, b, x, prod(x[1][i] for i in dims))
    attrs = f"dims = array<i64: {', '.join(map(str, dims))}>, keepdim = {str(keepdim).lower()}"
    r = b.op(f"{op} {x[0]} {{{attrs}}} : {_t(x[1], b.dtype)} -> {_t(shape, b.dtype)}", shape)
    if keepdim and draw(st.booleans()):
        return b.binary("sub", x, b.broadcast(r, x[1]))
    return r


def _near_one(draw: st.DrawFn, b: _Builder, x: Value, count: int) -> Value:
    """Returns exp(tanh(x) · 2^-k) with 2^k ≥ `count` (exact in every element type): a product
    of `count` of its elements is exp of at most 1 in magnitude, so it stays in [1/e, e]."""
    scale = _constant(draw, b, repr(2.0 ** -(count - 1).bit_length()), x[1])
    return b.unary("exp", b.binary("mul", b.unary("tanh", x), scale))


def _argmax(draw: st.DrawFn, b: _Builder, x: Value) -> Value:
    """The index of the largest element along a random dim of a new argument of `x`'s shape
    (an argument's values are exact in every element type, so the device and the reference
    agree on every tie), as i32 or i64 and sometimes returned; its cast to the element type
    (a small integer, exact) continues."""
    a = b.arg(x[1])
    rank = len(x[1])
    dim = draw(st.integers(0, rank - 1))
    keepdim = rank == 1 or draw(st.booleans())  # a rank-0 result has no loop to fuse into
    shape = tuple(1 if i == dim else d for i, d in enumerate(x[1]) if keepdim or i != dim)
    element = draw(st.sampled_from(("i32", "i64")))
    attrs = f"dim = {dim} : i64" + (", keepdim = true" if keepdim else "")
    text = f"argmax {a[0]} {{{attrs}}} : {b.type(a)} -> {_t(shape, element)}"
    index = b.op(text, shape, element)
    if draw(st.integers(0, 3)) == 0:
        b.outputs.append(index)
    return b.cast(index, b.dtype)


def _transpose(draw: st.DrawFn, b: _Builder, x: Value) -> Value:
    perm = draw(st.permutations(range(len(x[1]))))
    shape = tuple(x[1][p] for p in perm)
    attrs = f"perm = array<i64: {', '.join(map(str, perm))}>"
    return b.op(
        f"transpose {x[0]} {{{attrs}}} : {_t(x[1], b.dtype)} -> {_t(shape, b.dtype)}", shape
    )


def _reshape(draw: st.DrawFn, b: _Builder, x: Value) -> Value:
    dims = list(x[1])
    move = draw(st.sampled_from(("merge", "split", "insert1", "flatten")))
    if move == "merge" and len(dims) >= 2:
        i = draw(st.integers(0, len(dims) - 2))
        dims[i : i + 2] = [dims[i] * dims[i + 1]]
    elif move == "split":
        i = draw(st.integers(0, len(dims) - 1))
        factors = [f for f in range(1, dims[i] + 1) if dims[i] % f == 0]
        f = draw(st.sampled_from(factors))
        dims[i : i + 1] = [f, dims[i] // f]
    elif move == "insert1" and len(dims) < 4:
        dims.insert(draw(st.integers(0, len(dims))), 1)
    else:
        dims = [prod(dims)]
    shape = tuple(dims)
    return b.op(f"reshape {x[0]} : {_t(x[1], b.dtype)} -> {_t(shape, b.dtype)}", shape)


def _matmul(draw: st.DrawFn, b: _Builder, x: Value) -> Value:
    """A matmul or linear layer of `x`, followed by an epilogue a third of the time."""
    y = _contraction(draw, b, x)
    return _epilogue(draw, b, y) if draw(st.integers(0, 2)) == 0 else y


def _contraction(draw: st.DrawFn, b: _Builder, x: Value) -> Value:
    shape = x[1]
    if len(shape) not in (2, 3):
        shape = (1, prod(shape)) if len(shape) == 1 else (prod(shape[:-1]), shape[-1])
        x = b.op(f"reshape {x[0]} : {_t(x[1], b.dtype)} -> {_t(shape, b.dtype)}", shape)
    n = draw(st.sampled_from(DIMS))
    while prod(shape[:-1]) * n > MAX_ELEMENTS:
        n = 1
    if len(shape) == 2 and draw(st.booleans()):
        w = b.arg((n, shape[-1]))
        bias = b.arg((n,))
        out = (*shape[:-1], n)
        types = f"{_t(shape, b.dtype)}, {_t(w[1], b.dtype)}, {_t(bias[1], b.dtype)}"
        text = f"linear {x[0]}, {w[0]}, {bias[0]} : ({types}) -> {_t(out, b.dtype)}"
        return b.op(text, out)
    w = b.arg((*shape[:-2], shape[-1], n))
    out = (*shape[:-1], n)
    types = f"{_t(shape, b.dtype)}, {_t(w[1], b.dtype)}"
    return b.op(f"matmul {x[0]}, {w[0]} : ({types}) -> {_t(out, b.dtype)}", out)


def _slice(draw: st.DrawFn, b: _Builder, x: Value) -> Value:
    dim = draw(st.integers(0, len(x[1]) - 1))
    if x[1][dim] == 1:
        return x
    start = draw(st.integers(0, x[1][dim] - 1))
    step = draw(st.sampled_from((1, 1, 2, 3)))
    size = draw(st.integers(1, len(range(start, x[1][dim], step))))
    shape = (*x[1][:dim], size, *x[1][dim + 1 :])
    attrs = f"dim = {dim} : i64, start = {start} : i64, step = {step} : i64"
    return b.op(f"slice {x[0]} {{{attrs}}} : {_t(x[1], b.dtype)} -> {_t(shape, b.dtype)}", shape)


def _concat(draw: st.DrawFn, b: _Builder, x: Value) -> Value:
    dim = draw(st.integers(0, len(x[1]) - 1))
    other = b.arg((*x[1][:dim], draw(st.sampled_from((1, 2, 3, 5))), *x[1][dim + 1 :]))
    parts = draw(st.sampled_from(([x, other], [other, x], [x, other, x])))
    shape = (*x[1][:dim], sum(p[1][dim] for p in parts), *x[1][dim + 1 :])
    if prod(shape) > MAX_ELEMENTS:
        return x
    types = ", ".join(_t(p[1], b.dtype) for p in parts)
    names = ", ".join(p[0] for p in parts)
    text = f"concat {names} {{dim = {dim} : i64}} : ({types}) -> {_t(shape, b.dtype)}"
    return b.op(text, shape)


def _gather(draw: st.DrawFn, b: _Builder, x: Value) -> Value:
    """Reads rows of `x` (the table) at a new argument of i64 ids."""
    ids = b.arg(_shape(draw, max_rank=2), "i64")
    shape = (*ids[1], *x[1][1:])
    if prod(shape) > MAX_ELEMENTS:
        return x
    types = f"{_t(x[1], b.dtype)}, {_t(ids[1], 'i64')}"
    return b.op(f"gather {x[0]}, {ids[0]} : ({types}) -> {_t(shape, b.dtype)}", shape)


def _composite(draw: st.DrawFn, b: _Builder, x: Value) -> Value:
    t = _t(x[1], b.dtype)
    op = draw(st.sampled_from(("softmax", "rms_norm", "layer_norm")))
    if op == "layer_norm" and x[1][-1] == 1:
        # x − mean(x) is 0 over one element, and rounding the mean to bf16/f16 in one kernel
        # but not the x it is subtracted from is amplified by 1/√eps: not a compiler error.
        op = "rms_norm"
    if op == "softmax":
        return b.op(f"softmax {x[0]} {{dim = {len(x[1]) - 1} : i64}} : {t}", x[1])
    w = b.arg(x[1][-1:])
    wt = _t(w[1], b.dtype)
    if op == "rms_norm":
        return b.op(f"rms_norm {x[0]}, {w[0]} {{eps = 1.0e-06 : f32}} : ({t}, {wt}) -> {t}", x[1])
    bias = b.arg(x[1][-1:])
    text = f"layer_norm {x[0]}, {w[0]}, {bias[0]} {{eps = 1.0e-05 : f32}} : ({t}, {wt}, {wt})"
    return b.op(f"{text} -> {t}", x[1])


def _attention(draw: st.DrawFn, b: _Builder, x: Value) -> Value:
    """`graph.attention` on new arguments, in the forms of decode and chunked prefill: query
    heads a multiple of the key/value heads (GQA), Sq <= Skv, a value size of its own, a
    boolean or additive mask broadcast over some dims, causal or not. The running value `x`
    becomes an output (unless it is an argument); the attention's result continues."""
    if x[0] not in {name for name, _ in b.args}:
        b.outputs.append(x)
    batch, kv, group = draw(st.integers(1, 2)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
    heads, skv = kv * group, draw(st.integers(1, 16))
    sq, d, dv = (
        draw(st.integers(1, skv)),
        draw(st.sampled_from((4, 8))),
        draw(st.sampled_from((4, 8))),
    )
    q, k, v = b.arg((batch, heads, sq, d)), b.arg((batch, kv, skv, d)), b.arg((batch, kv, skv, dv))
    operands, types = [q, k, v], [b.type(q), b.type(k), b.type(v)]
    kind = draw(st.sampled_from(("none", "i1", "additive")))
    if kind != "none":
        full = (batch, heads, sq, skv)
        shape = tuple(n if draw(st.booleans()) else 1 for n in full)
        mask = b.arg(shape, "i1" if kind == "i1" else None)
        operands.append(mask)
        types.append(b.type(mask))
    causal = ", causal = true" if draw(st.booleans()) else ""
    out = (batch, heads, sq, dv)
    names = ", ".join(name for name, _ in operands)
    text = f"attention {names} {{scale = 0.35 : f32{causal}}} : ({', '.join(types)})"
    return b.op(f"{text} -> {_t(out, b.dtype)}", out)


def _epilogue(draw: st.DrawFn, b: _Builder, x: Value) -> Value:
    """Reads `x` two or three times, as a GEMM epilogue does: `x * sigmoid(x) + x`."""
    y = b.binary(draw(st.sampled_from(SAFE_BINARY)), x, _unary(draw, b, x))
    if draw(st.booleans()):
        y = b.binary(draw(st.sampled_from(("add", "sub", "mul"))), y, x)
    return y


def _band(draw: st.DrawFn, b: _Builder, shape: Shape) -> tuple[Value, Value] | None:
    """Returns (column index, column index − row index) over `shape`, the iotas of a causal
    mask; the rows are a random dim before the last. None where no dim can be the rows or an
    index would not be exact (`MAX_INDEX`)."""
    rows = [d for d in range(len(shape) - 1) if shape[d] <= MAX_INDEX]
    if not rows or shape[-1] > MAX_INDEX:
        return None
    row = draw(st.sampled_from([d for d in rows if shape[d] > 1] or rows))
    cols = b.iota(shape, len(shape) - 1)
    return cols, b.binary("sub", cols, b.iota(shape, row))


def _mask(draw: st.DrawFn, b: _Builder, shape: Shape) -> Value:
    """Returns an i1 value of `shape`: an i1 argument, an integer input cast to a mask
    (`ids != 0`), a comparison of arguments, or a band of row and column indices."""
    kind = draw(st.sampled_from(("argument", "integers", "compare", "band")))
    band = _band(draw, b, shape) if kind == "band" else None
    if band is not None:
        k = draw(st.integers(-2, 2))
        return b.compare(
            draw(st.sampled_from(PREDICATES)), band[1], _constant(draw, b, f"{k}.0", shape)
        )
    if kind == "argument":
        return _broadcast_operand(draw, b, shape, "i1")
    if kind == "integers":
        ids = _broadcast_operand(draw, b, shape, draw(st.sampled_from(("i32", "i64"))))
        return b.cast(b.cast(ids, b.dtype), "i1")
    predicate = draw(st.sampled_from(PREDICATES))
    if predicate in ("eq", "ne"):  # relu(x) == 0 holds for half the elements
        return b.compare(predicate, b.unary("relu", b.arg(shape)), _constant(draw, b, "0.0", shape))
    return b.compare(predicate, b.arg(shape), _broadcast_operand(draw, b, shape))


def _select(draw: st.DrawFn, b: _Builder, x: Value) -> Value:
    """Picks between `x` and another value by a mask (`torch.where`, `masked_fill`), or
    multiplies `x` by the mask cast to 0 and 1; sometimes returns the mask too."""
    mask = _mask(draw, b, x[1])
    if draw(st.integers(0, 3)) == 0:
        b.outputs.append(mask)
    other = draw(st.sampled_from(("argument", "constant", "unary", "multiply")))
    if other == "multiply":
        return b.binary("mul", x, b.cast(mask, b.dtype))
    if other == "argument":
        y = _broadcast_operand(draw, b, x[1])
    elif other == "constant":
        y = _constant(draw, b, draw(st.sampled_from(("0.0", "-1.5", "1.0"))), x[1])
    else:
        y = _unary(draw, b, x)
    return b.select(mask, *draw(st.permutations((x, y))))


def _keep(draw: st.DrawFn, b: _Builder, shape: Shape) -> Value:
    """Returns a mask that keeps column 0 of every row (the last dim): a causal band
    `col - row <= k` (k >= 0), or any mask or'ed with `col == 0` through casts to float."""
    band = _band(draw, b, shape) if draw(st.booleans()) else None
    if band is not None:
        k = draw(st.integers(0, 2))
        predicate, strict = draw(st.sampled_from((("le", "lt"), ("ge", "gt"))))
        bound = _constant(draw, b, f"{k}.0", shape)
        if k > 0 and draw(st.booleans()):
            predicate = strict
        operands = (band[1], bound) if predicate in ("le", "lt") else (bound, band[1])
        return b.compare(predicate, *operands)
    first = b.compare("eq", b.iota(shape, len(shape) - 1), _constant(draw, b, "0.0", shape))
    mask = _mask(draw, b, shape)
    either = b.binary("max", b.cast(mask, b.dtype), b.cast(first, b.dtype))
    return b.cast(either, "i1")


def _masked_softmax(draw: st.DrawFn, b: _Builder, x: Value) -> Value:
    """Softmax over the last dim of `x` with masked elements filled with -inf (or -1e4), by a
    select (`masked_fill`) or by adding `select(keep, 0, -inf)` (an additive mask)."""
    keep = _keep(draw, b, x[1])
    fill = _constant(draw, b, draw(st.sampled_from((NEG_INF[b.dtype], "-1.0e+04"))), x[1])
    if draw(st.booleans()):
        scores = b.select(keep, x, fill)
    else:
        scores = b.binary("add", x, b.select(keep, _constant(draw, b, "0.0", x[1]), fill))
    return b.op(f"softmax {scores[0]} {{dim = {len(x[1]) - 1} : i64}} : {b.type(x)}", x[1])


STEPS = {
    "unary": _unary,
    "binary": _binary,
    "reduce": _reduce,
    "argmax": _argmax,
    "transpose": _transpose,
    "reshape": _reshape,
    "slice": _slice,
    "concat": _concat,
    "gather": _gather,
    "matmul": _matmul,
    "composite": _composite,
    "epilogue": _epilogue,
    "select": _select,
    "masked_softmax": _masked_softmax,
    "attention": _attention,
}


@st.composite
def programs(draw: st.DrawFn, max_steps: int = 5, gather: bool = True) -> str:
    """Draws the MLIR text of a random graph function `@fuzz` (with gathers if `gather`)."""
    b = _Builder(draw(st.sampled_from(DTYPES)))
    x = b.arg(_shape(draw))
    steps = sorted(name for name in STEPS if gather or name != "gather")
    for _ in range(draw(st.integers(1, max_steps))):
        x = STEPS[draw(st.sampled_from(steps))](draw, b, x)
        if draw(st.integers(0, 5)) == 0:
            b.outputs.append(x)
    if not b.outputs or b.outputs[-1] is not x:
        b.outputs.append(x)
    return b.text()


KNOB_VALUES: dict[str, tuple[object, ...]] = {
    "schedule": ("auto", "sequential"),
    "threads": (32, 64, 128, 256, 512, 1024),
    "vec": (1, 2, 4, 8, 16),
    "rows": (1, 2, 4, 8, 32),
    "cache": (0, 1),
    "bm": (16, 32, 64, 128, 256),
    "bn": (16, 32, 64, 128, 256),
    "bk": (4, 8, 16, 32, 64),
    "tm": (1, 2, 4, 8, 16),
    "tn": (1, 2, 4, 8, 16),
    "pad": (0, 4, 8),
    "stages": (1, 2, 3, 4),
    "split": (1, 2),
    "group": (0, 2, 8),
    "minblocks": (1, 2),
    "splitk": (1, 2, 4, 8),
    "mma": ("none", "sync", "wgmma"),
    "ws": (0, 1),
    "persistent": ("auto", 0, 1),
}
"""Values the fuzzer tries for each tile knob (within the domains of docs/knobs.md)."""


@st.composite
def pipelines(draw: st.DrawFn) -> str:
    """Draws a pipeline `[decompose,]fuse[,rewrites],tile{random knobs},to-cuda` (rewrites:
    flash-attention, online-softmax, welford)."""
    names = sorted(draw(st.sets(st.sampled_from(sorted(KNOB_VALUES)), max_size=5)))
    knobs = " ".join(f"{n}={draw(st.sampled_from(KNOB_VALUES[n]))}" for n in names)
    passes = ["decompose"] if draw(st.booleans()) else []
    passes.append("fuse")
    passes += [p for p in ("flash-attention", "online-softmax", "welford") if draw(st.booleans())]
    passes.append(f"tile{{{knobs}}}" if knobs else "tile")
    return ",".join([*passes, "to-cuda"])


@dataclass(frozen=True)
class Outcome:
    """The result of one check: `refused` holds a pass's diagnostic, else the check passed."""

    refused: str | None = None


def relative_error(out: np.ndarray, ref: np.ndarray) -> float:
    """Returns ‖out − ref‖ / max(‖ref‖, √size): relative, but absolute for outputs near zero.

    Inputs are standard normal, so √size is the norm of an output of unit magnitude; the floor
    keeps cancellations such as `sum(x − mean(x))`, exactly 0 in float64 and ~1e-8 in f32,
    from counting as errors.
    """
    scale = max(float(np.linalg.norm(ref)), float(np.sqrt(ref.size)))
    return float(np.linalg.norm(np.asarray(out, np.float64) - ref)) / scale


def output_error(out: np.ndarray, ref: np.ndarray, rounded: np.ndarray) -> float:
    """Returns the error of one output: 0 or inf for a mask or integers (argmax's), which
    must match exactly, else the smaller `relative_error` against the float64 reference and
    against `rounded`."""
    if ref.dtype == np.bool_ or ref.dtype.kind in "iu":
        return 0.0 if np.array_equal(out, ref) else float("inf")
    return min(relative_error(out, ref), relative_error(out, np.asarray(rounded, np.float64)))


def allowed_error(ref: np.ndarray, rounded: np.ndarray, tolerance: float) -> float:
    """The error an output may have: its dtype's `tolerance`, or twice the error of the
    reference rounded at each op where that is larger: a program ill-conditioned in its dtype
    (a bf16 softmax of x² − Σx², whose differences bf16 cannot hold next to Σx² ≈ 455: the
    rounded reference 0.44 from float64, H200 fuzz seed 1 case 1238, 2026-12-03) has no answer
    closer than that, and a kernel keeping an intermediate in f32 lands elsewhere within it."""
    if ref.dtype == np.bool_ or ref.dtype.kind in "iu":
        return 0.0
    return max(tolerance, 2 * relative_error(np.asarray(rounded, np.float64), ref))


def tolerance(program: ModuleOp) -> float:
    """Returns the loosest tolerance among the float outputs of `program` (a mask has none)."""
    outputs = check.graph_function(program).function_type.outputs
    types = [check.element_type(t) for t in outputs]
    return max((check.TOLERANCES[t] for t in types if t in check.TOLERANCES), default=0.0)


def loop_level_error(program: ModuleOp, seed: int = 0) -> float:
    """Fuses `program` and returns the loop executor's largest `output_error` against the
    graph reference (the one rounded to each op's element type included), each over its
    `allowed_error` and times `tolerance(program)` (so that it compares with the latter)."""
    graph = check.graph_function(program)
    fused = apply_pipeline(program.clone(), "fuse")
    inputs = random_inputs(program, seed)
    actual = run_loop_module(fused, graph.sym_name.data, *inputs)
    exact = run_reference(program, *inputs)
    rounded = run_reference(program, *inputs, dtype=None)
    bound = tolerance(program)
    return max(
        output_error(out, ref, low) * bound / max(allowed_error(ref, low, bound), bound)
        for out, ref, low in zip(actual, exact, rounded, strict=True)
    )


def check_loop_level(text: str) -> Outcome:
    """Raises AssertionError when the fused loop IR disagrees with the graph reference.

    `text` is parsed outside the refusal handler: a program that does not verify is a bug.
    """
    program = parse(text)
    try:
        error = loop_level_error(program)
    except DiagnosticException as exc:
        return Outcome(str(exc))
    bound = tolerance(program)
    assert error <= bound, f"loop-level error {error:.3e} > {bound:.0e} (inf: a mask differs)"
    return Outcome()


def check_compiles(text: str, pipeline: str) -> Outcome:
    """Lowers `text` through `pipeline` and compiles every kernel with NVRTC for sm_90a."""
    from tinyopt.backends.cuda.cache import cached_compile

    module = parse(text)  # a program that does not verify is a bug, not a refusal
    try:
        apply_pipeline(module, pipeline)
    except DiagnosticException as exc:
        return Outcome(str(exc))
    for op in module.ops:
        if op.name == "tile.cuda_kernel":
            cached_compile(op.properties["source"].data, op.properties["sym_name"].data)
    return Outcome()


def check_on_cpu(text: str, pipeline: str, seed: int = 0) -> Outcome:
    """Lowers `text` through `pipeline` and runs its kernels on the CPU emulation
    (tests/cpu_cuda.h, tests/cpu_wgmma.py); raises AssertionError where an output is further
    from the float64 reference (or the one rounded at each op) than its dtype allows, as
    run_gpu.py checks them on a GPU."""
    from cpu_wgmma import run_program_on_cpu

    program = parse(text)  # a program that does not verify is a bug, not a refusal
    graph = check.graph_function(program).clone()
    try:
        module = apply_pipeline(program, pipeline)
    except DiagnosticException as exc:
        return Outcome(str(exc))
    inputs, arrays = check.device_inputs(graph, seed)
    arrays = [a.view(np.uint16) if a.dtype == np.float16 else a for a in arrays]
    outputs = run_program_on_cpu(module, arrays)
    references = run_reference(graph, *inputs)
    rounded = run_reference(graph, *inputs, dtype=None)
    types = [check.element_type(t) for t in graph.function_type.outputs]
    outputs = [o.view(np.float16) if str(t) == "f16" else o for o, t in zip(outputs, types)]
    problems = output_problems(outputs, references, rounded, types)
    assert not problems, "; ".join(problems)
    return Outcome()


def output_problems(
    outputs: Sequence[np.ndarray],
    references: Sequence[np.ndarray],
    rounded: Sequence[np.ndarray],
    types: Sequence[Attribute],
) -> list[str]:
    """Why each output of a run (in storage form) is wrong, if it is: a mask or integers that
    differ, or a float output further from the references than its `allowed_error`."""
    problems = []
    for i, (out, ref, low, element) in enumerate(
        zip(outputs, references, rounded, types, strict=True)
    ):
        if element not in check.TOLERANCES:  # masks and argmax's indices: exact
            wrong = np.count_nonzero(np.asarray(out) != ref)
            if wrong:
                problems.append(f"output {i}: {wrong} of {ref.size} mask or index elements differ")
            continue
        tolerance = allowed_error(ref, low, check.TOLERANCES[element])
        # A program whose output is a cancellation (x - tanh(x) of a small x, the sum of
        # x - mean(x)) is near 0 in float64 and noise in f32: not a compiler error.
        error = output_error(check.from_storage(out, element), ref, low)
        if not error <= tolerance:
            problems.append(f"output {i}: {error:.3e} > {tolerance:.1e}")
    return problems
