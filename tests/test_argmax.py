"""`graph.argmax` (issue 20: a device-side greedy argmax): torch.argmax's semantics (the first
index of the largest element, NaN the largest, the first NaN winning even after a +inf) at
every level, against a float64 numpy spelling of them: the op in the reference executor, its
decomposition (`decompose`) in the reference, the fused loop program (`fuse`), and the GPU
pipeline's kernels compiled with NVRTC and run on the CPU emulation of CUDA
(tests/cpu_cuda.py, needs g++). Values are small integers (many ties) with NaN, +inf and -inf
rows; f32, f16, bf16; keepdim; i32 and i64 results; a rank-0 result. Then the frontend's
argmax/argmin (dim=-1 included) and the verifier's refusals.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from cpu_cuda import COMPILER
from cpu_wgmma import run_program_on_cpu
from xdsl.dialects.builtin import (
    TensorType,
    bf16,
    f16,
    f32,
    i32,
    i64,
)
from xdsl.ir import Attribute
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.test_value import create_ssa_value

from tinyopt.backends.check import to_storage
from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import numpy_dtype, run_reference
from tinyopt.compiler import apply_pipeline, parse
from tinyopt.dialects import graph, loop
from tinyopt.frontends.compiled_model import PIPELINE

CASES = [
    # (id, shape, dim, keepdim, element type, index type)
    ("f32_rows_i64", (7, 37), 1, False, "f32", "i64"),
    ("f32_columns_keepdim_i32", (9, 6), 0, True, "f32", "i32"),
    ("bf16_last_keepdim_i32", (3, 4, 9), 2, True, "bf16", "i32"),
    ("f16_middle_i64", (2, 33, 3), 1, False, "f16", "i64"),
    ("f32_vector_to_rank0", (17,), 0, False, "f32", "i64"),
    ("bf16_long_rows_i32", (6, 1000), 1, False, "bf16", "i32"),
]
ON_CPU = [
    # (id, knobs): the emulation runs blocks of one dimension, so a warp per row gets
    # `rows=1` (the default packs rows into a block's y dimension); a block per row of 256
    # threads combines its warps through shared memory.
    *((c[0], "rows=1") for c in CASES),
    ("bf16_long_rows_i32", "threads=256"),
]
CASE = {c[0]: c[1:] for c in CASES}
EACH_CASE = pytest.mark.parametrize(
    ("shape", "dim", "keepdim", "dtype", "index"), [c[1:] for c in CASES], ids=list(CASE)
)


def program(shape: tuple[int, ...], dim: int, keepdim: bool, dtype: str, index: str) -> str:
    out = tuple(1 if i == dim else d for i, d in enumerate(shape) if keepdim or i != dim)
    x = f"tensor<{'x'.join(map(str, shape))}x{dtype}>"
    y = f"tensor<{''.join(f'{d}x' for d in out)}{index}>"
    attrs = f"dim = {dim} : i64" + (", keepdim = true" if keepdim else "")
    return (
        f"func.func @argmax(%x: {x}) -> {y} {{\n"
        f"  %i = graph.argmax %x {{{attrs}}} : {x} -> {y}\n"
        f"  func.return %i : {y}\n}}\n"
    )


def first_largest(x: np.ndarray, dim: int, keepdim: bool) -> np.ndarray:
    """torch.argmax spelled out in float64: along `dim`, the first NaN if there is one, else
    the first element larger than every one before it."""
    rows = np.moveaxis(np.asarray(x, np.float64), dim, -1)
    flat = rows.reshape(-1, rows.shape[-1])
    out = np.zeros(len(flat), np.int64)
    for r, row in enumerate(flat):
        for i, v in enumerate(row):
            if np.isnan(v):
                out[r] = i
                break
            if v > row[out[r]]:
                out[r] = i
    out = out.reshape(rows.shape[:-1])
    return np.expand_dims(out, dim) if keepdim else out


def values(shape: tuple[int, ...], dim: int, seed: int = 0) -> np.ndarray:
    """Small integers (exact in bf16, so ties are many) with NaN, +inf and -inf; the first
    rows along `dim` are +inf before a NaN, all NaN, all -inf, all equal, and a NaN after the
    largest finite value."""
    rng = np.random.default_rng(seed)
    rows = rng.integers(-3, 4, (*shape[:dim], *shape[dim + 1 :], shape[dim])).astype(np.float32)
    flat = rows.reshape(-1, shape[dim])
    special = rng.random(flat.shape)
    flat[special < 0.05] = np.nan
    flat[(special >= 0.05) & (special < 0.08)] = np.inf
    flat[(special >= 0.08) & (special < 0.11)] = -np.inf
    n = shape[dim]
    patterns = [
        [np.inf, np.nan] + [1.0] * (n - 2),
        [np.nan] * n,
        [-np.inf] * n,
        [2.0] * n,
        [5.0] + [1.0] * (n - 2) + [np.nan],
    ]
    for r, pattern in enumerate(patterns[: len(flat)]):
        flat[r] = pattern[:n]
    return np.moveaxis(flat.reshape(rows.shape), -1, dim).copy()


def case_inputs(shape: tuple[int, ...], dim: int) -> np.ndarray:
    return values(shape, dim, seed=len(shape) * 100 + dim)


@EACH_CASE
def test_reference_decomposition_and_loop_level_match_float64(
    shape: tuple[int, ...], dim: int, keepdim: bool, dtype: str, index: str
) -> None:
    module = parse(program(shape, dim, keepdim, dtype, index))
    x = case_inputs(shape, dim)
    want = first_largest(x, dim, keepdim)
    numpy_index = np.int32 if index == "i32" else np.int64
    (got,) = run_reference(module, x)
    assert got.dtype == numpy_index and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    decomposed = apply_pipeline(module.clone(), "decompose")
    assert not [op for op in decomposed.walk() if isinstance(op, graph.ArgmaxOp)]
    for precision in (np.float64, None):  # in float64, and rounded to each op's element type
        (got,) = run_reference(decomposed, x, dtype=precision)
        np.testing.assert_array_equal(got, want)
    (got,) = run_loop_module(apply_pipeline(module.clone(), "fuse"), "argmax", x)
    assert got.dtype == numpy_index
    np.testing.assert_array_equal(got, want)


@EACH_CASE
def test_gpu_pipeline_compiles_with_nvrtc(
    shape: tuple[int, ...], dim: int, keepdim: bool, dtype: str, index: str
) -> None:
    module = apply_pipeline(parse(program(shape, dim, keepdim, dtype, index)), PIPELINE)
    compile_module(module, arch="sm_90a")


_ELEMENT: dict[str, Attribute] = {"f32": f32, "f16": f16, "bf16": bf16, "i32": i32, "i64": i64}


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(("name", "knobs"), ON_CPU, ids=[f"{n}-{k}" for n, k in ON_CPU])
def test_gpu_kernels_match_float64_on_cpu(name: str, knobs: str) -> None:
    shape, dim, keepdim, dtype, index = CASE[name]
    text = program(shape, dim, keepdim, dtype, index)
    module = apply_pipeline(parse(text), f"decompose,fuse,tile{{{knobs}}},to-cuda")
    x = case_inputs(shape, dim)
    stored = to_storage(x, _ELEMENT[dtype])
    (got,) = run_program_on_cpu(module, [stored.view(np.uint16) if dtype == "f16" else stored])
    assert got.dtype == numpy_dtype(_ELEMENT[index])
    np.testing.assert_array_equal(got, first_largest(x, dim, keepdim))


def test_builder_infers_the_result_type() -> None:
    x = create_ssa_value(TensorType(bf16, [2, 3, 8]))
    for op, type_ in (
        (graph.ArgmaxOp(x, 2), TensorType(i64, [2, 3])),
        (graph.ArgmaxOp(x, 1, keepdim=True, index_type=i32), TensorType(i32, [2, 1, 8])),
    ):
        op.verify()
        assert op.result.type == type_


def test_fuse_decomposes_argmax_itself() -> None:
    """`fuse` decomposes the composites left in a program, argmax among them, so no pipeline
    reaches the loop level with a `graph.argmax`."""
    text = program((4, 8), 1, False, "f32", "i64")
    fused = apply_pipeline(parse(text), "fuse")
    assert not [op for op in fused.walk() if op.name.startswith("graph.")]
    assert [k.sym_name.data for k in loop.kernels(fused)]


# ------------------------------------------------------------------------------ frontend


def test_frontend_emits_graph_argmax_and_matches_torch_with_nan_and_ties() -> None:
    torch = pytest.importorskip("torch")
    from tinyopt.frontends.torch_fx import capture

    class Greedy(torch.nn.Module):
        def forward(self, logits: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return (
                logits.argmax(-1),
                logits.argmin(dim=-1, keepdim=True),
                logits.argmax(dim=0),
                (logits.argmax(-1) + 1).view(1, -1),
                logits.argmax(),
            )

    x = torch.from_numpy(values((6, 9), 1, seed=3))
    cap = capture(Greedy().eval(), x)
    ops = [op.name for op in cap.function.walk() if op.name.startswith("graph.")]
    assert ops.count("graph.argmax") == 5 and "graph.reduce_min" not in ops, ops
    assert str(parse(str(cap.module))) == str(cap.module)
    want = [w.numpy() for w in Greedy()(x)]
    arguments = cap.arguments(x)
    got = run_reference(cap.module, *arguments)
    loop_level = run_loop_module(apply_pipeline(cap.module.clone(), "fuse"), "forward", *arguments)
    for g, lo, w in zip(got, loop_level, want, strict=True):
        np.testing.assert_array_equal(g, w)
        np.testing.assert_array_equal(lo, w)
    compile_module(apply_pipeline(cap.module.clone(), PIPELINE), arch="sm_90a")


def test_frontend_argmax_of_integers_and_masks_goes_through_f32() -> None:
    torch = pytest.importorskip("torch")
    from tinyopt.frontends.torch_fx import capture

    class Fn(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return (x > 0).int().argmax(0), torch.arange(5).view(5, 1).expand(5, 3).argmax(0)

    x = torch.tensor([[0.0, 1.0, -1.0], [2.0, 0.0, 3.0]])
    cap = capture(Fn(), x)
    argmaxes = [op for op in cap.function.walk() if isinstance(op, graph.ArgmaxOp)]
    assert [str(op.x.type) for op in argmaxes] == ["tensor<2x3xf32>", "tensor<5x3xf32>"]
    for g, w in zip(run_reference(cap.module, *cap.arguments(x)), Fn()(x), strict=True):
        np.testing.assert_array_equal(g, w.numpy())


# ---------------------------------------------------------------------------- verifier

REFUSALS = [
    ("tensor<4x8xf32>", "{dim = 1 : i64}", "tensor<8xi64>", "result shape must be 4, got 8"),
    (
        "tensor<4x8xf32>",
        "{dim = 1 : i64, keepdim = true}",
        "tensor<4xi64>",
        "result shape must be 4x1, got 4",
    ),
    (
        "tensor<4x8xi32>",
        "{dim = 1 : i64}",
        "tensor<4xi64>",
        "operand element type must be f32, f16 or bf16, got i32",
    ),
    (
        "tensor<4x8xi1>",
        "{dim = 1 : i64}",
        "tensor<4xi64>",
        "operand element type must be f32, f16 or bf16, got i1",
    ),
    (
        "tensor<4x8xf32>",
        "{dim = 1 : i64}",
        "tensor<4xf32>",
        "result must be a tensor of i32 or i64 (the indices), got tensor<4xf32>",
    ),
    (
        "tensor<4x8xf32>",
        "{dim = 1 : i64}",
        "tensor<4xi1>",
        "result must be a tensor of i32 or i64 (the indices), got tensor<4xi1>",
    ),
    (
        "tensor<4x8xf32>",
        "{dim = 1 : i64}",
        "tensor<4xi16>",
        "result must be a tensor of i32 or i64 (the indices), got tensor<4xi16>",
    ),
    ("tensor<4x8xf32>", "{dim = 2 : i64}", "tensor<4xi64>", "dim 2 is out of range for rank 2"),
    ("tensor<4x8xf32>", "{dim = -1 : i64}", "tensor<4xi64>", "dim -1 is out of range for rank 2"),
    (
        "tensor<16777217xf32>",
        "{dim = 0 : i64}",
        "tensor<i64>",
        "dim 0 has 16777217 elements, more than 2^24: the index is computed in f32",
    ),
]


@pytest.mark.parametrize(("x", "attrs", "result", "message"), REFUSALS)
def test_verifier_refuses(x: str, attrs: str, result: str, message: str) -> None:
    text = (
        f"func.func @f(%x: {x}) {{\n  %i = graph.argmax %x {attrs} : {x} -> {result}\n"
        "  func.return\n}"
    )
    with pytest.raises(VerifyException, match=re.escape(f"graph.argmax: {message}")):
        parse(text).verify()


def test_a_dim_of_2_to_the_24_elements_is_accepted() -> None:
    parse(program((2**24,), 0, True, "f32", "i32")).verify()
