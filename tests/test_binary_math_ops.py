"""graph.atan2, graph.fmod, graph.remainder and graph.copysign against numpy's float64
functions, at the graph level (the numpy reference) and at the loop level (fused, run by the
loop executor), in f32, f16 and bf16: operands of every pairing of signs, ±0, ±inf and NaN,
exact multiples, atan2 in all four quadrants and on both axes, remainder as torch's (a zero
result keeps the dividend's sign, where numpy's takes the divisor's), and copysign reading the
sign bit of −0.0 and of a negative NaN."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from programs import STORAGE, each_op

from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import round_to_bf16, run_reference
from tinyopt.compiler import apply_pipeline, parse


def _torch_remainder(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """torch.remainder from numpy's: the same values, but a zero keeps a's sign (numpy's has
    b's)."""
    r = np.remainder(a, b)
    return np.where(r == 0, np.copysign(0.0, a), r)


OPS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "atan2": np.arctan2,
    "fmod": np.fmod,
    "remainder": _torch_remainder,
    "copysign": np.copysign,
}
"""Each graph op and the float64 function it matches."""

LHS = [
    *(5.0, -5.0, 6.0, -6.0, 7.5, -7.5, 0.375, -0.375, 100.0, -100.0),
    *(0.0, -0.0, math.inf, -math.inf, math.nan),
]
RHS = [
    *(3.0, -3.0, 0.75, -0.75, 2.5, -2.5),
    *(0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan),
]
"""Every lhs is paired with every rhs: all four pairings of signs (atan2's four quadrants), exact
multiples (6 of 3, 7.5 and 100 of 2.5), zeros, infinities and NaN on either side (a negative
NaN too: copysign reads its sign bit). Every value,
and every fmod and remainder of two of them, is exact in f32, f16 and bf16."""

F32_PAIRS = [
    (float(np.float32(1e30)), float(np.float32(0.1))),  # a quotient of 10^31, fmod still exact
    (-float(np.float32(1e30)), float(np.float32(0.1))),
    (-float(np.float32(1e-30)), 1.0),  # remainder 1 − 1e-30 rounds to 1
    (float(np.float32(1e-30)), -1.0),
    (2.0**-140, 2.0**-149),  # subnormal operands
    (-(2.0**-140), 3 * 2.0**-149),
]
"""Pairs only f32 holds: huge quotients, results that round, subnormals."""


def _held(values: list[float], dtype: str) -> np.ndarray:
    """`values` in the storage of `dtype`, checked to be exact there."""
    x = np.array(values, STORAGE[dtype])
    if dtype == "bf16":
        x = round_to_bf16(x)
    assert np.array_equal(x.astype(np.float64), values, equal_nan=True), "a value is not exact"
    return x


def _inputs(dtype: str) -> tuple[np.ndarray, np.ndarray]:
    pairs = [(a, b) for a in LHS for b in RHS]
    if dtype == "f32":
        pairs += F32_PAIRS
    lhs, rhs = zip(*pairs, strict=True)
    return _held(list(lhs), dtype), _held(list(rhs), dtype)


def _rounded(x: np.ndarray, dtype: str) -> np.ndarray:
    """float64 `x` rounded to `dtype` as the loop executor stores it, back in float64."""
    held = x.astype(STORAGE[dtype])
    return (round_to_bf16(held) if dtype == "bf16" else held).astype(np.float64)


def _run(level: str, dtype: str, a: np.ndarray, b: np.ndarray) -> list[np.ndarray]:
    module = parse(each_op(list(OPS), 2, dtype, a.size))
    if level == "graph":
        return run_reference(module, a, b)
    return run_loop_module(apply_pipeline(module, "fuse"), "f", a, b)


