"""Tests of the `flash-attention` rewrite: IR shape, numbers at loop level, and its algebra.

The loop-level executor runs the fused kernel against the float64 graph reference (and the
unfused kernels) on tiny shapes: plain, causal, GQA, odd sequence lengths, bf16, and a mask
input with a fully masked row, whose output the rewrite defines as 0.
"""

from __future__ import annotations

import numpy as np
import pytest
from attention_programs import attention, attention_spelled_out
from programs import softmax
from test_rewrites import _combine_f32
from xdsl.dialects import arith, func, memref
from xdsl.dialects.builtin import ArrayAttr, FloatAttr, ModuleOp, f32
from xdsl.ir import Block, Region

from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import random_inputs, run_reference
from tinyopt.compiler import lower
from tinyopt.dialects import loop
from tinyopt.passes.loop_rewrites.associativity import INIT_ATTR, check_associative
from tinyopt.passes.loop_rewrites.flash_attention import FLASH_ATTR

FLASH = "decompose,fuse,flash-attention"


def _flash_reduce(module: ModuleOp) -> loop.ReduceOp:
    (reduce,) = [op for op in module.walk() if FLASH_ATTR in op.attributes]
    assert isinstance(reduce, loop.ReduceOp)
    return reduce


def _buffer_shapes(module: ModuleOp) -> list[tuple[int, ...]]:
    return [
        tuple(op.memref.type.get_shape())  # type: ignore[attr-defined]
        for op in module.walk()
        if isinstance(op, memref.AllocOp)
    ]


def _run(text: str, pipeline: str, arrays: list[np.ndarray]) -> np.ndarray:
    _, module = lower(text, pipeline)
    (out,) = run_loop_module(module, "attention", *arrays)
    return out.astype(np.float64)


