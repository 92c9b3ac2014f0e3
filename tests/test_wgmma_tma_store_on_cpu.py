"""The TMA-store epilogue (`store=tma`, passes/tile/gemm/wgmma_tma_store.py) run on the CPU
(tests/cpu_wgmma.py: TMA loads and stores, mbarriers, wgmma and the named barriers emulated)
against float64: edges past M and N that the stores clip, a batch (3-D boxes), an epilogue
with a bias and GELU, persistent blocks that write their output tile again, three consumer
warpgroups, a dual GEMM, stream-K and FP8 with block scales. Each case's kernel must hold
TMA stores, so a plan that quietly fell back to another epilogue fails here."""

from __future__ import annotations

import pytest
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu, run_program_on_cpu
from programs import batched_matmul, block_scaled_matmul, matmul_plain, mlp, swiglu, tile_with

from tinyopt.compiler import lower

pytestmark = pytest.mark.skipif(COMPILER is None, reason="g++ not found")

CASES = [
    # 5 × 5 tiles of 64 × 128, the last row and column partial (clipped by TMA).
    ("linear_bias_300x520x384", matmul_plain(300, 520, 384, "bf16", "nk"), "bm=64 bn=128"),
    # 3-D boxes: a batch of 3, rows and columns off the tile.
    ("bmm_3x200x136x264", batched_matmul(3, 200, 136, 264, "bf16"), "bn=64"),
    # A bias and GELU, 128-row blocks, persistent on 4 SMs: each block writes its tile again.
    ("mlp_persistent", mlp(260, 136, 392, "bf16"), "bm=128 bn=128 persistent=1 sms=4"),
    # Three consumer warpgroups, 192-column boxes.
    ("tall_400x392x320", matmul_plain(400, 392, 320, "bf16", "nk"), "bm=192 bn=192 sms=4"),
    # A dual GEMM: 64 output columns of each product a block.
    ("swiglu_200x256x136", swiglu(200, 256, 136), "bn=128"),
    # Stream-K: the tiles' last K steps shared over the blocks, each tile stored by its owner.
    ("streamk_300x392x1024", matmul_plain(300, 392, 1024, "bf16", "nk"), "streamk=tail sms=5"),
    # FP8 with block scales (promoted K steps, turns), 128 × 128 blocks on 8 SMs.
    ("fp8_blocks_300x520x640", block_scaled_matmul(300, 520, 640), "sms=8"),
]


@pytest.mark.parametrize("name,text,knobs", CASES, ids=[c[0] for c in CASES])
def test_tma_store_epilogue_matches_float64_on_cpu(name: str, text: str, knobs: str) -> None:
    pipeline = tile_with(f"mma=wgmma store=tma {knobs}")
    lowered = lower(text, pipeline)
    assert "tinyopt_tma_store_" in str(lowered[1]), name
    error, tolerance = error_on_cpu(text, pipeline, seed=5, lowered=lowered)
    assert error <= tolerance, (name, error, tolerance)


def test_blocks_run_last_to_first_still_match() -> None:
    """Blocks in reverse order: a block's clipped boxes must not write its neighbours' columns
    (with the blocks in launch order a later block would overwrite them)."""
    text = matmul_plain(300, 520, 384, "bf16", "nk")
    pipeline = tile_with("mma=wgmma store=tma bm=64 bn=128")

    def reverse(module, arrays):
        return run_program_on_cpu(module, arrays, reverse=True)

    error, tolerance = error_on_cpu(text, pipeline, seed=6, run=reverse)
    assert error <= tolerance, (error, tolerance)
