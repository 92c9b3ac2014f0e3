"""Split-K over a thread-block cluster (`splitk_mode=cluster`, passes/tile/gemm/wgmma_cluster.py)
run on the CPU (tests/cpu_wgmma.py; the blocks of a cluster run at once, each with its own shared
memory, tests/cpu_cuda.h) against float64: one kernel whose blocks z = b·s + r run chunk r of K,
stage their f32 tiles, meet at the cluster's barrier and each sum its share of the tile from all
the cluster's blocks before the epilogue. Ragged M and N, a chunk reaching past K, a bias and
ReLU, an N-major B over a batch, two consumer warpgroups and two 64-column chunks a block, no
producer warpgroup (`ws=0`), f16, and clusters of 8 whose share leaves threads idle.
"""

from __future__ import annotations

import pytest
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu
from programs import batched_matmul, matmul_plain, tile_with

from tinyopt.compiler import apply_pipeline, parse
from tinyopt.dialects import loop, tile

CASES = [
    # (id, program, knobs, the cluster's blocks)
    ("bias_relu_130x192x200", matmul_plain(130, 192, 200, "bf16", "nk"), "mma=wgmma splitk=2", 2),
    ("bmm_kn_2x70x64x328", batched_matmul(2, 70, 64, 328, "bf16"), "mma=wgmma splitk=2", 2),
    (
        "two_warpgroups_130x192x512",
        matmul_plain(130, 192, 512, "bf16", "nk"),
        "bm=128 bn=128 splitk=4",
        4,
    ),
    (
        "no_producer_64x96x256",
        matmul_plain(64, 96, 256, "bf16", "nk", relu=False),
        "splitk=4 ws=0",
        4,
    ),
    ("f16_kn_97x72x256", matmul_plain(97, 72, 256, "f16", "kn", relu=False), "splitk=2", 2),
    # 8 chunks of 64: each block sums 64 of the tile's 512 groups of 8 columns (half its threads)
    ("eight_64x64x512", matmul_plain(64, 64, 512, "bf16", "nk", relu=False), "splitk=8", 8),
]


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    ("text", "knobs", "blocks"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_cluster_split_matches_float64_on_cpu(text: str, knobs: str, blocks: int) -> None:
    knobs += " splitk_mode=cluster"
    (kernel,) = loop.kernels(apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}"))
    plan = kernel.attributes[tile.PLAN]
    assert plan.rule.data == "wgmma" and plan.values["cluster"] == blocks  # type: ignore[union-attr]
    error, bound = error_on_cpu(text, tile_with(knobs), seed=5)
    assert error < bound, error
