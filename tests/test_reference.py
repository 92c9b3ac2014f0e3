"""Tests for the numpy reference executor against hand-written numpy."""

from __future__ import annotations

import math

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.arith import Arith
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.func import Func
from xdsl.parser import Parser

from tinyopt.backends.reference import random_inputs, round_to_bf16, run_reference
from tinyopt.dialects.graph import Graph


def parse(text: str) -> ModuleOp:
    ctx = Context()
    for dialect in (Builtin, Func, Arith, Graph):
        ctx.load_dialect(dialect)
    module = Parser(ctx, text).parse_module()
    module.verify()
    return module


def unary(op: str, shape: str = "3x5") -> ModuleOp:
    t = f"tensor<{shape}xf32>"
    return parse(
        f"func.func @f(%x: {t}) -> {t} {{\n  %y = graph.{op} %x : {t}\n  func.return %y : {t}\n}}"
    )


RNG = np.random.default_rng(0)
X = RNG.standard_normal((3, 5))


@pytest.mark.parametrize(
    ("op", "expected"),
    [
        ("neg", -X),
        ("abs", np.abs(X)),
        ("exp", np.exp(X)),
        ("tanh", np.tanh(X)),
        ("sigmoid", 1 / (1 + np.exp(-X))),
        ("relu", np.where(X > 0, X, 0.0)),
        ("silu", X / (1 + np.exp(-X))),
        ("gelu", 0.5 * X * (1 + np.vectorize(math.erf)(X / math.sqrt(2)))),
        ("reciprocal", 1 / X),
    ],
)
def test_unary_ops_match_numpy(op: str, expected: np.ndarray) -> None:
    (y,) = run_reference(unary(op), X)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, expected, rtol=1e-13)


def test_gelu_is_the_exact_erf_form() -> None:
    (y,) = run_reference(unary("gelu", "3"), np.array([1.0, -1.0, 0.0]))
    np.testing.assert_allclose(y, [0.8413447460685429, -0.15865525393145707, 0.0], rtol=1e-15)


def test_log_and_sqrt_of_out_of_domain_values_give_ieee_results() -> None:
    (y,) = run_reference(unary("log", "2"), np.array([0.0, -1.0]))
    assert y[0] == -np.inf and np.isnan(y[1])


def test_reduce_matmul_transpose_broadcast() -> None:
    module = parse(
        """
func.func @f(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>, %v: tensor<5xf32>)
    -> (tensor<2x1x4xf32>, tensor<3xf32>, tensor<2x3x5xf32>, tensor<4x2x3xf32>, tensor<3x5xf32>) {
  %s = graph.reduce_sum %a {dims = array<i64: 1>, keepdim = true} : tensor<2x3x4xf32> -> tensor<2x1x4xf32>
  %m = graph.reduce_max %a {dims = array<i64: 0, 2>} : tensor<2x3x4xf32> -> tensor<3xf32>
  %mm = graph.matmul %a, %b : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  %t = graph.transpose %a {perm = array<i64: 2, 0, 1>} : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %bc = graph.broadcast %v : tensor<5xf32> -> tensor<3x5xf32>
  func.return %s, %m, %mm, %t, %bc : tensor<2x1x4xf32>, tensor<3xf32>, tensor<2x3x5xf32>, tensor<4x2x3xf32>, tensor<3x5xf32>
}"""  # noqa: E501
    )
    a, b, v = random_inputs(module, seed=1)
    s, m, mm, t, bc = run_reference(module, a, b, v)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    np.testing.assert_allclose(s, a64.sum(axis=1, keepdims=True), rtol=1e-13)
    np.testing.assert_array_equal(m, a64.max(axis=(0, 2)))
    np.testing.assert_allclose(mm, a64 @ b64, rtol=1e-13)
    np.testing.assert_array_equal(t, a64.transpose(2, 0, 1))
    np.testing.assert_array_equal(bc, np.tile(v, (3, 1)))


def test_composites_match_hand_numpy() -> None:
    module = parse(
        """
func.func @f(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xf32>, %lw: tensor<6x8xf32>, %lb: tensor<6xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x6xf32>) {
  %sm = graph.softmax %x {dim = 1 : i64} : tensor<4x8xf32>
  %rn = graph.rms_norm %x, %w {eps = 0.5 : f32} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %ln = graph.layer_norm %x, %w, %b {eps = 0.25 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %l = graph.linear %x, %lw, %lb : (tensor<4x8xf32>, tensor<6x8xf32>, tensor<6xf32>) -> tensor<4x6xf32>
  func.return %sm, %rn, %ln, %l : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x6xf32>
}"""  # noqa: E501
    )
    x, w, b, lw, lb = (a.astype(np.float64) for a in random_inputs(module, seed=2))
    sm, rn, ln, lin = run_reference(module, x, w, b, lw, lb)
    np.testing.assert_allclose(sm, np.exp(x) / np.exp(x).sum(1, keepdims=True), rtol=1e-13)
    rms = np.sqrt((x**2).mean(1, keepdims=True) + 0.5)
    np.testing.assert_allclose(rn, x / rms * w, rtol=1e-13)
    std = np.sqrt(x.var(1, keepdims=True) + 0.25)
    np.testing.assert_allclose(ln, (x - x.mean(1, keepdims=True)) / std * w + b, rtol=1e-13)
    np.testing.assert_allclose(lin, x @ lw.T + lb, rtol=1e-13)


