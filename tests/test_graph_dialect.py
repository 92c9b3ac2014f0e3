"""Tests for the graph dialect: parsing, printing, builders and verifier errors."""

from __future__ import annotations

import re
from io import StringIO

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp, TensorType, bf16, f16, f32
from xdsl.dialects.func import Func
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.test_value import create_ssa_value

from tinyopt.dialects import graph

ALL_OPS_PROGRAM = """
func.func @all(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %v: tensor<8xf32>, %w: tensor<16x8xf32>,
               %b: tensor<16xf32>, %q: tensor<2x4x16x8xbf16>, %kv: tensor<2x2x24x8xbf16>,
               %keep: tensor<2x1x1x24xi1>) -> tensor<4x8xf32> {
  %neg = graph.neg %x : tensor<4x8xf32>
  %abs = graph.abs %x : tensor<4x8xf32>
  %exp = graph.exp %x : tensor<4x8xf32>
  %log = graph.log %x : tensor<4x8xf32>
  %sqrt = graph.sqrt %x : tensor<4x8xf32>
  %rsqrt = graph.rsqrt %x : tensor<4x8xf32>
  %reciprocal = graph.reciprocal %x : tensor<4x8xf32>
  %tanh = graph.tanh %x : tensor<4x8xf32>
  %sigmoid = graph.sigmoid %x : tensor<4x8xf32>
  %relu = graph.relu %x : tensor<4x8xf32>
  %gelu = graph.gelu %x : tensor<4x8xf32>
  %gelu_tanh = graph.gelu_tanh %x : tensor<4x8xf32>
  %silu = graph.silu %x : tensor<4x8xf32>
  %log1p = graph.log1p %x : tensor<4x8xf32>
  %expm1 = graph.expm1 %x : tensor<4x8xf32>
  %floor = graph.floor %x : tensor<4x8xf32>
  %ceil = graph.ceil %x : tensor<4x8xf32>
  %round = graph.round %x : tensor<4x8xf32>
  %trunc = graph.trunc %x : tensor<4x8xf32>
  %cast = graph.cast %x : tensor<4x8xf32> -> tensor<4x8xf16>
  %add = graph.add %x, %y : tensor<4x8xf32>
  %sub = graph.sub %x, %y : tensor<4x8xf32>
  %mul = graph.mul %x, %y : tensor<4x8xf32>
  %div = graph.div %x, %y : tensor<4x8xf32>
  %max = graph.max %x, %y : tensor<4x8xf32>
  %min = graph.min %x, %y : tensor<4x8xf32>
  %pow = graph.pow %x, %y : tensor<4x8xf32>
  %atan2 = graph.atan2 %x, %y : tensor<4x8xf32>
  %fmod = graph.fmod %x, %y : tensor<4x8xf32>
  %remainder = graph.remainder %x, %y : tensor<4x8xf32>
  %copysign = graph.copysign %x, %y : tensor<4x8xf32>
  %rs = graph.reduce_sum %x {dims = array<i64: 1>, keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
  %rp = graph.reduce_prod %x {dims = array<i64: 0>, keepdim = true} : tensor<4x8xf32> -> tensor<1x8xf32>
  %rm = graph.reduce_max %x {dims = array<i64: 0, 1>} : tensor<4x8xf32> -> tensor<f32>
  %ra = graph.reduce_mean %x {dims = array<i64: 0>} : tensor<4x8xf32> -> tensor<8xf32>
  %am = graph.argmax %x {dim = 1 : i64} : tensor<4x8xf32> -> tensor<4xi64>
  %ak = graph.argmax %x {dim = 0 : i64, keepdim = true} : tensor<4x8xf32> -> tensor<1x8xi32>
  %t = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<16x8xf32> -> tensor<8x16xf32>
  %mm = graph.matmul %x, %t : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %r = graph.reshape %x : tensor<4x8xf32> -> tensor<2x16xf32>
  %bc = graph.broadcast %v : tensor<8xf32> -> tensor<4x8xf32>
  %sl = graph.slice %x {dim = 1 : i64, start = 1 : i64, step = 2 : i64} : tensor<4x8xf32> -> tensor<4x4xf32>
  %cat = graph.concat %x, %y {dim = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %c = graph.constant dense<5.000000e-01> : tensor<4x8xf32>
  %sm = graph.softmax %x {dim = 1 : i64} : tensor<4x8xf32>
  %rn = graph.rms_norm %x, %v {eps = 1.000000e-06 : f32} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %ln = graph.layer_norm %x, %v, %v {eps = 1.000000e-05 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %l = graph.linear %x, %w, %b : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %l2 = graph.linear %x, %w : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %a = graph.attention %q, %q, %q {causal = true, scale = 1.250000e-01 : f32} : (tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>, tensor<2x4x16x8xbf16>) -> tensor<2x4x16x8xbf16>
  %g = graph.attention %q, %kv, %kv, %keep {scale = 1.250000e-01 : f32} : (tensor<2x4x16x8xbf16>, tensor<2x2x24x8xbf16>, tensor<2x2x24x8xbf16>, tensor<2x1x1x24xi1>) -> tensor<2x4x16x8xbf16>
  func.return %add : tensor<4x8xf32>
}
"""  # noqa: E501


