"""Tests of the fuse pass: kernel counts and shapes, and numbers against the graph reference."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.context import Context
from xdsl.dialects import arith, builtin, func, math, memref
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.compiler import lower
from tinyopt.backends.reference import random_inputs, run_reference
from tinyopt.dialects import loop
from tinyopt.dialects.graph import Graph
from tinyopt.passes.graph_to_loop.fuse import FusePass
from tinyopt.passes.graph_to_loop.fuse_kernel import CONTRACTION_ATTR
from tinyopt.passes.loop_rewrites.collapse_dims import collapse_dims


def _context() -> Context:
    ctx = Context(allow_unregistered=True)
    for dialect in (
        builtin.Builtin,
        func.Func,
        arith.Arith,
        math.Math,
        memref.MemRef,
        Graph,
        loop.Loop,
    ):
        ctx.load_dialect(dialect)
    return ctx


def _fuse(source: str) -> tuple[ModuleOp, ModuleOp]:
    """Parse `source`; return it unchanged and a fused, verified copy."""
    ctx = _context()
    module = Parser(ctx, source).parse_module()
    fused = module.clone()
    FusePass().apply(ctx, fused)
    fused.verify()
    return module, fused


def _check(source: str, kernels: int, rtol: float = 1e-5, collapse: bool = False) -> ModuleOp:
    """Fuse `source` (and collapse its contractions' loops, as planning does), check the
    kernel count, and compare the numbers with the reference."""
    module, fused = _fuse(source)
    if collapse:
        for kernel in loop.kernels(fused):
            collapse_dims(fused, kernel)
    assert len(loop.kernels(fused)) == kernels, str(fused)
    _assert_matches_reference(module, fused, rtol)
    return fused


def _assert_matches_reference(module: ModuleOp, fused: ModuleOp, rtol: float = 1e-5) -> None:
    """Run the fused module's host function and compare it with the graph reference."""
    function = next(op for op in module.ops if isinstance(op, func.FuncOp))
    inputs = random_inputs(module, seed=0)
    expected = run_reference(module, *inputs)
    actual = run_loop_module(fused, function.sym_name.data, *inputs)
    assert len(actual) == len(expected)
    for out, ref in zip(actual, expected):
        np.testing.assert_allclose(out.astype(np.float64), ref, rtol=rtol, atol=rtol)


def _ops(kernel: loop.KernelOp, type_: type) -> list:
    return [op for op in kernel.walk() if isinstance(op, type_)]


def test_elementwise_chain_with_broadcast_bias_and_gelu() -> None:
    fused = _check(
        """
        func.func @f(%x: tensor<3x7xf32>, %b: tensor<7xf32>) -> tensor<3x7xf32> {
          %bb = graph.broadcast %b : tensor<7xf32> -> tensor<3x7xf32>
          %s = graph.add %x, %bb : tensor<3x7xf32>
          %g = graph.gelu %s : tensor<3x7xf32>
          %t = graph.tanh %g : tensor<3x7xf32>
          func.return %t : tensor<3x7xf32>
        }""",
        kernels=1,
    )
    (kernel,) = loop.kernels(fused)
    assert len(_ops(kernel, loop.ParallelOp)) == 1
    assert not _ops(kernel, loop.ReduceOp)


@pytest.mark.parametrize("dtype,rtol", [("f32", 1e-5), ("bf16", 2e-2)])
def test_softmax_is_one_row_kernel(dtype: str, rtol: float) -> None:
    fused = _check(
        f"""
        func.func @softmax(%x: tensor<5x33x{dtype}>) -> tensor<5x33x{dtype}> {{
          %y = graph.softmax %x {{dim = 1 : i64}} : tensor<5x33x{dtype}>
          func.return %y : tensor<5x33x{dtype}>
        }}""",
        kernels=1,
        rtol=rtol,
    )
    (kernel,) = loop.kernels(fused)
    assert kernel.sym_name.data == "softmax_0"
    (outer,) = [op for op in kernel.body.block.ops if isinstance(op, loop.ParallelOp)]
    assert outer.extents == (5,)
    row_ops = list(outer.body.block.ops)
    assert [op.extents for op in row_ops if isinstance(op, loop.ReduceOp)] == [(33,), (33,)]
    assert isinstance(row_ops[-1], loop.ParallelOp) and row_ops[-1].extents == (33,)


def test_rms_norm_is_one_kernel() -> None:
    _check(
        """
        func.func @rms(%x: tensor<5x33xf32>, %w: tensor<33xf32>) -> tensor<5x33xf32> {
          %y = graph.rms_norm %x, %w {eps = 1.0e-06 : f32} : (tensor<5x33xf32>, tensor<33xf32>) -> tensor<5x33xf32>
          func.return %y : tensor<5x33xf32>
        }""",
        kernels=1,
    )


def test_layer_norm_is_one_kernel_with_two_reductions() -> None:
    fused = _check(
        """
        func.func @ln(%x: tensor<3x2x7xf32>, %w: tensor<7xf32>, %b: tensor<7xf32>) -> tensor<3x2x7xf32> {
          %y = graph.layer_norm %x, %w, %b {eps = 1.0e-05 : f32} : (tensor<3x2x7xf32>, tensor<7xf32>, tensor<7xf32>) -> tensor<3x2x7xf32>
          func.return %y : tensor<3x2x7xf32>
        }""",
        kernels=1,
    )
    (kernel,) = loop.kernels(fused)
    (outer,) = [op for op in kernel.body.block.ops if isinstance(op, loop.ParallelOp)]
    assert outer.extents == (3, 2)
    reduces = [op for op in outer.body.block.ops if isinstance(op, loop.ReduceOp)]
    assert len(reduces) == 2


def test_standalone_reduce_sum() -> None:
    fused = _check(
        """
        func.func @rsum(%x: tensor<5x33xf32>) -> tensor<5xf32> {
          %e = graph.exp %x : tensor<5x33xf32>
          %s = graph.reduce_sum %e {dims = array<i64: 1>, keepdim = false} : tensor<5x33xf32> -> tensor<5xf32>
          func.return %s : tensor<5xf32>
        }""",
        kernels=1,
    )
    (kernel,) = loop.kernels(fused)
    (outer,) = [op for op in kernel.body.block.ops if isinstance(op, loop.ParallelOp)]
    assert outer.extents == (5,)
    assert len(_ops(kernel, loop.ReduceOp)) == 1
    assert len(_ops(kernel, loop.ParallelOp)) == 1


def test_non_trailing_reduction_gets_its_own_kernel() -> None:
    _check(
        """
        func.func @colnorm(%x: tensor<5x7xf32>) -> tensor<5x7xf32> {
          %m = graph.reduce_mean %x {dims = array<i64: 0>, keepdim = true} : tensor<5x7xf32> -> tensor<1x7xf32>
          %mb = graph.broadcast %m : tensor<1x7xf32> -> tensor<5x7xf32>
          %y = graph.sub %x, %mb : tensor<5x7xf32>
          func.return %y : tensor<5x7xf32>
        }""",
        kernels=2,
    )


def test_transpose_add() -> None:
    _check(
        """
        func.func @ta(%x: tensor<3x7xf32>, %y: tensor<7x3xf32>) -> tensor<7x3xf32> {
          %t = graph.transpose %x {perm = array<i64: 1, 0>} : tensor<3x7xf32> -> tensor<7x3xf32>
          %s = graph.add %t, %y : tensor<7x3xf32>
          func.return %s : tensor<7x3xf32>
        }""",
        kernels=1,
    )


def test_reshape() -> None:
    _check(
        """
        func.func @rs(%x: tensor<3x14xf32>, %y: tensor<6x7xf32>) -> tensor<6x7xf32> {
          %r = graph.reshape %x : tensor<3x14xf32> -> tensor<6x7xf32>
          %n = graph.neg %r : tensor<6x7xf32>
          %s = graph.mul %n, %y : tensor<6x7xf32>
          func.return %s : tensor<6x7xf32>
        }""",
        kernels=1,
    )


def test_matmul_with_prologue_and_epilogue_is_one_kernel() -> None:
    fused = _check(
        """
        func.func @mm(%x: tensor<5x33xf32>, %bias: tensor<33xf32>, %w: tensor<33x7xf32>) -> tensor<5x7xf32> {
          %bb = graph.broadcast %bias : tensor<33xf32> -> tensor<5x33xf32>
          %xb = graph.add %x, %bb : tensor<5x33xf32>
          %m = graph.matmul %xb, %w : (tensor<5x33xf32>, tensor<33x7xf32>) -> tensor<5x7xf32>
          %r = graph.relu %m : tensor<5x7xf32>
          func.return %r : tensor<5x7xf32>
        }""",
        kernels=1,
    )
    (kernel,) = loop.kernels(fused)
    (reduce,) = _ops(kernel, loop.ReduceOp)
    assert CONTRACTION_ATTR in reduce.attributes
    body = [op.name for op in reduce.body.block.ops]
    assert body == [
        "memref.load",
        "memref.load",
        "arith.addf",
        "memref.load",
        "arith.mulf",
        "loop.yield",
    ]


def test_two_layer_mlp_is_two_kernels() -> None:
    fused = _check(
        """
        func.func @mlp(%x: tensor<5x33xf32>, %w1: tensor<33x9xf32>, %b1: tensor<9xf32>, %w2: tensor<9x7xf32>) -> tensor<5x7xf32> {
          %h = graph.matmul %x, %w1 : (tensor<5x33xf32>, tensor<33x9xf32>) -> tensor<5x9xf32>
          %bb = graph.broadcast %b1 : tensor<9xf32> -> tensor<5x9xf32>
          %hb = graph.add %h, %bb : tensor<5x9xf32>
          %a = graph.relu %hb : tensor<5x9xf32>
          %y = graph.matmul %a, %w2 : (tensor<5x9xf32>, tensor<9x7xf32>) -> tensor<5x7xf32>
          func.return %y : tensor<5x7xf32>
        }""",
        kernels=2,
    )
    first, second = loop.kernels(fused)
    assert [op.name for op in _ops(first, loop.ReduceOp)[0].body.block.ops][-2] == "arith.mulf"
    assert len(second.body.block.args) == 3


@pytest.mark.parametrize(
    ("a", "kernels"),
    [("%x", 1), ("%y", 2), ("%g33", 3)],
    ids=["shared_a_paired", "other_a", "reads_the_first"],
)
def test_two_matmuls_are_paired_only_when_they_share_a(a: str, kernels: int) -> None:
    # silu(x @ wg) * (a @ wu): with a = x both K loops share one kernel (a paired contraction);
    # another A tensor, or an A computed from the first matmul, gets the second its own kernel.
    fused = _check(
        f"""
        func.func @gate(%x: tensor<5x33xf32>, %y: tensor<5x33xf32>, %wg: tensor<33x7xf32>, %wu: tensor<33x7xf32>, %w33: tensor<7x33xf32>) -> tensor<5x7xf32> {{
          %g = graph.matmul %x, %wg : (tensor<5x33xf32>, tensor<33x7xf32>) -> tensor<5x7xf32>
          %g33 = graph.matmul %g, %w33 : (tensor<5x7xf32>, tensor<7x33xf32>) -> tensor<5x33xf32>
          %u = graph.matmul {a}, %wu : (tensor<5x33xf32>, tensor<33x7xf32>) -> tensor<5x7xf32>
          %s = graph.silu %g : tensor<5x7xf32>
          %p = graph.mul %s, %u : tensor<5x7xf32>
          func.return %p : tensor<5x7xf32>
        }}""",
        kernels=kernels,
    )
    if kernels == 1:
        (kernel,) = loop.kernels(fused)
        reduces = _ops(kernel, loop.ReduceOp)
        assert len(reduces) == 2 and all(CONTRACTION_ATTR in r.attributes for r in reduces)
    else:
        assert all(len(_ops(k, loop.ReduceOp)) <= 1 for k in loop.kernels(fused))


def test_batched_matmul() -> None:
    _check(
        """
        func.func @bmm(%a: tensor<2x3x5xf32>, %b: tensor<2x5x4xf32>) -> tensor<2x3x4xf32> {
          %m = graph.matmul %a, %b : (tensor<2x3x5xf32>, tensor<2x5x4xf32>) -> tensor<2x3x4xf32>
          func.return %m : tensor<2x3x4xf32>
        }""",
        kernels=1,
    )


def test_softmax_of_matmul_materializes_the_matmul() -> None:
    _check(
        """
        func.func @att(%q: tensor<4x6xf32>, %k: tensor<6x5xf32>) -> tensor<4x5xf32> {
          %s = graph.matmul %q, %k : (tensor<4x6xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
          %c = graph.constant dense<0.5> : tensor<4x5xf32>
          %ss = graph.mul %s, %c : tensor<4x5xf32>
          %p = graph.softmax %ss {dim = 1 : i64} : tensor<4x5xf32>
          func.return %p : tensor<4x5xf32>
        }""",
        kernels=2,
    )


def test_linear_on_rank_3_input_is_one_gemm_over_all_rows() -> None:
    """[batch, seq, hidden] @ wᵀ: one kernel with its epilogue (bias, gelu) fused, whose loops
    collapse to (batch·seq, n), reading x and writing y through collapse_shape views."""
    fused = _check(
        """
        func.func @lin(%x: tensor<2x3x6xf16>, %w: tensor<5x6xf16>, %b: tensor<5xf16>) -> tensor<2x3x5xf16> {
          %y = graph.linear %x, %w, %b : (tensor<2x3x6xf16>, tensor<5x6xf16>, tensor<5xf16>) -> tensor<2x3x5xf16>
          %g = graph.gelu %y : tensor<2x3x5xf16>
          func.return %g : tensor<2x3x5xf16>
        }""",
        kernels=1,
        rtol=1e-2,
        collapse=True,
    )
    (kernel,) = loop.kernels(fused)
    (nest,) = kernel.body.block.ops
    assert isinstance(nest, loop.ParallelOp) and nest.extents == (6, 5)
    assert [str(a.type) for a in kernel.body.block.args] == [
        "memref<6x6xf16>",
        "memref<5x6xf16>",
        "memref<5xf16>",
        "memref<6x5xf16>",
    ]
    assert "math.erf" in _epilogue(kernel)
    views = [op for op in fused.walk() if isinstance(op, memref.CollapseShapeOp)]
    assert [str(v.src.type) for v in views] == ["memref<2x3x6xf16>", "memref<2x3x5xf16>"]


def test_batched_dims_that_buffers_do_not_share_stay_apart() -> None:
    """A bmm reads both operands at the batch index: batch and row loops do not collapse."""
    fused = _check(
        """
        func.func @bmm(%a: tensor<3x4x6xf32>, %b: tensor<3x6x5xf32>) -> tensor<3x4x5xf32> {
          %y = graph.matmul %a, %b : (tensor<3x4x6xf32>, tensor<3x6x5xf32>) -> tensor<3x4x5xf32>
          func.return %y : tensor<3x4x5xf32>
        }""",
        kernels=1,
        collapse=True,
    )
    (kernel,) = loop.kernels(fused)
    (nest,) = kernel.body.block.ops
    assert nest.extents == (3, 4, 5)
    assert not any(isinstance(op, memref.CollapseShapeOp) for op in fused.walk())


def _epilogue(kernel: loop.KernelOp) -> list[str]:
    """Return the names of the ops after a contraction kernel's K loop (constants left out)."""
    (nest,) = kernel.body.block.ops
    ops = list(nest.body.block.ops)
    (reduce,) = (op for op in ops if isinstance(op, loop.ReduceOp))
    assert CONTRACTION_ATTR in reduce.attributes
    return [op.name for op in ops[ops.index(reduce) + 1 :] if op.name != "arith.constant"]


def test_residual_adds_through_unit_dim_reshapes_are_gemm_epilogues() -> None:
    """Llama's `x1 = x + o(..)` and `x1 + down(f(x1))` on [1, s, d], the matmuls on [s, d]."""
    fused = _check(
        """
        func.func @res(%x: tensor<1x8x16xf32>, %wo: tensor<16x16xf32>, %wd: tensor<16x16xf32>) -> tensor<1x8x16xf32> {
          %h = graph.reshape %x : tensor<1x8x16xf32> -> tensor<8x16xf32>
          %o = graph.matmul %h, %wo : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
          %o3 = graph.reshape %o : tensor<8x16xf32> -> tensor<1x8x16xf32>
          %x1 = graph.add %x, %o3 : tensor<1x8x16xf32>
          %r = graph.relu %x1 : tensor<1x8x16xf32>
          %r2 = graph.reshape %r : tensor<1x8x16xf32> -> tensor<8x16xf32>
          %d = graph.matmul %r2, %wd : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
          %d3 = graph.reshape %d : tensor<8x16xf32> -> tensor<1x8x16xf32>
          %y = graph.add %x1, %d3 : tensor<1x8x16xf32>
          func.return %y : tensor<1x8x16xf32>
        }""",
        kernels=2,
    )
    residual = builtin.MemRefType(builtin.f32, [1, 8, 16])
    for kernel in loop.kernels(fused):
        assert _epilogue(kernel) == ["memref.load", "arith.addf", "memref.store"]
        assert kernel.body.block.args[-1].type == residual


def test_reshape_that_moves_the_index_is_not_an_epilogue() -> None:
    """[8, 16] -> [1, 8, 2, 8] splits a loop dim: the matmul is stored, the add is a kernel."""
    fused = _check(
        """
        func.func @split(%x: tensor<1x8x2x8xf32>, %h: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<1x8x2x8xf32> {
          %o = graph.matmul %h, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
          %o4 = graph.reshape %o : tensor<8x16xf32> -> tensor<1x8x2x8xf32>
          %y = graph.add %x, %o4 : tensor<1x8x2x8xf32>
          func.return %y : tensor<1x8x2x8xf32>
        }""",
        kernels=2,
    )
    matmul, add = loop.kernels(fused)
    assert _epilogue(matmul) == ["memref.store"]
    assert not _ops(add, loop.ReduceOp)


def test_matmul_read_by_two_results_through_a_reshape_is_stored_once() -> None:
    fused = _check(
        """
        func.func @two(%x: tensor<1x8x16xf32>, %h: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> (tensor<1x8x16xf32>, tensor<1x8x16xf32>) {
          %o = graph.matmul %h, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
          %o3 = graph.reshape %o : tensor<8x16xf32> -> tensor<1x8x16xf32>
          %a = graph.add %x, %o3 : tensor<1x8x16xf32>
          %b = graph.mul %o3, %x : tensor<1x8x16xf32>
          func.return %a, %b : tensor<1x8x16xf32>, tensor<1x8x16xf32>
        }""",
        kernels=3,
    )
    matmul, *elementwise = loop.kernels(fused)
    assert _epilogue(matmul) == ["memref.store"]
    assert all(not _ops(k, loop.ReduceOp) for k in elementwise)


def test_causal_attention() -> None:
    fused = _check(
        """
        func.func @att(%q: tensor<1x2x5x4xf32>, %k: tensor<1x2x5x4xf32>, %v: tensor<1x2x5x4xf32>) -> tensor<1x2x5x4xf32> {
          %o = graph.attention %q, %k, %v {causal = true, scale = 0.5 : f32} : (tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>, tensor<1x2x5x4xf32>) -> tensor<1x2x5x4xf32>
          func.return %o : tensor<1x2x5x4xf32>
        }""",
        kernels=3,
    )
    # P·V stores the [B=1, H, S, D] result itself: the reshape from [B·H, S, D] only adds a unit dim.
    scores, softmax, pv = loop.kernels(fused)
    assert pv.body.block.args[-1].type == builtin.MemRefType(builtin.f32, [1, 2, 5, 4])
    assert CONTRACTION_ATTR in _ops(scores, loop.ReduceOp)[0].attributes
    assert len(_ops(softmax, loop.ReduceOp)) == 2


def test_casts_unary_ops_and_several_results() -> None:
    _check(
        """
        func.func @misc(%x: tensor<3x4xf32>, %y: tensor<3x4xbf16>) -> (tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x1xf32>, tensor<f32>, tensor<3x4xf32>) {
          %a = graph.abs %x : tensor<3x4xf32>
          %p = graph.pow %a, %a : tensor<3x4xf32>
          %s = graph.silu %p : tensor<3x4xf32>
          %g = graph.sigmoid %s : tensor<3x4xf32>
          %yc = graph.cast %y : tensor<3x4xbf16> -> tensor<3x4xf32>
          %h = graph.cast %g : tensor<3x4xf32> -> tensor<3x4xf16>
          %hc = graph.cast %h : tensor<3x4xf16> -> tensor<3x4xf32>
          %z = graph.min %hc, %yc : tensor<3x4xf32>
          %m = graph.reduce_mean %z {dims = array<i64: 1>, keepdim = true} : tensor<3x4xf32> -> tensor<3x1xf32>
          %t = graph.reduce_sum %z {dims = array<i64: 0, 1>, keepdim = false} : tensor<3x4xf32> -> tensor<f32>
          func.return %x, %z, %m, %t, %x : tensor<3x4xf32>, tensor<3x4xf32>, tensor<3x1xf32>, tensor<f32>, tensor<3x4xf32>
        }""",
        kernels=4,
    )


def test_non_splat_constant_becomes_a_global() -> None:
    fused = _check(
        """
        func.func @cst(%x: tensor<2x3xf16>) -> tensor<2x3xf16> {
          %c = graph.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf16>
          %y = graph.mul %x, %c : tensor<2x3xf16>
          func.return %y : tensor<2x3xf16>
        }""",
        kernels=1,
        rtol=1e-3,
    )
    assert any(isinstance(op, memref.GlobalOp) for op in fused.ops)


def test_shared_reduction_is_computed_once() -> None:
    _check(
        """
        func.func @two(%x: tensor<3x7xf32>) -> (tensor<3x1xf32>, tensor<3x7xf32>) {
          %m = graph.reduce_max %x {dims = array<i64: 1>, keepdim = true} : tensor<3x7xf32> -> tensor<3x1xf32>
          %mb = graph.broadcast %m : tensor<3x1xf32> -> tensor<3x7xf32>
          %y = graph.sub %x, %mb : tensor<3x7xf32>
          func.return %m, %y : tensor<3x1xf32>, tensor<3x7xf32>
        }""",
        kernels=2,
    )


def test_unknown_op_is_a_diagnostic() -> None:
    with pytest.raises(DiagnosticException, match="fuse: cannot lower 'foo.bar'"):
        _fuse(
            """
            func.func @bad(%x: tensor<3x7xf32>) -> tensor<3x7xf32> {
              %y = "foo.bar"(%x) : (tensor<3x7xf32>) -> tensor<3x7xf32>
              func.return %y : tensor<3x7xf32>
            }"""
        )


ROPE = """
func.func @rope(%x: tensor<2x3x8xbf16>, %c: tensor<3x8xbf16>, %s: tensor<3x8xbf16>) -> tensor<2x3x8xbf16> {
  %hi = graph.slice %x {dim = 2 : i64, start = 4 : i64, step = 1 : i64} : tensor<2x3x8xbf16> -> tensor<2x3x4xbf16>
  %lo = graph.slice %x {dim = 2 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x3x8xbf16> -> tensor<2x3x4xbf16>
  %n = graph.neg %hi : tensor<2x3x4xbf16>
  %r = graph.concat %n, %lo {dim = 2 : i64} : (tensor<2x3x4xbf16>, tensor<2x3x4xbf16>) -> tensor<2x3x8xbf16>
  %cb = graph.broadcast %c : tensor<3x8xbf16> -> tensor<2x3x8xbf16>
  %sb = graph.broadcast %s : tensor<3x8xbf16> -> tensor<2x3x8xbf16>
  %a = graph.mul %x, %cb : tensor<2x3x8xbf16>
  %b = graph.mul %r, %sb : tensor<2x3x8xbf16>
  %y = graph.add %a, %b : tensor<2x3x8xbf16>
  func.return %y : tensor<2x3x8xbf16>
}"""


def test_rope_slices_and_concat_are_index_maps_in_one_kernel() -> None:
    fused = _check(ROPE, kernels=1, rtol=2e-2)
    (kernel,) = loop.kernels(fused)
    # Each half is read at a clamped index and the concat picks one by the column.
    assert len(_ops(kernel, arith.SelectOp)) == 1
    assert len(_ops(kernel, arith.MinSIOp)) == 1 and len(_ops(kernel, arith.MaxSIOp)) == 1


def test_strided_slice_and_concat_of_three_along_a_middle_dim() -> None:
    fused = _check(
        """
        func.func @cat(%x: tensor<2x9x3xf32>, %y: tensor<2x1x3xf32>, %z: tensor<2x2x3xf32>) -> tensor<2x6x3xf32> {
          %s = graph.slice %x {dim = 1 : i64, start = 1 : i64, step = 3 : i64} : tensor<2x9x3xf32> -> tensor<2x3x3xf32>
          %e = graph.exp %z : tensor<2x2x3xf32>
          %c = graph.concat %s, %y, %e {dim = 1 : i64} : (tensor<2x3x3xf32>, tensor<2x1x3xf32>, tensor<2x2x3xf32>) -> tensor<2x6x3xf32>
          func.return %c : tensor<2x6x3xf32>
        }""",
        kernels=1,
    )
    (kernel,) = loop.kernels(fused)
    assert len(_ops(kernel, arith.SelectOp)) == 2


def test_concat_feeding_a_row_reduction() -> None:
    _check(
        """
        func.func @cat_softmax(%x: tensor<3x5xf32>, %y: tensor<3x2xf32>) -> tensor<3x7xf32> {
          %c = graph.concat %x, %y {dim = 1 : i64} : (tensor<3x5xf32>, tensor<3x2xf32>) -> tensor<3x7xf32>
          %s = graph.softmax %c {dim = 1 : i64} : tensor<3x7xf32>
          func.return %s : tensor<3x7xf32>
        }""",
        kernels=1,
    )


EMBED_NORM = """
func.func @embed(%t: tensor<10x8xbf16>, %i: tensor<2x3xi64>, %w: tensor<8xbf16>) -> tensor<2x3x8xbf16> {
  %y = graph.gather %t, %i : (tensor<10x8xbf16>, tensor<2x3xi64>) -> tensor<2x3x8xbf16>
  %n = graph.rms_norm %y, %w {eps = 1.0e-06 : f32} : (tensor<2x3x8xbf16>, tensor<8xbf16>) -> tensor<2x3x8xbf16>
  func.return %n : tensor<2x3x8xbf16>
}"""


def test_gather_reads_the_table_at_the_loaded_id_inside_the_norm_kernel() -> None:
    fused = _check(EMBED_NORM, kernels=1, rtol=2e-2)
    (kernel,) = loop.kernels(fused)
    id_loads = [op for op in _ops(kernel, memref.LoadOp) if "i64" in str(op.memref.type)]
    assert len(id_loads) == 1  # once per row, shared by the reduction and the output loop
    assert len(_ops(kernel, arith.IndexCastOp)) == 1


def test_out_of_range_ids_are_clamped_like_the_reference() -> None:
    module, fused = _fuse(EMBED_NORM)
    table, _, weight = random_inputs(module, seed=1)
    ids = np.array([[-3, 0, 9], [10, 4, 1 << 40]], dtype=np.int64)
    (expected,) = run_reference(module, table, ids, weight)
    (actual,) = run_loop_module(fused, "embed", table, ids, weight)
    np.testing.assert_allclose(actual, expected, rtol=2e-2, atol=2e-2)
    np.testing.assert_array_equal(actual[0, 0], actual[0, 1])  # -3 reads row 0


def _compile_kernels(source: str) -> int:
    """Lower `source` to CUDA and compile every kernel with NVRTC; return how many."""
    from tinyopt.backends.cuda.cache import cached_compile
    from tinyopt.compiler import lower

    _, module = lower(source, "fuse,tile,to-cuda")
    kernels = [op for op in module.ops if op.name == "tile.cuda_kernel"]
    for op in kernels:
        assert cached_compile(op.properties["source"].data, op.properties["sym_name"].data)
    return len(kernels)


@pytest.mark.parametrize("source", [ROPE, EMBED_NORM], ids=["rope", "embedding"])
def test_slice_concat_and_gather_kernels_compile_with_nvrtc(source: str) -> None:
    assert _compile_kernels(source) == 1


@pytest.mark.parametrize(
    "knobs", ["", "splitk=4", "splitk=2 splitk_mode=twopass", "streamk=on skinny=off"]
)
def test_collapsed_linear_through_the_planners_rewrites_matches_the_reference(knobs: str) -> None:
    """A [batch, seq, hidden] linear + GELU, planned (loops collapsed, views on the host) and
    rewritten by split-K or stream-K, still computes the float64 reference at loop level."""
    text = """
    func.func @mlp(%x: tensor<2x5x24xf32>, %w: tensor<40x24xf32>, %b: tensor<40xf32>) -> tensor<2x5x40xf32> {
      %h = graph.linear %x, %w, %b : (tensor<2x5x24xf32>, tensor<40x24xf32>, tensor<40xf32>) -> tensor<2x5x40xf32>
      %g = graph.gelu %h : tensor<2x5x40xf32>
      func.return %g : tensor<2x5x40xf32>
    }"""
    program, planned = lower(text, f"fuse,plan{{{knobs}}}")
    assert sum(isinstance(op, memref.CollapseShapeOp) for op in planned.walk()) == 2
    inputs = random_inputs(program, seed=1)
    (expected,) = run_reference(program, *inputs)
    (actual,) = run_loop_module(planned, "mlp", *inputs)
    np.testing.assert_allclose(actual, expected, rtol=1e-5, atol=1e-5)


def _softmax_chain(depth: int) -> str:
    """A function of `depth` softmaxes, each of the previous one's output."""
    t = "tensor<3x9xf32>"
    chain = "\n".join(
        f"  %x{i + 1} = graph.softmax %x{i} {{dim = 1 : i64}} : {t}" for i in range(depth)
    )
    return f"func.func @chain(%x0: {t}) -> {t} {{\n{chain}\n  func.return %x{depth} : {t}\n}}"


def _exps_per_element(fused: ModuleOp) -> int:
    """Count the exps of all kernels: each runs once per element of the row it loops over."""
    return sum(len(_ops(kernel, math.ExpOp)) for kernel in loop.kernels(fused))


def test_two_chained_softmaxes_recompute_the_first_in_one_kernel() -> None:
    """Recomputing the first softmax in the second one's reductions costs less than storing it
    (fuse_cost): one row kernel."""
    _check(_softmax_chain(2), kernels=1)


def test_chained_softmaxes_match_the_reference_with_a_linear_exp_count() -> None:
    """Six chained softmaxes match the reference, and no softmax is recomputed by every later
    one: the exps per element per softmax at depth 24 stay within 1.5× those at depth 6 (all
    inlined into one kernel, depth·(depth + 1) exps: 7 per softmax at depth 6, 25 at 24)."""
    module, fused = _fuse(_softmax_chain(6))
    _assert_matches_reference(module, fused)
    per_softmax = {d: _exps_per_element(_fuse(_softmax_chain(d))[1]) / d for d in (6, 24)}
    assert per_softmax[24] <= 1.5 * per_softmax[6], per_softmax


def _views(fused: ModuleOp) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Return the (source, view) shapes of the host's `memref.collapse_shape` views."""
    return [
        (v.src.type.get_shape(), v.result.type.get_shape())  # type: ignore[attr-defined]
        for v in fused.walk()
        if isinstance(v, memref.CollapseShapeOp)
    ]


@pytest.mark.parametrize(
    ("source", "view"),
    [
        (
            """
            func.func @split_n(%h: tensor<8x16xf32>, %w: tensor<16x12xf32>) -> tensor<8x3x4xf32> {
              %o = graph.matmul %h, %w : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
              %r = graph.reshape %o : tensor<8x12xf32> -> tensor<8x3x4xf32>
              func.return %r : tensor<8x3x4xf32>
            }""",
            ((8, 3, 4), (8, 12)),
        ),
        (
            """
            func.func @split_m(%x: tensor<6x16xf32>, %w: tensor<16x12xf32>) -> tensor<2x3x12xf32> {
              %o = graph.matmul %x, %w : (tensor<6x16xf32>, tensor<16x12xf32>) -> tensor<6x12xf32>
              %g = graph.gelu %o : tensor<6x12xf32>
              %y = graph.reshape %g : tensor<6x12xf32> -> tensor<2x3x12xf32>
              func.return %y : tensor<2x3x12xf32>
            }""",
            ((2, 3, 12), (6, 12)),
        ),
        (
            """
            func.func @heads(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<1x8x2x8xf32> {
              %o = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
              %r = graph.reshape %o : tensor<8x16xf32> -> tensor<1x8x2x8xf32>
              func.return %r : tensor<1x8x2x8xf32>
            }""",
            ((1, 8, 2, 8), (8, 16)),
        ),
    ],
    ids=["split-n", "split-m-after-epilogue", "unit-dim-and-heads"],
)
def test_reshape_splitting_a_matmul_is_folded_into_its_store(
    source: str, view: tuple[tuple[int, ...], tuple[int, ...]]
) -> None:
    """One kernel: the GEMM keeps its own loops and stores a collapsed view of the reshaped
    result at them (no index arithmetic in the store), with no copy kernel."""
    fused = _check(source, kernels=1)
    assert _views(fused) == [view]
    (kernel,) = loop.kernels(fused)
    (nest,) = kernel.body.block.ops
    (store,) = _ops(kernel, memref.StoreOp)
    assert isinstance(nest, loop.ParallelOp) and list(store.indices) == list(nest.body.block.args)


def test_folded_reshape_of_a_batched_linear_collapses_its_loops() -> None:
    """[2, 3, 6] @ w split into heads [2, 3, 2, 5]: the kernel stores a [2, 3, 10] view, whose
    batch and row loops collapse_dims then merges into one GEMM over 6 rows (a view of the
    view), matching the reference."""
    fused = _check(
        """
        func.func @lin(%x: tensor<2x3x6xf32>, %w: tensor<6x10xf32>) -> tensor<2x3x2x5xf32> {
          %wb = graph.broadcast %w : tensor<6x10xf32> -> tensor<2x6x10xf32>
          %o = graph.matmul %x, %wb : (tensor<2x3x6xf32>, tensor<2x6x10xf32>) -> tensor<2x3x10xf32>
          %r = graph.reshape %o : tensor<2x3x10xf32> -> tensor<2x3x2x5xf32>
          func.return %r : tensor<2x3x2x5xf32>
        }""",
        kernels=1,
        collapse=True,
    )
    (kernel,) = loop.kernels(fused)
    (nest,) = kernel.body.block.ops
    assert isinstance(nest, loop.ParallelOp) and nest.extents == (6, 10)
    assert ((2, 3, 10), (6, 10)) in _views(fused)


def test_reshape_merging_a_matmul_dims_stays_a_copy() -> None:
    """Batch and rows merged into 16 rows: the store would need index arithmetic, so the matmul
    gets a buffer and the reshape a copy kernel."""
    fused = _check(
        """
        func.func @merge(%h: tensor<2x8x16xf32>, %w: tensor<2x16x12xf32>) -> tensor<16x12xf32> {
          %o = graph.matmul %h, %w : (tensor<2x8x16xf32>, tensor<2x16x12xf32>) -> tensor<2x8x12xf32>
          %r = graph.reshape %o : tensor<2x8x12xf32> -> tensor<16x12xf32>
          func.return %r : tensor<16x12xf32>
        }""",
        kernels=2,
    )
    assert not _views(fused)


def test_epilogue_reading_a_value_twice_computes_it_once() -> None:
    """`y * sigmoid(y)` with `y = x @ w + b`, the second read through a reshape that splits the
    columns and one that merges them back: the K loop's result feeds one bias add, whose
    result both the sigmoid and the product read."""
    fused = _check(
        """
        func.func @swish(%x: tensor<8x16xf32>, %w: tensor<16x12xf32>, %b: tensor<12xf32>) -> tensor<8x12xf32> {
          %m = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
          %bb = graph.broadcast %b : tensor<12xf32> -> tensor<8x12xf32>
          %y = graph.add %m, %bb : tensor<8x12xf32>
          %s = graph.sigmoid %y : tensor<8x12xf32>
          %y3 = graph.reshape %y : tensor<8x12xf32> -> tensor<8x3x4xf32>
          %y2 = graph.reshape %y3 : tensor<8x3x4xf32> -> tensor<8x12xf32>
          %g = graph.mul %y2, %s : tensor<8x12xf32>
          func.return %g : tensor<8x12xf32>
        }""",
        kernels=1,
    )
    (kernel,) = loop.kernels(fused)
    (reduce,) = _ops(kernel, loop.ReduceOp)
    (bias_add,) = [use.operation for use in reduce.res[0].uses]
    assert isinstance(bias_add, arith.AddfOp)
    readers = {type(use.operation) for use in bias_add.result.uses}
    assert readers == {arith.NegfOp, arith.MulfOp}
