"""Every test program and example runs on the GPU and matches the float64 numpy reference.

Outputs are poisoned (NaN bytes) before each run by the runtime, so an element a kernel
fails to write fails the check. Inputs are fresh random data for every seed.
"""

import numpy as np
import pytest
from conftest import requires_gpu
from programs import CASES, EXAMPLE_CASES, Case, matmul_plain, swiglu, tile_with

from tinyopt.backends.check import (
    device_inputs,
    errors_against_reference,
    graph_function,
    tolerance,
)
from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.compiler import lower


@requires_gpu
@pytest.mark.parametrize("case", CASES + EXAMPLE_CASES, ids=lambda c: c.id)
def test_program_matches_reference_on_gpu(case: Case) -> None:
    program, module = lower(case.text, case.pipeline)
    graph = graph_function(program)
    run = compile_module(module, poison=True).function(graph.sym_name.data)
    for seed in (0, 1):
        inputs, arrays = device_inputs(graph, seed)
        outputs = run(*arrays)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        errors = errors_against_reference(graph, outputs, inputs)
        limit = case.tolerance or tolerance(graph)
        assert all(e <= limit for e in errors), f"seed {seed}: errors {errors}"


@requires_gpu
@pytest.mark.parametrize(
    ("text", "knobs"),
    [
        (swiglu(130, 136, 520), "mma=wgmma bn=256"),
        (matmul_plain(513, 264, 136, "f16"), "mma=wgmma bn=128"),
        (matmul_plain(200, 330, 72, "bf16", "nk"), "mma=wgmma ws=0 bm=64 bn=64 stages=2"),
    ],
    ids=["swiglu_bn256", "matmul_f16_513x264x136", "linear_ws0_n330"],
)
def test_staged_epilogue_matches_direct_bit_for_bit(text: str, knobs: str) -> None:
    """store=smem hands the epilogue the same f32 accumulators as store=direct, so the same
    epilogue ops must give the same bits; a misplaced staged element would differ."""
    outputs = []
    for store in ("direct", "smem"):
        program, module = lower(text, tile_with(f"{knobs} store={store}"))
        graph = graph_function(program)
        run = compile_module(module, poison=True).function(graph.sym_name.data)
        _, arrays = device_inputs(graph, 0)
        out = run(*arrays)
        outputs.append(out if isinstance(out, tuple) else (out,))
    for direct, staged in zip(*outputs, strict=True):
        assert np.array_equal(direct, staged), np.argwhere(direct != staged)[:8]