@pytest.fixture
def ctx() -> Context:
    context = Context()
    for dialect in (Builtin, Func, graph.Graph):
        context.load_dialect(dialect)
    return context


def parse(ctx: Context, text: str) -> ModuleOp:
    return Parser(ctx, text).parse_module()


def print_op(op: Operation, generic: bool = False) -> str:
    stream = StringIO()
    Printer(stream=stream, print_generic_format=generic).print_op(op)
    return stream.getvalue()


def test_every_documented_op_is_registered() -> None:
    names = {op.name for op in graph.Graph.operations}
    documented = (
        "neg abs exp log sqrt rsqrt reciprocal tanh sigmoid relu gelu gelu_tanh erf silu cos sin "
        "log1p expm1 floor ceil round trunc "
        "cast "
        "add sub mul div max min pow atan2 fmod remainder copysign compare select iota reduce_sum "
        "reduce_prod reduce_max reduce_min reduce_mean matmul transpose "
        "reshape broadcast slice concat gather dynamic_slice dynamic_update_slice constant "
        "softmax rms_norm layer_norm linear attention argmax"
    ).split()
    assert names == {f"graph.{n}" for n in documented}


def test_custom_syntax_round_trips(ctx: Context) -> None:
    module = parse(ctx, ALL_OPS_PROGRAM)
    module.verify()
    custom = print_op(module)
    assert print_op(parse(ctx, custom)) == custom
    # The custom form of every graph op is printed exactly as written above.
    for line in ALL_OPS_PROGRAM.splitlines():
        if "graph." in line:
            assert line.strip() in custom


def test_generic_form_round_trips(ctx: Context) -> None:
    module = parse(ctx, ALL_OPS_PROGRAM)
    generic = print_op(module, generic=True)
    assert '"graph.reduce_max"(%x) <{dims = array<i64: 0, 1>, keepdim = false}>' in generic
    reparsed = parse(ctx, generic)
    reparsed.verify()
    assert print_op(reparsed) == print_op(module)


def test_all_ops_are_pure() -> None:
    from xdsl.traits import Pure

    assert all(op.has_trait(Pure) for op in graph.Graph.operations)


def test_op_tuples_cover_the_right_ops() -> None:
    assert {op.name for op in graph.COMPOSITE_OPS} == {
        "graph.softmax",
        "graph.rms_norm",
        "graph.layer_norm",
        "graph.linear",
        "graph.attention",
        "graph.argmax",
    }
    assert len(graph.UNARY_OPS) == 22 and len(graph.BINARY_OPS) == 11
    assert len(graph.REDUCE_OPS) == 5
    assert {op.name for op in graph.MASK_OPS} == {"graph.compare", "graph.select"}


def test_builders_infer_result_types() -> None:
    x = create_ssa_value(TensorType(f16, [2, 3, 8]))
    w = create_ssa_value(TensorType(f16, [16, 8]))
    b = create_ssa_value(TensorType(f16, [16]))
    w_t = create_ssa_value(TensorType(f16, [8, 16]))
    cases: list[tuple[Operation, tuple[int, ...]]] = [
        (graph.ExpOp(x), (2, 3, 8)),
        (graph.AddOp(x, x), (2, 3, 8)),
        (graph.ReduceSumOp(x, [2], keepdim=True), (2, 3, 1)),
        (graph.ReduceMaxOp(x, [0, 2]), (3,)),
        (graph.ReduceProdOp(x, [0, 1, 2]), ()),
        (graph.TransposeOp(x, [2, 0, 1]), (8, 2, 3)),
        (graph.ReshapeOp(x, [6, 8]), (6, 8)),
        (graph.BroadcastOp(b, [4, 16]), (4, 16)),
        (graph.MatmulOp(create_ssa_value(TensorType(f16, [4, 8])), w_t), (4, 16)),
        (graph.LinearOp(x, w, b), (2, 3, 16)),
        (graph.LinearOp(x, w), (2, 3, 16)),
        (graph.SoftmaxOp(x, 1), (2, 3, 8)),
        (graph.ConstantOp.splat(1.0, TensorType(f16, [2, 2])), (2, 2)),
    ]
    for op, shape in cases:
        op.verify()
        result_type = op.results[0].type
        assert isinstance(result_type, TensorType)
        assert result_type.get_shape() == shape and result_type.element_type == f16


def test_cast_builder_and_attention_builder() -> None:
    x = create_ssa_value(TensorType(f32, [4, 8]))
    cast = graph.CastOp(x, bf16)
    cast.verify()
    assert cast.result.type == TensorType(bf16, [4, 8])
    q = create_ssa_value(TensorType(bf16, [1, 2, 4, 8]))
    attention = graph.AttentionOp(q, q, q, scale=0.5, causal=True)
    attention.verify()
    assert attention.causal.value.data and attention.scale.value.data == 0.5


