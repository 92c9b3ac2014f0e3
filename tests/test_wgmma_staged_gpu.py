"""GEMMs with operand rows TMA cannot address, on the GPU (passes/tile/gemm/wgmma_staged.py):
the staging copies and the wgmma GEMM on the workspaces match the float64 reference, as does
the small-grid `mma.sync` tile (32×32). Outputs and the workspaces' allocations are poisoned by
the runtime, so a padded column left unwritten or an output element never stored fails.
"""

import pytest
from conftest import requires_gpu
from programs import batched_matmul, matmul_plain, tile_with

from tinyopt.backends.check import (
    device_inputs,
    errors_against_reference,
    graph_function,
    tolerance,
)
from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.compiler import lower


@requires_gpu
@pytest.mark.parametrize(
    ("text", "knobs"),
    [
        (batched_matmul(3, 255, 255, 255, "bf16"), "align=on"),
        (batched_matmul(3, 1023, 1023, 1023, "bf16"), "align=on"),
        (batched_matmul(2, 200, 128, 131, "bf16"), "align=on"),  # A alone
        (batched_matmul(2, 200, 131, 128, "bf16"), "align=on"),  # B alone
        (matmul_plain(1001, 1003, 999, "bf16", "nk"), "align=on"),  # torch linear, bias
        (matmul_plain(701, 509, 3, "bf16", "kn", relu=False), "align=on"),  # K = 3
        (matmul_plain(333, 257, 1031, "f16", "nk", relu=False), "align=on bn=256"),
        (batched_matmul(2, 2047, 2047, 2047, "bf16"), ""),  # auto stages it
        (matmul_plain(8178, 773, 93, "bf16", "nk"), ""),  # auto: two K steps, odd N
        (matmul_plain(101, 3024, 6484, "bf16", "nk"), ""),  # auto: staged, then K split
        (matmul_plain(460, 519, 8001, "bf16", "kn", relu=False), ""),  # B [K, N], split
        (batched_matmul(7, 127, 127, 127, "bf16"), ""),  # mma.sync, 32×32 blocks
    ],
    ids=[
        "bmm_3x255",
        "bmm_3x1023",
        "a_only",
        "b_only",
        "linear_1001x1003x999",
        "k3",
        "f16_bn256",
        "auto_2x2047",
        "auto_short_k_8178x773x93",
        "auto_split_101x3024x6484",
        "auto_split_kn_460x519x8001",
        "mma_sync_7x127",
    ],
)
def test_staged_gemm_matches_reference_on_gpu(text: str, knobs: str) -> None:
    program, module = lower(text, tile_with(knobs))
    graph = graph_function(program)
    run = compile_module(module, poison=True).function(graph.sym_name.data)
    for seed in (0, 1):
        inputs, arrays = device_inputs(graph, seed)
        outputs = run(*arrays)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        errors = errors_against_reference(graph, outputs, inputs)
        assert all(e <= tolerance(graph) for e in errors), f"seed {seed}: errors {errors}"
