"""Reductions with fewer rows than SMs split in a partial and a fold kernel
(`passes/tile/split_reduction.py`): the split kernels against the float64 reference at loop
level, which kernels it leaves alone, the plans the tile pass makes of them, and two programs on
the CPU emulation of their CUDA."""

from __future__ import annotations

import numpy as np
import pytest
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu
from programs import reduction

from tinyopt.backends import check
from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import random_inputs, run_reference
from tinyopt.compiler import apply_pipeline, parse
from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.split_reduction import (
    flatten_reductions,
    split_reduction,
    split_strided_reduction,
)
from tinyopt.passes.tile.gemm.split_k import SEQUENTIAL
from tinyopt.passes.tile.target import Target


SPLIT = {
    "mean-of-all-2d": (reduction("reduce_mean", (300, 257), (0, 1)), 75),
    "sum-of-1d": (reduction("reduce_sum", (131072,), (0,)), 128),
    "prod-of-1d": (reduction("reduce_prod", (65536,), (0,)), 64),
    "mean-over-three-dims-2-rows": (reduction("reduce_mean", (2, 3, 200, 300), (1, 2, 3)), 150),
    "sum-of-a-prime-length": (reduction("reduce_sum", (131071,), (0,)), 128),
    "max-of-3-prime-rows": (reduction("reduce_max", (3, 100003), (1,)), 98),
    "prod-of-a-prime-length": (reduction("reduce_prod", (65537,), (0,)), 65),
}
"""Programs the split takes (after `flatten_reductions`), and the parts it cuts the reduction in:
the largest divisor of its length that leaves chunks of at least 1024, of a multiple of 8
elements where one does; for a prime length, chunks of a multiple of 8 near its square root (at
least 1024), the last one shorter (131071 = 127 · 1024 + 1023, 100003 = 97 · 1024 + 675, 65537 =
64 · 1024 + 1: its points past the end fold the init, 0, -inf or 1)."""


@pytest.mark.parametrize("case", SPLIT, ids=list(SPLIT))
def test_split_kernels_match_the_reference(case: str) -> None:
    text, parts = SPLIT[case]
    program = parse(text)
    fused = apply_pipeline(program.clone(), "decompose,fuse")
    (kernel,) = loop.kernels(fused)
    assert flatten_reductions(kernel) == (
        case in ("mean-of-all-2d", "max-over-two-dims-4-rows", "mean-over-three-dims-2-rows")
    )
    partial, fold = split_reduction(fused, kernel, Target())
    assert list(partial.body.block.ops)[0].extents[-1] == parts  # type: ignore[attr-defined]
    assert [k.sym_name.data for k in loop.kernels(fused)] == ["f_0_partial", "f_0_fold"]
    inputs = random_inputs(program, seed=3)
    if case.startswith("prod-of"):  # near 1, so the product neither overflows nor vanishes
        inputs = [1 + (x - 0.5) / 1e3 for x in inputs]
    (got,) = run_loop_module(fused, check.graph_function(program).sym_name.data, *inputs)
    (exact,) = run_reference(program, *inputs)
    np.testing.assert_allclose(got, exact, rtol=1e-5)


STRIDED = {
    "max-over-two-dims-4-rows": (reduction("reduce_max", (300, 300, 4), (0, 1)), 5625, 16),
    "sum-over-dim-0-96-rows": (reduction("reduce_sum", (5000, 96), (0,)), 295, 17),
    "mean-over-batch-and-sequence": (reduction("reduce_mean", (4, 300, 200), (0, 1)), 75, 16),
    "prod-over-the-middle-dim": (reduction("reduce_prod", (3, 1001, 40), (1,)), 59, 17),
}
"""Strided reductions (neighbouring rows are neighbours in memory) and the parts and chunk the
split cuts them in: enough parts that parts × rows threads fill the 132 SMs' 2048 threads,
chunks of at least 16 elements, the last chunk shorter where the parts do not divide the length
(5000 = 294 · 17 + 2, 1001 = 58 · 17 + 15)."""


@pytest.mark.parametrize("case", STRIDED, ids=list(STRIDED))
def test_strided_split_matches_the_reference(case: str) -> None:
    text, parts, chunk = STRIDED[case]
    program = parse(text)
    fused = apply_pipeline(program.clone(), "decompose,fuse")
    (kernel,) = loop.kernels(fused)
    flatten_reductions(kernel)
    assert split_reduction(fused, kernel, Target()) == (kernel,)
    partial, fold = split_strided_reduction(fused, kernel, Target())
    nest = list(partial.body.block.ops)[0]
    assert nest.extents[0] == parts  # type: ignore[attr-defined]
    (reduce,) = [op for op in nest.walk() if isinstance(op, loop.ReduceOp)]
    assert list(reduce.extents) == [chunk]
    assert SEQUENTIAL in partial.attributes and SEQUENTIAL not in fold.attributes
    inputs = random_inputs(program, seed=5)
    if case.startswith("prod-"):
        inputs = [1 + (x - 0.5) / 1e3 for x in inputs]
    (got,) = run_loop_module(fused, check.graph_function(program).sym_name.data, *inputs)
    (exact,) = run_reference(program, *inputs)
    np.testing.assert_allclose(got, exact, rtol=1e-5)