def _assert_same(got: np.ndarray, want: np.ndarray, name: str) -> None:
    """Equal element for element, NaN where `want` is NaN, and of `want`'s sign elsewhere
    (-0.0 included)."""
    got = np.asarray(got, np.float64)
    np.testing.assert_array_equal(got, want, err_msg=name)
    number = ~np.isnan(want)
    assert np.array_equal(np.signbit(got[number]), np.signbit(want[number])), f"{name}: a sign"


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("level", ["graph", "loop"])
def test_binary_math_matches_numpy_in_float64(level: str, dtype: str) -> None:
    # The graph reference computes in float64, so it gives numpy's float64 result itself; the
    # loop executor rounds each result to its element type once, when it stores it.
    a, b = _inputs(dtype)
    outputs = _run(level, dtype, a, b)
    with np.errstate(invalid="ignore", divide="ignore"):
        for (name, function), got in zip(OPS.items(), outputs, strict=True):
            want = function(a.astype(np.float64), b.astype(np.float64))
            _assert_same(got, want if level == "graph" else _rounded(want, dtype), name)


@pytest.mark.parametrize("level", ["graph", "loop"])
def test_signs_zeros_and_infinities_by_hand(level: str) -> None:
    inf, pi = math.inf, float(np.float32(math.pi))
    a = np.array([5, -5, 5, -5, -6, 6, -5, 5, 5, -0.0, 0.0, -0.0], np.float32)
    b = np.array([3, 3, -3, -3, 3, -3, inf, -inf, inf, inf, -1, -1], np.float32)
    atan2, fmod, remainder, copysign = (np.float32(r) for r in _run(level, "f32", a, b))
    _assert_same(fmod, np.array([2, -2, 2, -2, -0.0, 0, -5, 5, 5, -0.0, 0, -0.0]), "fmod")
    want = np.array([2, 1, -1, -2, -0.0, 0, inf, -inf, 5, -0.0, 0, -0.0])
    _assert_same(remainder, want, "remainder")
    # The four quadrants, then a zero y: ±0 right of the origin, ±π left of it.
    quadrants = np.float32([1.0303768, -1.0303768, 2.1112158, -2.1112158])
    np.testing.assert_allclose(atan2[:4], quadrants, rtol=1e-6)
    _assert_same(atan2[-4:], np.array([0, -0.0, pi, -pi]), "atan2")
    want = np.array([5, 5, -5, -5, 6, -6, 5, -5, 5, 0.0, -0.0, -0.0])
    _assert_same(copysign, want, "copysign")


def test_remainder_fmod_atan2_and_copysign_match_torch() -> None:
    torch = pytest.importorskip("torch")
    a, b = _inputs("f32")
    atan2, fmod, remainder, copysign = _run("loop", "f32", a, b)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    _assert_same(fmod, torch.fmod(ta, tb).double().numpy(), "fmod")
    _assert_same(remainder, torch.remainder(ta, tb).double().numpy(), "remainder")
    want = torch.atan2(ta.double(), tb.double()).float().double().numpy()
    _assert_same(atan2, want, "atan2")
    _assert_same(copysign, torch.copysign(ta, tb).double().numpy(), "copysign")


@pytest.mark.parametrize("level", ["graph", "loop"])
def test_pow_of_a_half_is_c_pow(level: str) -> None:
    """`graph.pow` is C's `pow`: with an exponent of 0.5 it is +inf at -inf and +0 at -0, where
    a plain square root (numpy's shortcut, and the loop's before) gives NaN and -0; elsewhere it
    is the square root. (torch's `x ** 0.5` is the plain square root: the frontend captures it
    as `graph.sqrt`.)"""
    text = """func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %half = graph.constant dense<5.000000e-01> : tensor<8xf32>
  %y = graph.pow %x, %half : tensor<8xf32>
  func.return %y : tensor<8xf32>
}"""
    x = np.array([-math.inf, -0.0, 0.0, 4.0, math.inf, math.nan, -1.0, 2.25], np.float32)
    want = np.array([math.inf, 0.0, 0.0, 2.0, math.inf, math.nan, math.nan, 1.5])
    if level == "graph":
        (got,) = run_reference(parse(text), x)
    else:
        (got,) = run_loop_module(apply_pipeline(parse(text), "fuse"), "f", x)
    _assert_same(np.asarray(got, np.float64), want, "pow")
