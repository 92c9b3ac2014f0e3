"""The 3xTF32 wgmma GEMM (`mma=3xtf32`) run on the CPU: TMA boxes written 128-byte swizzled,
TF32 products that drop the low 13 mantissa bits, the consumers' reducing barrier
(tests/cpu_wgmma.py), so the split, its transposed form for an N-major B, the per-step
promotion, split K and the f32 FMA steps of infinities are checked without a GPU.

Each CUDA thread is a fiber of the emulation (tests/cpu_cuda.h): one or two blocks of 64 or 128
rows, a few K steps.
"""

import numpy as np
import pytest
from cpu_wgmma import error_on_cpu, run_program_on_cpu
from programs import batched_linear, matmul_plain, mlp, skinny, tile_with

from tinyopt.backends.check import graph_function
from tinyopt.backends.reference import random_inputs
from tinyopt.compiler import lower

CASES = [
    ((130, 128, 96), "nk", "mma=3xtf32 bm=128 bn=128 splitk=1"),
    # f32 rows of 2 mod 4: the staged epilogue stores pairs along the rows (`narrow_rows`)
    ((130, 130, 96), "nk", "mma=3xtf32 bm=128 bn=128 splitk=1"),
    ((64, 64, 96), "kn", "mma=3xtf32 bm=64 bn=64 splitk=1"),
    ((64, 64, 128), "nk", "mma=3xtf32 bm=64 bn=64 splitk=2"),
    # chunks of 128 and 72: the second reaches past K (TMA's zeros for the split's guard)
    ((64, 64, 200), "nk", "mma=3xtf32 bm=64 bn=64 splitk=2"),
    # no epilogue: the atomic split (a zeroing kernel, partial sums added with `red.global`),
    # chunks of 640 and 544
    ((63, 272, 1184), "kn", "mma=3xtf32 splitk=2"),
    # swap: B's rows split in registers as wgmma's A, A's rows the block's ragged columns
    ((48, 136, 96), "nk", "mma=3xtf32 swap=on splitk=1"),
    ((20, 64, 64), "nk", "mma=3xtf32 swap=on bm=64 bn=32 splitk=1"),
    ((64, 64, 200), "nk", "mma=3xtf32 swap=on splitk=2"),
    ((150, 72, 64), "nk", "mma=3xtf32 swap=on splitk=1"),
    # the default plan of 65 rows and more: swapped, 128 of x's rows a block (97 ragged)
    ((97, 136, 288), "nk", ""),
]


@pytest.mark.parametrize(
    "batch,knobs",
    [(3, "mma=3xtf32 swap=on splitk=1"), (1, "mma=3xtf32 swap=on splitk=4 splitk_mode=atomic")],
)
def test_3xtf32_swap_batched_and_atomic_on_cpu(batch: int, knobs: str) -> None:
    """The swapped plan over a batch of weights `[b, N, K]` (the grid's z), and split K with
    its partial sums added atomically into a zeroed output (no epilogue to apply)."""
    error, _ = error_on_cpu(batched_linear(batch, 40, 72, 512), tile_with(knobs), seed=3)
    assert error < 2e-6, error