def test_a_strided_reduction_of_many_rows_runs_a_thread_per_row() -> None:
    """With as many rows as the SMs hold threads (2 SMs: 4096), a strided reduction is not
    split: the sequential rule runs it a thread per row, neighbouring threads reading
    neighbouring elements."""
    text = reduction("reduce_sum", (3, 30000), (0,))
    module = apply_pipeline(parse(text), "decompose,fuse,plan{sms=2}")
    (kernel,) = loop.kernels(module)
    assert str(kernel.attributes[tile.PLAN]).startswith("#tile.plan<sequential")
    error, tolerance = error_on_cpu(text, "decompose,fuse,tile{sms=2},to-cuda", seed=6)
    assert error <= tolerance, (error, tolerance)


@pytest.mark.parametrize(
    "text",
    [
        reduction("reduce_sum", (200, 300), (0, 1)),  # 60000 elements: one group reads them
        reduction("reduce_sum", (256, 4096), (1,)),  # 256 rows fill the SMs
    ],
    ids=["small", "many-rows"],
)
def test_other_reductions_are_left_alone(text: str) -> None:
    fused = apply_pipeline(parse(text), "decompose,fuse")
    (kernel,) = loop.kernels(fused)
    assert split_reduction(fused, kernel, Target()) == (kernel,)


def test_a_small_strided_reduction_stays_on_the_row_rule() -> None:
    """Below 2^16 elements (64 × 768 over dim 0: 49152) a strided reduction keeps its one
    kernel on the row rule: a split would add a launch to a read of one memory latency."""
    fused = apply_pipeline(parse(reduction("reduce_mean", (64, 768), (0,))), "decompose,fuse")
    (kernel,) = loop.kernels(fused)
    assert split_strided_reduction(fused, kernel, Target()) == (kernel,)
    assert SEQUENTIAL not in kernel.attributes


def test_a_gemv_is_left_to_the_gemm_rules() -> None:
    """A contraction of few rows (a GEMV into 64 outputs over K = 2^17) keeps its kernel: the
    GEMM rules split K their own way."""
    x, w, y = "tensor<1x131072xf32>", "tensor<64x131072xf32>", "tensor<1x64xf32>"
    text = (
        f"func.func @f(%x: {x}, %w: {w}) -> {y} {{\n"
        f"  %wt = graph.transpose %w {{perm = array<i64: 1, 0>}} : {w} -> tensor<131072x64xf32>\n"
        f"  %y = graph.matmul %x, %wt : ({x}, tensor<131072x64xf32>) -> {y}\n"
        f"  func.return %y : {y}\n}}"
    )
    fused = apply_pipeline(parse(text), "decompose,fuse")
    for kernel in loop.kernels(fused):
        assert split_reduction(fused, kernel, Target()) == (kernel,)


@pytest.mark.parametrize(
    ("text", "rows"),
    [
        (reduction("reduce_mean", (4096, 4096), (0, 1)), [[1, 4096], [1]]),
        (reduction("reduce_sum", (2, 3, 200, 300), (1, 2, 3)), [[2, 150], [2]]),
    ],
    ids=["mean-of-4096x4096", "sum-over-three-dims"],
)
def test_the_planner_runs_both_pieces_on_the_row_rule(text: str, rows: list[list[int]]) -> None:
    """`x.mean()` of a 4096 × 4096 matrix: 4096 row sums in parallel, then one row of 4096; a
    sum over three dimensions of 3 × 200 × 300 for each of 2 rows, made one of 180000: 2 × 150
    parts of 1200 (a multiple of 8: 16-byte aligned), then 2 rows of 150."""
    module = apply_pipeline(parse(text), "decompose,fuse,plan")
    kernels = loop.kernels(module)
    assert [k.sym_name.data for k in kernels] == ["f_0_partial", "f_0_fold"]
    nests = [list(next(iter(k.body.block.ops)).extents) for k in kernels]  # type: ignore[attr-defined]
    assert nests == rows
    assert all("row_reduction" in str(k.attributes[tile.PLAN]) for k in kernels)


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    "text",
    [
        reduction("reduce_mean", (40, 1700), (0, 1)),
        reduction("reduce_max", (65536,), (0,)),
        reduction("reduce_sum", (2, 65539), (1,)),
        reduction("reduce_min", (65537,), (0,)),
    ],
    ids=["mean-2d", "max-1d", "sum-2-prime-rows", "min-prime"],
)
def test_split_reductions_match_float64_on_cpu(text: str) -> None:
    error, tolerance = error_on_cpu(text, "decompose,fuse,tile,to-cuda", seed=2)
    assert error <= tolerance, (error, tolerance)


