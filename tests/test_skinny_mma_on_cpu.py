"""The tensor-core skinny GEMMs (swap AB on `mma.sync`, passes/tile/gemm/skinny_mma.py) run on
the CPU emulation of CUDA (tests/cpu_cuda.py, which emulates m16n8k16) and match the float64
reference on fresh random data: bf16 and f16, M of 2, 9, 17 and 64 (one to eight 8-row tiles,
ragged), N not a multiple of 16 (clamped weight rows), K not a multiple of the 32-wide chunk
or of the unrolled iteration (a zero-filled tail), narrower vectors where K is odd, a bias +
GELU epilogue, a weight per batch entry, warps of a block splitting K (`kwarps`), the next
iteration's registers loaded ahead (`stages=2`), and the split over K (partial sums, then a
fold that applies the epilogue once). Needs g++ (C++20); no GPU.
"""

from __future__ import annotations

import pytest
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu
from programs import skinny, tile_with
from test_skinny_on_cpu import planned_rules, run_program

pytestmark = pytest.mark.skipif(COMPILER is None, reason="g++ not found")

CASES = [
    # (id, program, knobs, the kernels the plan makes: rule names in launch order)
    ("bf16_2x40x200", skinny(2, 40, 200, "bf16"), "skinny_mma=on", ["skinny_mma"]),
    (
        "f16_9x52x168_bias_gelu",
        skinny(9, 52, 168, "f16", epilogue="bias_gelu"),
        "skinny_mma=on",
        ["skinny_mma"],
    ),
    (
        "bf16_17x72x300_threads64",
        skinny(17, 72, 300, "bf16"),
        "skinny_mma=on threads=64",
        ["skinny_mma"],
    ),
    (
        "bf16_64x260x136_bias_gelu",
        skinny(64, 260, 136, "bf16", epilogue="bias_gelu"),
        "skinny_mma=on",
        ["skinny_mma"],
    ),
    ("f16_3x20x37_odd_k", skinny(3, 20, 37, "f16"), "skinny_mma=on", ["skinny_mma"]),
    ("batched_bf16_2x5x24x72", skinny(5, 24, 72, "bf16", batch=2), "skinny_mma=on", ["skinny_mma"]),
    # Warps of a block splitting K (kwarps): every kwarps-th iteration each, the chunks left
    # owned one per warp (ragged last), the sums meeting in shared memory before the epilogue.
    (
        "kwarps4_bf16_9x70x300",
        skinny(9, 70, 300, "bf16"),
        "skinny_mma=on threads=256 kwarps=4",
        ["skinny_mma"],
    ),
    (
        "kwarps2_f16_64x40x1000_bias_gelu",
        skinny(64, 40, 1000, "f16", epilogue="bias_gelu"),
        "skinny_mma=on kwarps=2",
        ["skinny_mma"],
    ),
    (
        "kwarps8_batched_bf16_2x3x56x2048",
        skinny(3, 56, 2048, "bf16", batch=2),
        "skinny_mma=on threads=256 kwarps=8",
        ["skinny_mma"],
    ),
    # stages=2: each iteration loads the warp's next one before its products (the last loaded
    # twice), with and without kwarps, one and eight row tiles.
    (
        "stages2_bf16_8x48x1000",
        skinny(8, 48, 1000, "bf16"),
        "skinny_mma=on stages=2",
        ["skinny_mma"],
    ),
    (
        "stages2_kwarps4_f16_17x40x1100_bias_gelu",
        skinny(17, 40, 1100, "f16", epilogue="bias_gelu"),
        "skinny_mma=on threads=256 kwarps=4 stages=2",
        ["skinny_mma"],
    ),
    (
        "stages2_kwarps2_bf16_64x24x700",
        skinny(64, 24, 700, "bf16"),
        "skinny_mma=on kwarps=2 stages=2",
        ["skinny_mma"],
    ),
    # Split over K (partial sums, then a fold): the planner cuts the row-loop form; the
    # one-row form is cut by the rule itself, with the epilogue applied by the fold.
    (
        "split_bf16_16x70x256",
        skinny(16, 70, 256, "bf16"),
        "skinny_mma=on splitk=2",
        ["skinny_mma", "sequential"],
    ),
    (
        "split_gemv_f16_1x36x512_bias_gelu",
        skinny(1, 36, 512, "f16", epilogue="bias_gelu"),
        "skinny_mma=on splitk=4",
        ["skinny_mma", "sequential"],
    ),
]


@pytest.mark.parametrize(
    ("text", "knobs", "rules"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_skinny_mma_kernels_match_float64_on_cpu(text: str, knobs: str, rules: list[str]) -> None:
    assert planned_rules(text, knobs) == rules
    error, bound = error_on_cpu(text, tile_with(knobs), seed=23, run=run_program)
    assert error < bound, error