@pytest.mark.parametrize(
    "program,knobs,swapped",
    [
        (skinny(65, 200, 260, "f32", epilogue="bias_gelu"), "", 1),
        (skinny(127, 72, 512, "f32", epilogue="relu"), "", 1),
        (skinny(97, 136, 1000, "f32", batch=3), "", 1),
        (mlp((3, 40), 256, 264, "f32"), "", 2),
        (skinny(300, 260, 320, "f32", epilogue="bias_gelu"), "sms=16", 1),
        (skinny(131, 128, 256, "f32", batch=2), "sms=8", 1),
        (skinny(300, 260, 320, "f32", epilogue="bias_gelu"), "", 0),
        (skinny(131, 128, 256, "f32", batch=2), "", 0),
    ],
    ids=[
        "65_bias_gelu",
        "127_relu",
        "97_batch3",
        "mlp_3x40",
        "300_bias_gelu",
        "131_batch2",
        "300_bias_gelu_132_sms",
        "131_batch2_132_sms",
    ],
)
def test_default_plan_swaps_65_rows_and_more_on_cpu(program: str, knobs: str, swapped: int) -> None:
    """The default plan of f32 linears of 65 rows and more (`swap=auto`): ragged rows over a
    128-row block (three of them at 300 rows, a row past one at 131), an epilogue, a weight
    per batch entry, an MLP's two linears of 120 rows. Past 128 rows the swap needs a grid of
    half the SMs (or a split): the 9 and 4 blocks there take it on 16 and 8 SMs, not on 132
    (K too short to split), where the other rules run them."""
    assert str(lower(program, f"fuse,plan{{{knobs}}}")[1]).count('swap = "on"') == swapped
    error, _ = error_on_cpu(program, tile_with(knobs), seed=3)
    assert error < 2e-6, error


@pytest.mark.parametrize("shape,layout,knobs", CASES, ids=lambda v: str(v).replace(" ", ""))
def test_3xtf32_matches_float64_on_cpu(
    shape: tuple[int, int, int], layout: str, knobs: str
) -> None:
    """Within f32 order of float64; one TF32 product alone would be about 3e-4 off, and a
    swizzle read wrongly far more."""
    program = matmul_plain(*shape, "f32", b_layout=layout, relu=False)
    error, _ = error_on_cpu(program, tile_with(knobs), seed=0)
    assert error < 2e-6, error


@pytest.mark.parametrize(
    "layout,knobs",
    [("kn", "mma=3xtf32 bm=64 bn=64 splitk=1"), ("nk", "mma=3xtf32 swap=on bm=64 splitk=1")],
)
def test_3xtf32_infinities_on_cpu(layout: str, knobs: str) -> None:
    """±inf and NaN in both operands: the steps holding them run in f32 FMA, so the outputs'
    inf/NaN pattern and signs are float64's, and the finite ones stay at f32 order."""
    m, n, k = 64, 64, 96
    program = matmul_plain(m, n, k, "f32", b_layout=layout, relu=False)
    graph_program, module = lower(program, tile_with(knobs))
    inputs = [a.astype(np.float32) for a in random_inputs(graph_function(graph_program), 7)]
    x, w = inputs[0], inputs[1]
    weight = w if layout == "kn" else w.T  # a [K, N] view either way
    x[5, 7], x[6, 40], x[20, 30] = np.inf, -np.inf, np.nan
    weight[7, 9], weight[70, 11], weight[50, 12] = -np.inf, np.inf, 0.0
    x[8, 50] = np.inf  # meets the zero weight of column 12: NaN
    (out,) = run_program_on_cpu(module, inputs)
    with np.errstate(invalid="ignore"):
        exact = x.astype(np.float64) @ weight.astype(np.float64)
        if layout == "nk":
            exact += inputs[2]  # the linear's bias
    np.testing.assert_array_equal(np.isnan(out), np.isnan(exact))
    np.testing.assert_array_equal(np.isposinf(out), np.isposinf(exact))
    np.testing.assert_array_equal(np.isneginf(out), np.isneginf(exact))
    finite = np.isfinite(exact)
    error = np.linalg.norm(out[finite] - exact[finite]) / np.linalg.norm(exact[finite])
    assert error < 2e-6, error


def test_3xtf32_starved_rows_by_default_on_cpu() -> None:
    """48 rows of a 64×1024 linear: too little work for the CUDA cores' 64-row block, so the
    defaults split K over 3xTF32 blocks (the partial kernel and the fold), which match float64
    at f32's order."""
    program = matmul_plain(48, 64, 1024, "f32", b_layout="nk", relu=False)
    planned = str(lower(program, "fuse,plan")[1])
    assert "@linear_0_splitk" in planned and "plan = #tile.plan<wgmma_3xtf32" in planned
    error, _ = error_on_cpu(program, tile_with(""), seed=1)
    assert error < 2e-6, error
