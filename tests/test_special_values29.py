"""Special values where the graph-level reference, the loop-level executor and the CUDA kernels
disagreed: `graph.pow` overflowing or dividing by a zero base with an odd integer exponent
(C's `powf` keeps the base's sign: pow(-0, -1) = -inf), `graph.max`/`min`/`relu` and the max
and min reductions on zeros of both signs (`arith.maximumf`/`minimumf`, printed as PTX
`max.NaN`/`min.NaN`, IEEE 754-2019's maximum and minimum: -0.0 below +0.0), and
`graph.sigmoid`/`silu` in the far negative tail (sigmoid(-40) is 4.2e-18, not 0)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from programs import each_op

from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import run_reference
from tinyopt.compiler import apply_pipeline, parse

LEVELS = ["graph", "loop"]


def _run(level: str, text: str, *xs: np.ndarray) -> list[np.ndarray]:
    if level == "graph":
        return run_reference(parse(text), *xs)
    return run_loop_module(apply_pipeline(parse(text), "fuse"), "f", *xs)


def _assert_same(got: np.ndarray, want: list[float], name: str) -> None:
    """Equal in f32 element for element, NaN where `want` is NaN, zeros and infinities of
    the same sign."""
    got = np.asarray(got, np.float32)
    expected = np.array(want, np.float32)
    np.testing.assert_array_equal(got, expected, err_msg=name)
    number = ~np.isnan(expected)
    assert np.array_equal(np.signbit(got[number]), np.signbit(expected[number])), name


F32_MAX = float(np.finfo(np.float32).max)


@pytest.mark.parametrize("level", LEVELS)
def test_pow_infinities_keep_the_sign_of_a_negative_base_under_an_odd_exponent(
    level: str,
) -> None:
    """C's `powf`: a zero base under a negative odd integer exponent gives an infinity of the
    base's sign, and so does an overflow of a negative base under an odd one; an even or
    non-integer exponent gives +inf (or NaN for a negative base and a non-integer)."""
    pairs = [
        (-0.0, -1.0, -math.inf),
        (-0.0, -3.0, -math.inf),
        (0.0, -3.0, math.inf),
        (-0.0, -2.0, math.inf),
        (-0.0, -0.5, math.inf),
        (-2.0, 1025.0, -math.inf),
        (-2.0, 1024.0, math.inf),
        (-0.5, -1025.0, -math.inf),
        (-F32_MAX, 9.0, -math.inf),
        (-F32_MAX, 10.0, math.inf),
        (-1e-20, -41.0, -math.inf),
        (-8.0, 1.0 / 3.0, math.nan),
    ]
    x = np.array([p[0] for p in pairs], np.float32)
    y = np.array([p[1] for p in pairs], np.float32)
    (got,) = _run(level, each_op(["pow"], 2, "f32", len(pairs)), x, y)
    _assert_same(got, [p[2] for p in pairs], "pow")


@pytest.mark.parametrize("level", LEVELS)
def test_max_and_min_order_minus_zero_below_plus_zero(level: str) -> None:
    """`graph.max`/`min` are `arith.maximumf`/`minimumf` (PTX `max.NaN`/`min.NaN`): of two
    zeros the max is +0.0 and the min -0.0, whichever side each is on; NaN still wins."""
    x = np.array([0.0, -0.0, -0.0, 0.0, math.nan, -0.0], np.float32)
    y = np.array([-0.0, 0.0, -0.0, 0.0, -0.0, math.nan], np.float32)
    mx, mn = _run(level, each_op(["max", "min"], 2, "f32", x.size), x, y)
    _assert_same(mx, [0.0, 0.0, -0.0, 0.0, math.nan, math.nan], "max")
    _assert_same(mn, [-0.0, -0.0, -0.0, 0.0, math.nan, math.nan], "min")


@pytest.mark.parametrize("level", LEVELS)
def test_relu_of_minus_zero_is_plus_zero(level: str) -> None:
    """relu is `maximumf(x, +0.0)`: -0.0 gives +0.0, NaN stays NaN."""
    x = np.array([-0.0, 0.0, -1.0, math.nan, -math.inf, 2.0], np.float32)
    (got,) = _run(level, each_op(["relu"], 1, "f32", x.size), x)
    _assert_same(got, [0.0, 0.0, 0.0, math.nan, 0.0, 2.0], "relu")


@pytest.mark.parametrize("level", LEVELS)
def test_max_and_min_reductions_of_signed_zeros(level: str) -> None:
    """A max reduction over zeros is +0.0 if one of them is, a min -0.0 if one of them is."""
    x = np.array(
        [[-0.0, 0.0, -0.0], [0.0, -0.0, 0.0], [-0.0, -0.0, -0.0], [0.0, 0.0, 0.0]], np.float32
    )
    t, r = "tensor<4x3xf32>", "tensor<4xf32>"
    text = f"""func.func @f(%x: {t}) -> ({r}, {r}) {{
  %mx = graph.reduce_max %x {{dims = array<i64: 1>}} : {t} -> {r}
  %mn = graph.reduce_min %x {{dims = array<i64: 1>}} : {t} -> {r}
  func.return %mx, %mn : {r}, {r}
}}"""
    mx, mn = _run(level, text, x)
    _assert_same(mx, [0.0, 0.0, -0.0, 0.0], "reduce_max")
    _assert_same(mn, [-0.0, -0.0, -0.0, 0.0], "reduce_min")


@pytest.mark.parametrize("level", LEVELS)
def test_sigmoid_and_silu_keep_their_far_negative_tail(level: str) -> None:
    """sigmoid(x) = exp(x) / (1 + exp(x)) below 0: sigmoid(-40) is 4.248e-18 and silu(-40)
    -1.699e-16 (as torch and `expf` in f32 give), where the reference's tanh form cancelled
    to 0 below about -37."""
    x = np.array([-40.0, -60.0, -20.0, 0.0, 40.0, -math.inf, math.inf, math.nan], np.float32)
    sigmoid, silu = _run(level, each_op(["sigmoid", "silu"], 1, "f32", x.size), x)
    want = [1.0 / (1.0 + math.exp(-float(v))) if math.isfinite(v) else math.nan for v in x]
    want[5:] = [0.0, 1.0, math.nan]
    np.testing.assert_allclose(np.asarray(sigmoid, np.float64), want, rtol=1e-6, atol=0)
    np.testing.assert_allclose(
        np.asarray(silu, np.float64)[:5], [v * w for v, w in zip(x[:5], want[:5])], rtol=1e-6
    )
    assert np.asarray(sigmoid)[0] > 0 and np.asarray(silu)[0] < 0