@pytest.mark.parametrize(
    "args",
    [((8, 512, 56, 56), (2, 3)), ((256, 512, 512), (1, 2))],
    ids=["global-average-pool", "two-trailing-dims"],
)
def test_reductions_over_several_dimensions_run_on_the_row_rule(
    args: tuple[tuple[int, ...], tuple[int, ...]],
) -> None:
    """A mean over H and W (NCHW) or over two trailing dims: one reduction of their product,
    so the row rule takes it (before, the sequential rule ran each row on one thread)."""
    module = apply_pipeline(parse(reduction("reduce_mean", *args)), "decompose,fuse,plan")
    (kernel,) = loop.kernels(module)
    assert str(kernel.attributes[tile.PLAN]).startswith("#tile.plan<row_reduction")


def test_a_mean_over_batch_and_sequence_is_a_strided_split() -> None:
    """A mean over batch and sequence of 8 × 1024 × 768 reads each of its 768 rows 768 elements
    apart: a partial kernel a thread per (part, row), rows fastest (342 parts of 24, the last of 8:
    352 parts would fill the SMs), on the sequential rule, and a fold on the row rule."""
    text = reduction("reduce_mean", (8, 1024, 768), (0, 1))
    module = apply_pipeline(parse(text), "decompose,fuse,plan")
    partial, fold = loop.kernels(module)
    assert list(next(iter(partial.body.block.ops)).extents) == [342, 768]  # type: ignore[attr-defined]
    assert str(partial.attributes[tile.PLAN]).startswith("#tile.plan<sequential")
    assert str(fold.attributes[tile.PLAN]).startswith("#tile.plan<row_reduction")


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    "args",
    [((2, 64, 9, 7), (2, 3)), ((8, 30, 50), (0, 1))],
    ids=["pool-2x64x9x7", "over-first-two"],
)
def test_flattened_reductions_match_float64_on_cpu(
    args: tuple[tuple[int, ...], tuple[int, ...]],
) -> None:
    error, tolerance = error_on_cpu(
        reduction("reduce_mean", *args), "decompose,fuse,tile,to-cuda", seed=4
    )
    assert error <= tolerance, (error, tolerance)


def _minus_sum(shape: tuple[int, ...], dims: tuple[int, ...], sliced: bool = False) -> str:
    """`x - x.sum(dims, keepdim=True)` in f32 (of `x[..., 1:]` where `sliced`, so rows of the
    summed view are not contiguous in memory)."""
    t = lambda s: f"tensor<{'x'.join(map(str, s))}xf32>"  # noqa: E731
    kept = tuple(1 if d in dims else e for d, e in enumerate(shape))
    full = (*shape[:-1], shape[-1] + 1) if sliced else shape
    head = f"func.func @f(%a: {t(full)}) -> {t(shape)} {{\n"
    if sliced:
        head += (
            f"  %x = graph.slice %a {{dim = {len(shape) - 1} : i64, start = 1 : i64, step = 1 : "
            f"i64}} : {t(full)} -> {t(shape)}\n"
        )
    x = "%x" if sliced else "%a"
    return head + (
        f"  %s = graph.reduce_sum {x} {{dims = array<i64: {', '.join(map(str, dims))}>, "
        f"keepdim = true}} : {t(shape)} -> {t(kept)}\n"
        f"  %b = graph.broadcast %s : {t(kept)} -> {t(shape)}\n"
        f"  %y = graph.sub {x}, %b : {t(shape)}\n"
        f"  func.return %y : {t(shape)}\n}}"
    )


MINUS_SUM = {
    "all-of-a-sliced-37x129x9": _minus_sum((37, 129, 9), (0, 1, 2), sliced=True),
    "all-of-250x250": _minus_sum((250, 250), (0, 1)),
    "per-row-over-6x33x17": _minus_sum((6, 33, 17), (1, 2)),
}


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize("text", MINUS_SUM.values(), ids=list(MINUS_SUM))
def test_a_sum_broadcast_back_over_several_dimensions_runs_on_the_row_rule(text: str) -> None:
    """A sum over several dimensions subtracted from its input: the loop writing the output
    over those dimensions is flattened with the reduction, so the row rule takes the kernel.
    Before, the sequential rule ran each row on one thread, and the 42957 terms of the sliced
    case's one sum, added in order, missed f32's tolerance (2.2e-4 against 1e-4)."""
    module = apply_pipeline(parse(text), "fuse,plan")
    (kernel,) = loop.kernels(module)
    assert str(kernel.attributes[tile.PLAN]).startswith("#tile.plan<row_reduction")
    error, tolerance = error_on_cpu(text, "fuse,tile,to-cuda", seed=0)
    assert error <= tolerance / 10, (error, tolerance)
