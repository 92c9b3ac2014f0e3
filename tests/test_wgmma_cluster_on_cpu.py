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
from programs import batched_matmul, matmul_plain, scaled_matmul, tile_with
from xdsl.utils.exceptions import DiagnosticException

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


# splitk_mode=auto (split_k_plan.cluster_split_estimate): (id, program, knobs, cluster size or
# the two-pass split's chunks)
AUTO_CASES = [
    # 2 blocks of 64×64, 64 K steps: two passes would take 16 chunks (4 steps each, and the
    # fold); the 2 clusters of 8 fit a wave and take 8 steps each, no fold: the cluster.
    ("long_k_64x128x4096", matmul_plain(64, 128, 4096, "bf16", "nk", relu=False), "", "cluster 8"),
    # The decode step's k/v projection at 64 rows: 16 clusters of 4 fit (30 do), 16 of 8 do not
    # (15 do), so 4 (H100, 2026-12-06: 12.5 µs against 13.2 in two passes of 8, cuBLAS 13.1).
    ("kv_64x1024x4096", matmul_plain(64, 1024, 4096, "bf16", "nk", relu=False), "", "cluster 4"),
    # 80×176×13600: 6 blocks; clusters stop at 8 (27 steps each) where two passes cut 16 chunks
    # of 14 steps: the two passes are the cheaper (H100: 12.5 against 14.5 µs).
    (
        "longer_k_80x176x13600",
        matmul_plain(80, 176, 13600, "bf16", "nk", relu=False),
        "",
        "two passes",
    ),
    # Under splitk_mode=twopass the same split folds in a second kernel.
    (
        "twopass_64x128x4096",
        matmul_plain(64, 128, 4096, "bf16", "nk", relu=False),
        "splitk_mode=twopass",
        "two passes",
    ),
    # store=direct: the cluster sums in the staged epilogue, so the wgmma rule refuses the
    # cluster plan (by name when asked) and auto splits in two passes.
    (
        "direct_store_kv_64x1024x4096",
        matmul_plain(64, 1024, 4096, "bf16", "nk", relu=False),
        "store=direct",
        "two passes",
    ),
]


@pytest.mark.parametrize(
    ("text", "knobs", "expected"), [c[1:] for c in AUTO_CASES], ids=[c[0] for c in AUTO_CASES]
)
def test_auto_splits_over_a_cluster_where_it_fits_and_pays(
    text: str, knobs: str, expected: str
) -> None:
    kernels = list(loop.kernels(apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")))
    planned = [k for k in kernels if tile.PLAN in k.attributes]
    gemm = next(k for k in planned if k.attributes[tile.PLAN].rule.data == "wgmma")  # type: ignore[union-attr]
    cluster = gemm.attributes[tile.PLAN].values["cluster"]  # type: ignore[union-attr]
    if expected == "two passes":
        assert cluster == 1 and kernels[-1].sym_name.data.endswith("_reduce")
    else:
        assert (len(kernels), f"cluster {cluster}") == (1, expected)


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_auto_cluster_split_matches_float64_on_cpu() -> None:
    text = matmul_plain(64, 128, 4096, "bf16", "nk")
    error, bound = error_on_cpu(text, tile_with(""), seed=7)
    assert error < bound, error


def _planned(text: str, knobs: str) -> str:
    return str(apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}"))


@pytest.mark.parametrize(
    ("text", "knobs", "kernel", "why"),
    [
        # K = 128 in 8 chunks of 16: not whole 64-element boxes (error 2.5 had it run)
        (
            matmul_plain(64, 64, 128, "bf16", "nk", relu=False),
            "splitk=1",
            "linear_0",
            "chunks of whole 64-element boxes",
        ),
        (scaled_matmul(64, 80, 128), "splitk=1", "scaled_mm_0", "8-bit float"),
        # the partial kernel of a split in two passes, split again (error 1.0 had it run)
        (
            matmul_plain(64, 64, 256, "bf16", "nk", relu=False),
            "splitk=2 splitk_mode=twopass",
            "linear_0_splitk",
            "not in a split's partial kernel",
        ),
    ],
    ids=["chunks_off_the_box", "fp8", "partial_kernel"],
)
def test_a_written_cluster_plan_the_rule_cannot_run_is_refused(
    text: str, knobs: str, kernel: str, why: str
) -> None:
    """A hand-written `cluster = 8` (or 2) plan is checked as the knob path checks it: it had
    compiled into a wrong answer where K's chunks are not whole boxes, for 8-bit floats and on
    a split's partial kernel."""
    planned = _planned(text, knobs)
    head, _, tail = planned.partition(f"loop.kernel @{kernel}(")
    tail = tail.replace("cluster = 1,", "cluster = 8," if "boxes" in why else "cluster = 2,", 1)
    with pytest.raises(DiagnosticException, match=f"plan of kernel @{kernel}: .*{why}"):
        apply_pipeline(parse(f"{head}loop.kernel @{kernel}({tail}"), "tile")


@pytest.mark.parametrize(
    ("knobs", "why"),
    [
        ("persistent=1", "not with persistent=1"),
        ("store=direct", "not with store=direct"),
        ("swap=on", "swap=on does not apply"),
    ],
)
def test_cluster_knobs_that_clash_are_refused(knobs: str, why: str) -> None:
    """Knobs set by hand that the cluster split cannot keep are refused by name (they had been
    overridden: the plan came out with persistent = 0 or store = "smem")."""
    text = matmul_plain(64, 1024, 4096, "bf16", "nk", relu=False)
    with pytest.raises(DiagnosticException, match=why):
        _planned(text, f"splitk=2 splitk_mode=cluster {knobs}")


def test_a_wide_block_narrows_to_fit_its_tile_beside_the_ring() -> None:
    """2048³ takes 128×256 blocks; staging their f32 tile leaves no room for two ring slots,
    so the cluster split narrows the block to 128 columns (it had been refused as if the user
    had written the plan)."""
    text = matmul_plain(2048, 2048, 2048, "bf16", "nk", relu=False)
    (kernel,) = loop.kernels(apply_pipeline(parse(text), "fuse,plan{splitk=4 splitk_mode=cluster}"))
    values = kernel.attributes[tile.PLAN].values  # type: ignore[union-attr]
    assert (values["bm"], values["bn"], values["cluster"]) == (128, 128, 4)


def test_stages_set_by_hand_are_kept_or_refused_beside_the_staged_tile() -> None:
    """The cluster split fits its ring beside the block's f32 tile with fewer slots only where
    `stages` is the rule's: 5 slots of 128×128 do not fit, and were silently cut to 4."""
    text = matmul_plain(256, 512, 8192, "bf16", "nk", relu=False)
    knobs = "mma=wgmma bm=128 bn=128 splitk=2 splitk_mode=cluster"
    with pytest.raises(DiagnosticException, match="bn=128 with 5 ring slots needs"):
        _planned(text, f"{knobs} stages=5")
    for stages, planned in (("stages=3", 3), ("", 4)):
        assert f"stages = {planned}," in _planned(text, f"{knobs} {stages}")
