"""Tests for the decompose pass: composites vanish and numerics are unchanged."""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, TensorType, bf16
from xdsl.dialects.func import Func
from xdsl.parser import Parser

from tinyopt.backends.reference import random_inputs, run_reference
from tinyopt.dialects import graph
from tinyopt.passes.graph_to_loop.decompose import DecomposePass


def make_ctx() -> Context:
    ctx = Context()
    for dialect in (Builtin, Func, graph.Graph):
        ctx.load_dialect(dialect)
    return ctx


def program(args: list[str], op: str, result: str) -> str:
    """Build a one-op function whose arguments have the given tensor types."""
    params = ", ".join(f"%a{i}: {t}" for i, t in enumerate(args))
    return f"func.func @f({params}) -> {result} {{\n  %r = {op}\n  func.return %r : {result}\n}}"


def softmax(shape: str, dim: int, dtype: str = "f32") -> str:
    t = f"tensor<{shape}x{dtype}>"
    return program([t], f"graph.softmax %a0 {{dim = {dim} : i64}} : {t}", t)


def rms_norm(shape: str, channels: int, dtype: str = "f32") -> str:
    t, w = f"tensor<{shape}x{dtype}>", f"tensor<{channels}x{dtype}>"
    op = f"graph.rms_norm %a0, %a1 {{eps = 1.0e-06 : f32}} : ({t}, {w}) -> {t}"
    return program([t, w], op, t)


def layer_norm(shape: str, channels: int) -> str:
    t, w = f"tensor<{shape}xf32>", f"tensor<{channels}xf32>"
    op = f"graph.layer_norm %a0, %a1, %a2 {{eps = 1.0e-05 : f32}} : ({t}, {w}, {w}) -> {t}"
    return program([t, w, w], op, t)


def linear(x: list[int], n: int, bias: bool) -> str:
    k = x[-1]
    xt = f"tensor<{'x'.join(map(str, x))}xf32>"
    wt, bt = f"tensor<{n}x{k}xf32>", f"tensor<{n}xf32>"
    rt = f"tensor<{'x'.join(map(str, [*x[:-1], n]))}xf32>"
    if bias:
        return program([xt, wt, bt], f"graph.linear %a0, %a1, %a2 : ({xt}, {wt}, {bt}) -> {rt}", rt)
    return program([xt, wt], f"graph.linear %a0, %a1 : ({xt}, {wt}) -> {rt}", rt)


def attention(shape: str, causal: bool, scale: float) -> str:
    t = f"tensor<{shape}xf32>"
    props = f"{{causal = {str(causal).lower()}, scale = {scale} : f32}}"
    return program([t, t, t], f"graph.attention %a0, %a1, %a2 {props} : ({t}, {t}, {t}) -> {t}", t)


CASES = {
    "softmax_3x1000": softmax("3x1000", 1),
    "softmax_dim0_rank3": softmax("5x4x3", 0),
    "softmax_middle_dim": softmax("2x7x3", 1),
    "rms_norm_3x1000": rms_norm("3x1000", 1000),
    "rms_norm_rank3": rms_norm("2x3x64", 64),
    "layer_norm_3x1000": layer_norm("3x1000", 1000),
    "layer_norm_rank3": layer_norm("2x3x64", 64),
    "linear_rank2": linear([4, 32], 16, bias=True),
    "linear_rank3": linear([2, 3, 32], 16, bias=True),
    "linear_rank1": linear([32], 16, bias=True),
    "linear_no_bias": linear([2, 3, 32], 16, bias=False),
    "attention": attention("2x3x16x8", causal=False, scale=0.35355339),
    "attention_causal": attention("2x3x16x8", causal=True, scale=0.35355339),
    "attention_causal_single_head": attention("1x1x33x16", causal=True, scale=0.25),
}


@pytest.mark.parametrize("name", CASES)
def test_decompose_preserves_numerics(name: str) -> None:
    ctx = make_ctx()
    module = Parser(ctx, CASES[name]).parse_module()
    module.verify()
    inputs = random_inputs(module, seed=zlib.crc32(name.encode()))
    (before,) = run_reference(module, *inputs)

    DecomposePass().apply(ctx, module)
    module.verify()
    remaining = [op.name for op in module.walk() if isinstance(op, graph.COMPOSITE_OPS)]
    assert remaining == []
    (after,) = run_reference(module, *inputs)

    assert np.all(np.isfinite(after))
    np.testing.assert_allclose(after, before, rtol=1e-10, atol=1e-14)


def test_decomposed_ops_keep_the_input_dtype() -> None:
    ctx = make_ctx()
    module = Parser(ctx, rms_norm("4x8", 8, dtype="bf16")).parse_module()
    DecomposePass().apply(ctx, module)
    module.verify()
    graph_ops = [op for op in module.walk() if op.name.startswith("graph.")]
    assert len(graph_ops) > 5
    for op in graph_ops:
        (result,) = op.results
        assert isinstance(result.type, TensorType)
        assert result.type.element_type == bf16


def test_decompose_leaves_primitives_alone() -> None:
    ctx = make_ctx()
    text = program(["tensor<4x8xf32>"], "graph.gelu %a0 : tensor<4x8xf32>", "tensor<4x8xf32>")
    module = Parser(ctx, text).parse_module()
    DecomposePass().apply(ctx, module)
    assert [op.name for op in module.walk() if op.name.startswith("graph.")] == ["graph.gelu"]


def test_decomposed_module_survives_print_and_parse() -> None:
    ctx = make_ctx()
    module = Parser(ctx, CASES["attention_causal"]).parse_module()
    inputs = random_inputs(module, seed=7)
    (before,) = run_reference(module, *inputs)
    DecomposePass().apply(ctx, module)
    # Printing then reparsing must not alter the causal mask's constants.
    reparsed = Parser(ctx, str(module)).parse_module()
    (after,) = run_reference(reparsed, *inputs)
    np.testing.assert_allclose(after, before, rtol=1e-10)


def test_pass_name() -> None:
    assert DecomposePass.name == "decompose"
