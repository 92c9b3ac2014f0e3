"""graph.floor, graph.ceil, graph.round and graph.trunc against numpy's float64 roundings, at
the graph level (the numpy reference) and at the loop level (fused, run by the loop executor),
in f32, f16 and bf16: halves round to even, negative values round the right way, and ±inf,
NaN and ±0 come back as they went in."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
from programs import STORAGE, each_op

from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import round_to_bf16, run_reference
from tinyopt.compiler import apply_pipeline, parse

ROUNDINGS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "floor": np.floor,
    "ceil": np.ceil,
    "round": np.rint,
    "trunc": np.trunc,
}
"""Each graph op and the numpy function it matches (`np.rint`: halves to even, as torch)."""

VALUES = [
    *(-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -3.5, -100.5, 101.5),
    *(-2.75, -1.25, -0.25, 0.25, 1.25, 2.75, 1024.0, -7.0),
    *(-0.0, 0.0, math.inf, -math.inf, math.nan),
]
"""Halves, other fractions of either sign, integers and special values: exact in f32, f16 and
bf16."""

F32_VALUES = [
    float(np.nextafter(np.float32(0.5), np.float32(0.0))),  # floor(x + 0.5) would give 1
    2.0**23 - 0.5,  # the largest half in f32; rounds up to the even 2^23
    -(2.0**23 - 0.5),
    2.0**100,  # past 2^24 every f32 is an integer
]
"""Values only f32 holds, at the edges of its fractions."""


def _inputs(dtype: str) -> np.ndarray:
    values = VALUES + F32_VALUES if dtype == "f32" else VALUES
    x = np.array(values, STORAGE[dtype])
    if dtype == "bf16":
        x = round_to_bf16(x)
    assert np.array_equal(x.astype(np.float64), values, equal_nan=True), "a value is not exact"
    return x


def _run(level: str, dtype: str, x: np.ndarray) -> list[np.ndarray]:
    module = parse(each_op(list(ROUNDINGS), 1, dtype, x.size))
    if level == "graph":
        return run_reference(module, x)
    return run_loop_module(apply_pipeline(module, "fuse"), "f", x)


def _assert_same(got: np.ndarray, want: np.ndarray, name: str) -> None:
    """Equal element for element, NaN where `want` is NaN and -0.0 where it is -0.0."""
    got = np.asarray(got, np.float64)
    np.testing.assert_array_equal(got, want, err_msg=name)
    assert np.array_equal(np.signbit(got), np.signbit(want)), f"{name}: sign of a zero differs"


@pytest.mark.parametrize("dtype", ["f32", "f16", "bf16"])
@pytest.mark.parametrize("level", ["graph", "loop"])
def test_roundings_match_numpy_in_float64(level: str, dtype: str) -> None:
    x = _inputs(dtype)
    outputs = _run(level, dtype, x)
    for (name, rounding), got in zip(ROUNDINGS.items(), outputs, strict=True):
        _assert_same(got, rounding(x.astype(np.float64)), name)


@pytest.mark.parametrize("level", ["graph", "loop"])
def test_halves_and_negative_values_by_hand(level: str) -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, -2.75, -0.25], np.float32)
    floor, ceil, round_, trunc = _run(level, "f32", x)
    _assert_same(floor, np.array([-3, -2, -1, 0, 1, 2, -3, -1.0]), "floor")
    _assert_same(ceil, np.array([-2, -1, -0.0, 1, 2, 3, -2, -0.0]), "ceil")
    _assert_same(round_, np.array([-2, -2, -0.0, 0, 2, 2, -3, -0.0]), "round")
    _assert_same(trunc, np.array([-2, -1, -0.0, 0, 1, 2, -2, -0.0]), "trunc")