VERIFY_ERRORS = [
    (
        "%a: tensor<4x64xf32>, %b: tensor<32x16xf32>",
        "graph.matmul %a, %b : (tensor<4x64xf32>, tensor<32x16xf32>) -> tensor<4x16xf32>",
        "graph.matmul: contraction dims differ: lhs has K=64, rhs has K=32",
    ),
    (
        "%a: tensor<2x4x8xf32>, %b: tensor<3x8x16xf32>",
        "graph.matmul %a, %b : (tensor<2x4x8xf32>, tensor<3x8x16xf32>) -> tensor<2x4x16xf32>",
        "graph.matmul: batch dims differ: lhs has B=2, rhs has B=3",
    ),
    (
        "%a: tensor<8xf32>, %b: tensor<8x16xf32>",
        "graph.matmul %a, %b : (tensor<8xf32>, tensor<8x16xf32>) -> tensor<16xf32>",
        "graph.matmul: operands must have the same rank, at least 2 (no broadcasting: "
        "broadcast the other operand first), got lhs rank 1, rhs rank 2",
    ),
    (
        "%x: tensor<4x8xi32>",
        "graph.exp %x : tensor<4x8xi32>",
        "graph.exp: operand element type must be f32, f16 or bf16, got i32",
    ),
    (
        "%x: tensor<4x8xf32>",
        "graph.cast %x : tensor<4x8xf32> -> tensor<4x8xf32>",
        "graph.cast: operand and result are both f32; cast must convert",
    ),
    (
        "%x: tensor<4x8xf32>",
        "graph.reduce_sum %x {dims = array<i64: 2>} : tensor<4x8xf32> -> tensor<4xf32>",
        "graph.reduce_sum: reduced dim 2 is out of range for rank 2",
    ),
    (
        "%x: tensor<4x8xf32>",
        "graph.reduce_sum %x {dims = array<i64: 1, 1>} : tensor<4x8xf32> -> tensor<4xf32>",
        "graph.reduce_sum: dims contain duplicates: [1, 1]",
    ),
    (
        "%x: tensor<4x8xf32>",
        "graph.reduce_mean %x {dims = array<i64: 1>} : tensor<4x8xf32> -> tensor<4x1xf32>",
        "graph.reduce_mean: result shape must be 4, got 4x1",
    ),
    (
        "%x: tensor<4x8xf32>",
        "graph.transpose %x {perm = array<i64: 0, 2>} : tensor<4x8xf32> -> tensor<4x8xf32>",
        "graph.transpose: perm [0, 2] is not a permutation of 0..1",
    ),
    (
        "%x: tensor<4x8xf32>",
        "graph.reshape %x : tensor<4x8xf32> -> tensor<30xf32>",
        "graph.reshape: element counts differ: operand has 32, result has 30",
    ),
    (
        "%x: tensor<3xf32>",
        "graph.broadcast %x : tensor<3xf32> -> tensor<4x8xf32>",
        "graph.broadcast: operand dim 0 has size 3, which cannot broadcast to 8 (3 -> 4x8)",
    ),
    (
        "%x: tensor<4x8xf32>",
        "graph.softmax %x {dim = -1 : i64} : tensor<4x8xf32>",
        "graph.softmax: dim -1 is out of range for rank 2",
    ),
    (
        "%x: tensor<4x8xf32>, %w: tensor<4xf32>",
        "graph.rms_norm %x, %w {eps = 1.0e-06 : f32} "
        ": (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>",
        "graph.rms_norm: weight shape must be 8, got 4",
    ),
    (
        "%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<8xbf16>",
        "graph.layer_norm %x, %w, %b {eps = 1.0e-05 : f32} "
        ": (tensor<4x8xf32>, tensor<8xf32>, tensor<8xbf16>) -> tensor<4x8xf32>",
        "graph.layer_norm: element types differ: x is f32, bias is bf16",
    ),
    (
        "%x: tensor<4x8xf32>, %w: tensor<8x16xf32>",
        "graph.linear %x, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>",
        "graph.linear: contraction dims differ: x has K=8, weight has K=16",
    ),
    (
        "%q: tensor<4x16x8xf32>",
        "graph.attention %q, %q, %q {scale = 1.0 : f32} : (tensor<4x16x8xf32>, "
        "tensor<4x16x8xf32>, tensor<4x16x8xf32>) -> tensor<4x16x8xf32>",
        "graph.attention: q must be rank 4 [B, H, S, D], got rank 3",
    ),
]


@pytest.mark.parametrize(("args", "op", "message"), VERIFY_ERRORS)
def test_verifier_errors(ctx: Context, args: str, op: str, message: str) -> None:
    module = parse(ctx, f"func.func @f({args}) {{\n  %r = {op}\n  func.return\n}}")
    with pytest.raises(VerifyException, match=re.escape(message)):
        module.verify()


def test_mismatched_binary_operand_types_are_rejected(ctx: Context) -> None:
    module = parse(
        ctx,
        """func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x9xf32>) {
          %r = "graph.add"(%a, %b) : (tensor<4x8xf32>, tensor<4x9xf32>) -> tensor<4x8xf32>
          func.return
        }""",
    )
    with pytest.raises(VerifyException, match="tensor<4x9xf32>"):
        module.verify()
