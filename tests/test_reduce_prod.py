"""graph.reduce_prod against numpy's float64 product, at the graph level (the numpy reference)
and at the loop level (fused, run by the loop executor), in f32, f16 and bf16: over one dim,
a leading dim, several dims and all of them, with and without keepdim; zeros keep the sign of
the product, NaN propagates, 0 · inf is NaN, and f16 accumulates in f32 (bf16 is held in f32)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from programs import STORAGE

from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import round_to_bf16, run_reference
from tinyopt.compiler import apply_pipeline, parse

SHAPE = (3, 4, 5)
REDUCTIONS = [((2,), False), ((0,), True), ((0, 2), False), ((1, 2), True), ((0, 1, 2), True)]
"""The dims each result reduces and its keepdim: rows, a leading dim, two dims apart, the
trailing dims, all dims."""

FACTORS = [-2.0, -1.5, -1.25, -1.0, -0.75, -0.5, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0]
"""Values of either sign near 1, exact in f32, f16 and bf16."""

SPECIAL = {
    (0, 0, 1): 0.0,
    (0, 1, 3): -0.0,
    (1, 1, 2): math.nan,
    (2, 2, 0): 0.0,
    (2, 2, 3): math.inf,  # 0 · inf in the row (2, 2, :)
    (2, 3, 4): -math.inf,
}
"""Zeros of both signs, a NaN, and infinities (one meeting a zero) placed in the input."""


RTOL = {"f32": 2.0**-20, "f16": 2.0**-10, "bf16": 2.0**-7}
"""An ulp of each element type, f32's with room for sixty roundings of the running product."""


def _program(dtype: str) -> str:
    """A function of one tensor returning its products over each of `REDUCTIONS`."""
    x = f"tensor<{'x'.join(map(str, SHAPE))}x{dtype}>"
    lines, types = [], []
    for i, (dims, keepdim) in enumerate(REDUCTIONS):
        shape = [1 if d in dims else n for d, n in enumerate(SHAPE) if keepdim or d not in dims]
        types.append(f"tensor<{''.join(f'{n}x' for n in shape)}{dtype}>")
        attrs = f"dims = array<i64: {', '.join(map(str, dims))}>, keepdim = {str(keepdim).lower()}"
        lines.append(f"  %p{i} = graph.reduce_prod %x {{{attrs}}} : {x} -> {types[-1]}")
    results = ", ".join(f"%p{i}" for i in range(len(REDUCTIONS)))
    signature = ", ".join(types)
    body = "\n".join(lines)
    return (
        f"func.func @f(%x: {x}) -> ({signature}) {{\n{body}\n"
        f"  func.return {results} : {signature}\n}}"
    )


def _inputs(dtype: str, special: bool) -> np.ndarray:
    x = np.random.default_rng(0).choice(FACTORS, SHAPE)
    if special:
        for index, value in SPECIAL.items():
            x[index] = value
    stored = x.astype(STORAGE[dtype])
    return round_to_bf16(stored) if dtype == "bf16" else stored


def _run(level: str, dtype: str, x: np.ndarray) -> list[np.ndarray]:
    module = parse(_program(dtype))
    if level == "graph":
        return run_reference(module, x)
    return run_loop_module(apply_pipeline(module, "fuse"), "f", x)


@pytest.mark.parametrize("special", [False, True], ids=["finite", "special"])
@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("level", ["graph", "loop"])
def test_products_match_numpy_in_float64(level: str, dtype: str, special: bool) -> None:
    x = _inputs(dtype, special)
    wide = x.astype(np.float64)
    for (dims, keepdim), got in zip(REDUCTIONS, _run(level, dtype, x), strict=True):
        with np.errstate(invalid="ignore"):  # 0 · inf
            want = np.prod(wide, axis=dims, keepdims=keepdim)
        assert np.all(np.abs(want[np.isfinite(want)]) < 2.0**15), "a product leaves f16's range"
        got = np.asarray(got, np.float64)
        name = f"dims {dims} keepdim {keepdim}"
        np.testing.assert_allclose(got, want, rtol=RTOL[dtype], atol=0, err_msg=name)
        number = ~np.isnan(want)
        assert np.array_equal(np.signbit(got[number]), np.signbit(want[number])), name


def test_special_values_give_what_a_product_gives() -> None:
    x = _inputs("f32", special=True)
    rows, *_, everything = run_reference(parse(_program("f32")), x)
    for row in (0, 0), (0, 1):  # a zero, negative when an odd count of factors is negative
        assert rows[row] == 0.0 and np.signbit(rows[row]) == np.signbit(x[row]).sum() % 2
    assert np.isnan(rows[1, 1]) and np.isnan(rows[2, 2])  # NaN; 0 · inf
    assert np.isinf(rows[2, 3])
    assert np.isnan(everything).all()


@pytest.mark.parametrize("level", ["graph", "loop"])
def test_f16_accumulates_in_f32(level: str) -> None:
    # 256 · 256 overflows f16 (its largest value is 65504); in f32 the product comes back to 1.
    module = parse(
        """func.func @f(%x: tensor<4xf16>) -> tensor<1xf16> {
  %p = graph.reduce_prod %x {dims = array<i64: 0>, keepdim = true} : tensor<4xf16> -> tensor<1xf16>
  func.return %p : tensor<1xf16>
}"""
    )
    x = np.array([256.0, 256.0, 2.0**-8, 2.0**-8], np.float16)
    if level == "graph":
        (got,) = run_reference(module, x, dtype=None)
    else:
        (got,) = run_loop_module(apply_pipeline(module, "fuse"), "f", x)
    assert got.dtype == np.float16 and got.tolist() == [1.0]