def _rel(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


# ------------------------------------------------------------------------------ IR shape


def test_three_kernels_become_one_without_scores() -> None:
    text = attention(1, 2, 5, 4)
    _, before = lower(text, "decompose,fuse")
    _, after = lower(text, FLASH)
    assert (2, 5, 5) in _buffer_shapes(before)
    assert all(s[-1] != 5 or len(s) != 3 for s in _buffer_shapes(after) if s != (2, 5, 4))
    # Scores, softmax, and P·V, which stores the [B=1, H, S, D] result (its reshape from
    # [B·H, S, D] only adds a unit dim, so there is no copy kernel).
    assert len(loop.kernels(before)) == 3
    assert len(loop.kernels(after)) == 1
    reduce = _flash_reduce(after)
    assert reduce.extents == (5,)
    assert [v.owner.value.value.data for v in reduce.init] == [float("-inf"), 0.0, 0.0]
    nested = [op for op in reduce.body.walk() if isinstance(op, loop.ReduceOp)]
    assert [r.extents for r in nested] == [(4,)]
    assert not any(isinstance(op, memref.StoreOp) for op in reduce.walk())


def test_causal_mask_is_not_a_buffer() -> None:
    """The fused kernel reads no S×S buffer; decompose's causal mask becomes `j > i`."""
    _, module = lower(attention(1, 2, 6, 4, causal=True), FLASH)
    assert not any(isinstance(op, memref.GlobalOp | memref.GetGlobalOp) for op in module.walk())
    reduce = _flash_reduce(module)
    loads = [op for op in reduce.walk() if isinstance(op, memref.LoadOp)]
    assert {len(op.indices) for op in loads} == {4}  # q, k, v only
    compares = [op for op in reduce.walk() if isinstance(op, arith.CmpiOp)]
    assert [(op.predicate.value.data, op.lhs, op.rhs) for op in compares] == [
        (8, reduce.body.block.args[0], reduce.parent_block().args[-2])  # ugt: j > i
    ]


def _transposed_output(text: str) -> str:
    """Returns an attention program whose result is transposed to [B, S, H, D]."""
    t = "tensor<2x3x5x4xf32>"
    moved = "tensor<2x5x3x4xf32>"
    text = text.replace(f"-> {t} {{", f"-> {moved} {{", 1)
    return text.replace(
        f"  func.return %y : {t}",
        f"  %z = graph.transpose %y {{perm = array<i64: 0, 2, 1, 3>}} : {t} -> {moved}\n"
        f"  func.return %z : {moved}",
    )


def test_the_fused_kernel_stores_the_output_layout() -> None:
    """decompose's [B·H, S, D] → [B, H, S, D] reshape is folded into the kernel's store (by
    fuse: the kernel stores a [B·H, S, D] view of the result), no copy and no temporary."""
    _, module = lower(attention(2, 3, 5, 4), FLASH)
    (kernel,) = loop.kernels(module)
    (store,) = [op for op in kernel.walk() if isinstance(op, memref.StoreOp)]
    assert store.memref.type.get_shape() == (2 * 3, 5, 4)  # type: ignore[attr-defined]
    assert _buffer_shapes(module) == [(2, 3, 5, 4)]


@pytest.mark.parametrize(
    ("text", "shape"),
    [
        (_transposed_output(attention(2, 3, 5, 4)), (2, 5, 3, 4)),
        (attention(2, 3, 5, 4, heads_last=True), (2, 5, 12)),
        (attention(1, 4, 6, 4, causal=True, kv_heads=2, heads_last=True), (1, 6, 16)),
    ],
    ids=["b-s-h-d", "b-s-hd", "gqa-causal-s-hd"],
)
def test_the_fused_kernel_stores_a_transposed_output(text: str, shape: tuple[int, ...]) -> None:
    """A copy that puts the heads side by side in a row ([B, S, H, D] or [B, S, H·D], as an
    output projection reads them) is folded too: one kernel, storing the result's layout with
    d the last index's own term (h·D + d, contiguous along d), matching the reference."""
    _, module = lower(text, FLASH)
    (kernel,) = loop.kernels(module)
    (store,) = [op for op in kernel.walk() if isinstance(op, memref.StoreOp)]
    assert store.memref.type.get_shape() == shape  # type: ignore[attr-defined]
    assert _buffer_shapes(module) == [shape]
    nest = kernel.body.block.first_op
    assert isinstance(nest, loop.ParallelOp)
    d, column = nest.body.block.args[-1], store.indices[-1]
    assert column is d or (isinstance(column.owner, arith.AddiOp) and column.owner.rhs is d)
    program, _ = lower(text, "decompose")
    arrays = random_inputs(program, seed=2)
    (ref,) = run_reference(program, *arrays)
    assert _rel(_run(text, FLASH, arrays), ref) < 1e-6


def test_a_copy_that_computes_is_not_folded() -> None:
    """Doubling the transposed output makes its kernel more than a copy: it stays."""
    moved = "tensor<2x5x3x4xf32>"
    text = _transposed_output(attention(2, 3, 5, 4)).replace(
        f"  func.return %z : {moved}",
        f"  %w = graph.add %z, %z : {moved}\n  func.return %w : {moved}",
    )
    _, module = lower(text, FLASH)
    assert len(loop.kernels(module)) == 2
    program, _ = lower(text, "decompose")
    arrays = random_inputs(program, seed=2)
    (ref,) = run_reference(program, *arrays)
    assert _rel(_run(text, FLASH, arrays), ref) < 1e-6


def test_other_programs_are_left_alone() -> None:
    for text in (softmax((4, 16)),):
        _, before = lower(text, "fuse")
        _, after = lower(text, "fuse,flash-attention")
        assert str(before) == str(after)


@pytest.mark.parametrize(("d", "dv"), [(272, 272), (64, 320)], ids=["d272", "dv320"])
def test_head_dims_past_256_stay_unfused(d: int, dv: int) -> None:
    """Every attention schedule stops at head dim 256: past it the pass leaves the three
    kernels (which the GEMM and row rules run) rather than make one that only the sequential
    rule would take."""
    x, kv, out = "tensor<1x2x40x{}xf32>", "tensor<1x2x40x{}xf32>", "tensor<1x2x40x{}xf32>"
    q, k, v, y = x.format(d), kv.format(d), kv.format(dv), out.format(dv)
    text = (
        f"func.func @f(%q: {q}, %k: {k}, %v: {v}) -> {y} {{\n"
        f"  %y = graph.attention %q, %k, %v {{scale = 0.1 : f32}} : ({q}, {k}, {v}) -> {y}\n"
        f"  func.return %y : {y}\n}}"
    )
    _, before = lower(text, "decompose,fuse")
    _, after = lower(text, FLASH)
    assert str(before) == str(after)
    assert not [op for op in after.walk() if FLASH_ATTR in op.attributes]


# ------------------------------------------------------------------------------ numbers


@pytest.mark.parametrize(
    "case",
    [
        dict(b=1, h=2, s=5, d=4),
        dict(b=2, h=1, s=7, d=4, causal=True),
        dict(b=1, h=4, s=5, d=4, kv_heads=2, causal=True),
        dict(b=1, h=2, s=3, d=8, scale=3.0),
    ],
    ids=["plain", "causal-odd-s", "gqa-causal", "large-scale"],
)
def test_fused_kernel_matches_the_reference(case: dict) -> None:
    text = attention(**case)
    program, _ = lower(text, "decompose")
    arrays = random_inputs(program, seed=1)
    (ref,) = run_reference(program, *arrays)
    fused = _run(text, FLASH, arrays)
    unfused = _run(text, "decompose,fuse", arrays)
    assert _rel(fused, ref) < 1e-6
    assert _rel(unfused, ref) < 1e-6


def test_spelled_out_attention_with_a_fully_masked_row() -> None:
    """Row 2 masks every key: the unfused kernels give NaN (0/0), the fused kernel 0."""
    text = attention_spelled_out(2, 5, 4)
    program, _ = lower(text, "fuse")
    q, k, v, _ = random_inputs(program, seed=2)
    mask = np.where(np.arange(5)[None, :] > np.arange(5)[:, None] + 1, -np.inf, 0.0)
    mask[2, :] = -np.inf
    (ref,) = run_reference(program, q, k, v, mask)
    _, fused_module = lower(text, "fuse,flash-attention")
    assert _flash_reduce(fused_module) is not None
    (fused,) = run_loop_module(fused_module, "attention", q, k, v, mask)
    assert np.isnan(ref[:, 2]).all() and not np.isnan(fused).any()
    assert (fused[:, 2] == 0).all()
    keep = [0, 1, 3, 4]
    assert _rel(fused[:, keep], ref[:, keep]) < 1e-6


def test_logits_of_magnitude_1e4() -> None:
    text = attention_spelled_out(1, 6, 4, scale=1e4)
    program, _ = lower(text, "fuse")
    q, k, v, mask = random_inputs(program, seed=3)
    mask[:] = 0.0
    (ref,) = run_reference(program, q, k, v, mask)
    out = _run(text, "fuse,flash-attention", [q, k, v, mask])
    assert np.isfinite(out).all() and _rel(out, ref) < 1e-6


@pytest.mark.parametrize("dtype", ["bf16", "f16"])
def test_16_bit_causal_within_rounding_of_the_reference(dtype: str) -> None:
    """decompose masks 16-bit scores with the type's lowest value (−65504 for f16, far above
    −1e30): both become `j > i ? c : 0`, so the tile rule can skip the masked key tiles."""
    text = attention(1, 2, 9, 8, dtype=dtype, causal=True)
    _, module = lower(text, FLASH)
    reduce = _flash_reduce(module)
    compares = [op for op in reduce.walk() if isinstance(op, arith.CmpiOp)]
    assert [(op.predicate.value.data, op.lhs) for op in compares] == [
        (8, reduce.body.block.args[0])  # ugt: j > i
    ]
    program, _ = lower(text, "decompose")
    arrays = random_inputs(program, seed=4)
    (ref,) = run_reference(program, *arrays)
    assert _rel(_run(text, FLASH, arrays), ref) < 1e-2


# ------------------------------------------------------------------------------ algebra


def _step_function(reduce: loop.ReduceOp) -> func.FuncOp:
    """Return the fold `s' = combine(s, (score, 1, v))` of the flash reduction as a step
    function for the associativity checker."""
    block = Block(arg_types=[f32] * 5)
    m, total, acc, score, v = block.args
    one = arith.ConstantOp(FloatAttr(1.0, f32))
    block.add_op(one)
    mapping = dict(zip(reduce.combine.block.args, [m, total, acc, score, one.result, v]))
    for op in reduce.combine.block.ops:
        if isinstance(op, loop.YieldOp):
            block.add_op(func.ReturnOp(*(mapping[a] for a in op.arguments)))
        else:
            block.add_op(op.clone(value_mapper=mapping))
    step = func.FuncOp("flash", ([f32] * 5, [f32] * 3), Region(block))
    step.attributes[INIT_ATTR] = ArrayAttr([FloatAttr(x, f32) for x in (float("-inf"), 0.0, 0.0)])
    return step


def test_associativity_checker_accepts_the_combine() -> None:
    _, module = lower(attention(1, 1, 4, 4), FLASH)
    verdict = check_associative(_step_function(_flash_reduce(module)))
    assert verdict.associative, verdict.summary()


def test_combine_of_identities_and_edges_in_f32() -> None:
    """(−inf, 0, 0) ⊕ (−inf, 0, 0) must not give NaN (exp(−inf + inf)); the identity is
    neutral; logits 1e4 apart rescale to 0 instead of overflowing."""
    _, module = lower(attention(1, 1, 4, 4), FLASH)
    combine = _combine_f32(_flash_reduce(module).combine.block)
    identity = tuple(np.float32(v) for v in (-np.inf, 0.0, 0.0))
    assert combine(identity, identity) == identity
    element = tuple(np.float32(v) for v in (3.0, 1.0, -2.0))
    assert combine(identity, element) == element == combine(element, identity)
    low, high = (tuple(np.float32(v) for v in (m, 1.0, x)) for m, x in ((-1e4, 5.0), (1e4, 7.0)))
    assert combine(low, high) == combine(high, low) == high