@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_a_loop(causal: bool) -> None:
    t = "tensor<2x3x5x4xf32>"
    module = parse(
        f"func.func @f(%q: {t}, %k: {t}, %v: {t}) -> {t} {{\n"
        f"  %o = graph.attention %q, %k, %v {{causal = {str(causal).lower()}, scale = 0.5 : f32}}"
        f" : ({t}, {t}, {t}) -> {t}\n  func.return %o : {t}\n}}"
    )
    q, k, v = (a.astype(np.float64) for a in random_inputs(module, seed=3))
    (out,) = run_reference(module, q, k, v)
    expected = np.zeros_like(q)
    for b, h, i in np.ndindex(2, 3, 5):
        visible = i + 1 if causal else 5
        scores = np.array([0.5 * q[b, h, i] @ k[b, h, j] for j in range(visible)])
        p = np.exp(scores - scores.max())
        expected[b, h, i] = (p / p.sum()) @ v[b, h, :visible]
    np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_constant_reshape_and_cast_rounding() -> None:
    module = parse(
        """
func.func @f(%x: tensor<2x3xf32>) -> (tensor<6xf32>, tensor<2x3xbf16>, tensor<2x3xf32>) {
  %r = graph.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
  %c = graph.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %a = graph.add %x, %c : tensor<2x3xf32>
  %h = graph.cast %a : tensor<2x3xf32> -> tensor<2x3xbf16>
  func.return %r, %h, %c : tensor<6xf32>, tensor<2x3xbf16>, tensor<2x3xf32>
}"""
    )
    x = np.full((2, 3), 1.0 + 2.0**-10)
    r, h, c = run_reference(module, x)
    np.testing.assert_array_equal(r, x.reshape(6))
    np.testing.assert_array_equal(c, [[1, 2, 3], [4, 5, 6]])
    # bf16 keeps 8 significant bits, so 1 + 2^-10 + k rounds to k + 1 for k >= 1.
    np.testing.assert_array_equal(h, [[2, 3, 4], [5, 6, 7]])
    assert h.dtype == np.float64


def test_dtype_none_computes_in_the_program_precision() -> None:
    t = "tensor<4xf16>"
    module = parse(
        f"func.func @f(%x: {t}) -> {t} {{\n  %y = graph.exp %x : {t}\n  func.return %y : {t}\n}}"
    )
    x = np.array([0.0, 1.0, 2.0, 12.0], dtype=np.float16)
    (y,) = run_reference(module, x, dtype=None)
    assert y.dtype == np.float16
    with np.errstate(over="ignore"):
        expected = np.exp(x)
    np.testing.assert_array_equal(y, expected)
    assert y[3] == np.inf  # e^12 overflows f16, as it would on the device.
    (y32,) = run_reference(module, x, dtype=np.float32)
    assert y32.dtype == np.float32 and np.isfinite(y32[3])


def test_round_to_bf16_is_round_half_to_even() -> None:
    one = np.float32(1.0)
    ulp = np.float32(2.0**-7)
    values = np.array([one + ulp / 2, one + 3 * ulp / 2, np.inf, np.nan, -2.5], dtype=np.float32)
    rounded = round_to_bf16(values)
    assert rounded.dtype == np.float32
    np.testing.assert_array_equal(rounded[:3], [one, one + 2 * ulp, np.inf])
    assert np.isnan(rounded[3]) and rounded[4] == -2.5


def test_random_inputs_have_argument_shapes_and_dtypes() -> None:
    module = parse(
        """
func.func @f(%a: tensor<3x4xf32>, %b: tensor<5xf16>, %c: tensor<2x2xbf16>) {
  func.return
}"""
    )
    a, b, c = random_inputs(module, seed=0)
    assert (a.shape, a.dtype) == ((3, 4), np.float32)
    assert (b.shape, b.dtype) == ((5,), np.float16)
    assert (c.shape, c.dtype) == ((2, 2), np.float32)
    np.testing.assert_array_equal(c, round_to_bf16(c))
    np.testing.assert_array_equal(random_inputs(module, seed=0)[0], a)


def test_unsupported_op_is_named() -> None:
    t = "tensor<4xf32>"
    module = parse(
        f"func.func @f(%x: {t}) -> {t} {{\n"
        f"  %y = arith.addf %x, %x : {t}\n  func.return %y : {t}\n}}"
    )
    with pytest.raises(NotImplementedError, match="cannot run op 'arith.addf'"):
        run_reference(module, np.zeros(4))


def test_argument_mismatches_are_reported() -> None:
    module = unary("exp")
    with pytest.raises(ValueError, match="takes 1 arguments, got 2"):
        run_reference(module, X, X)
    with pytest.raises(ValueError, match=r"argument 0 of @f has shape \(5, 3\)"):
        run_reference(module, X.T)
