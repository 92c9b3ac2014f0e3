"""Persistent wgmma GEMMs run on the CPU (tests/cpu_wgmma.py: TMA boxes, mbarriers, wgmma and
the named barriers emulated, each CUDA thread a fiber of the emulation) against float64: 132 blocks
walking more tiles than that, so some blocks take a second tile whose ring slots and phases
carry on from the first, and whose epilogue (by TMA stores, or staged: `store=smem`) writes its
shared tile again.

The epilogues: a bias, prefetched once for all of a thread's rows (`epilogue_prefetch.py`), then
GELU, as the default (`persistent=auto`) lowers an MLP's first linear; and a bias with a
residual, a load per row, which `auto` keeps off persistent blocks for their register pressure
(a block per tile) but `persistent=1` still runs correctly.
"""

from __future__ import annotations

import pytest
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu
from programs import matmul_plain, mlp, tile_with

from tinyopt.compiler import lower

pytestmark = pytest.mark.skipif(COMPILER is None, reason="g++ not found")


def _residual(m: int, n: int, k: int) -> str:
    x, w, b, y = (f"tensor<{s}xbf16>" for s in (f"{m}x{k}", f"{n}x{k}", f"{n}", f"{m}x{n}"))
    return f"""func.func @residual(%x: {x}, %w: {w}, %b: {b}, %r: {y}) -> {y} {{
  %y = graph.linear %x, %w, %b : ({x}, {w}, {b}) -> {y}
  %z = graph.add %y, %r : {y}
  func.return %z : {y}
}}"""


CASES = [
    # 11 x 13 = 143 tiles of 64 x 64: blocks 0-10 take two; stored by TMA (`store=auto` on a
    # persistent grid), then through the staging tile, which the second tile reuses.
    ("linear_bias_704x832x128", matmul_plain(704, 832, 128, "bf16", "nk"), "bm=64 bn=64"),
    (
        "linear_bias_staged_704x832x128",
        matmul_plain(704, 832, 128, "bf16", "nk"),
        "bm=64 bn=64 store=smem",
    ),
    # 9 x 18 = 162 tiles of 128 x 64 (the last row of tiles partial) for the first linear,
    # persistent by default; then GELU and the second linear.
    ("mlp_1100x136x1096", mlp(1100, 136, 1096, "bf16"), "bn=64"),
    # A residual read per row and a bias read once for all rows, persistent because asked:
    # 143 tiles, a partial last row; then the same with a block per tile, as `auto` runs it.
    ("residual_700x832x128", _residual(700, 832, 128), "bm=64 bn=64 persistent=1"),
    ("residual_per_tile_700x832x128", _residual(700, 832, 128), "bm=64 bn=64"),
]


@pytest.mark.parametrize("name,text,knobs", CASES, ids=[c[0] for c in CASES])
def test_persistent_wgmma_matches_float64_on_cpu(name: str, text: str, knobs: str) -> None:
    pipeline = tile_with(f"mma=wgmma {knobs}")
    _, module = lower(text, pipeline.replace(",to-cuda", ""))
    assert ("persistent = 1" in str(module)) == ("per_tile" not in name), name
    error, tolerance = error_on_cpu(text, pipeline, seed=3)
    assert error <= tolerance, (name, error, tolerance)
