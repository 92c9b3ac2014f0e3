"""Split-K on the wgmma rule (passes/tile/gemm/wgmma_plan.split_form, the emitter's K base): the
partial kernel of `split_k.py` taken by wgmma (each block's TMA boxes start at its chunk of K,
its operand batch the partial's batch index / splits), then the fold, run on the CPU with the K
loop emulated (tests/cpu_wgmma.py) against float64: unbatched with a K-major B and a bias in the
fold, batched with an N-major B, persistent blocks, no producer warpgroup (`ws=0`), f16, and the
split `splitk=0` picks for a small grid with a long K (in two passes: `splitk_mode=auto` splits
such grids over clusters, tests/test_wgmma_cluster_on_cpu.py). Chunks of whole 64-element boxes
whose last one reaches past K (`split_k.chunk_elements`, under `mma=wgmma`, or a split, set
by hand or auto, of a kernel wgmma takes): the partial kernel's guard past K is TMA's zero
fill. A chunk that is not a multiple of 64 stays on mma.sync, or under `mma=wgmma` is refused
by name. A small grid of
64×64 blocks too many to split within a wave, over a long K, split on 128×128 blocks instead
(`split_k_plan.square_split`; `sms` shrinks the grid the rule sees)."""

from __future__ import annotations

import pytest
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu
from programs import batched_matmul, matmul_plain, tile_with

from xdsl.utils.exceptions import DiagnosticException

from tinyopt.compiler import apply_pipeline, parse
from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.gemm.split_k import chunk_elements

CASES = [
    # (id, program, knobs, the partial kernel's loop extents)
    (
        "linear_130x192x512_bias",
        matmul_plain(130, 192, 512, "bf16", "nk"),
        "splitk=4",
        [4, 130, 192],
    ),
    ("bmm_2x70x64x256", batched_matmul(2, 70, 64, 256, "bf16"), "splitk=2", [4, 70, 64]),
    (
        "persistent_130x192x512",
        matmul_plain(130, 192, 512, "bf16", "nk"),
        "splitk=4 persistent=1",
        [4, 130, 192],
    ),
    (
        "no_producer_130x192x512",
        matmul_plain(130, 192, 512, "bf16", "nk"),
        "splitk=4 ws=0",
        [4, 130, 192],
    ),
    ("f16_97x72x256", matmul_plain(97, 72, 256, "f16", "kn", relu=False), "splitk=2", [2, 97, 72]),
    (
        "auto_64x128x4096",
        matmul_plain(64, 128, 4096, "bf16", "nk", relu=False),
        "splitk_mode=twopass",
        [16, 64, 128],
    ),
    # K = 200 in chunks of 64, 64, 64 and 8; 328 in 192 and 136; 200 in 128 and 72.
    (
        "past_k_130x192x200_bias",
        matmul_plain(130, 192, 200, "bf16", "nk"),
        "mma=wgmma splitk=4",
        [4, 130, 192],
    ),
    (
        "past_k_bmm_2x70x64x328",
        batched_matmul(2, 70, 64, 328, "bf16"),
        "mma=wgmma splitk=2",
        [4, 70, 64],
    ),
    (
        "past_k_f16_97x72x200",
        matmul_plain(97, 72, 200, "f16", "kn", relu=False),
        "mma=wgmma splitk=2",
        [2, 97, 72],
    ),
    # A split set by hand under mma=auto on a kernel wgmma takes: chunks of 64, the last of 8.
    (
        "hand_past_k_130x192x200_bias",
        matmul_plain(130, 192, 200, "bf16", "nk"),
        "splitk=4",
        [4, 130, 192],
    ),
    # K = 4000 (62.5 boxes): 16 chunks of 256, the last of 160.
    (
        "auto_past_k_64x128x4000",
        matmul_plain(64, 128, 4000, "bf16", "nk", relu=False),
        "splitk_mode=twopass",
        [16, 64, 128],
    ),
    # 12 blocks of 64×64 on 10 SMs: 4 chunks of 1536 on 2 of 128×128, the last of 1392.
    (
        "square_200x128x6000_relu",
        matmul_plain(200, 128, 6000, "bf16", "nk"),
        "sms=10",
        [4, 200, 128],
    ),
]


def _kernels(text: str, knobs: str) -> list[loop.KernelOp]:
    return list(loop.kernels(apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")))


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    ("text", "knobs", "extents"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_wgmma_split_matches_float64_on_cpu(text: str, knobs: str, extents: list[int]) -> None:
    partial, fold = _kernels(text, knobs)
    assert partial.attributes[tile.PLAN].rule.data == "wgmma"  # type: ignore[union-attr]
    assert fold.sym_name.data.endswith("_reduce")
    nest = next(op for op in partial.walk() if isinstance(op, loop.ParallelOp))
    assert list(nest.extents) == extents
    error, bound = error_on_cpu(text, tile_with(knobs), seed=3)
    assert error < bound, error


def test_chunks_off_the_tma_box_stay_on_mma_sync() -> None:
    # K = 100 in 4 chunks of 25 (chunks of 64 would leave the last empty): wgmma refuses.
    partial, _ = _kernels(matmul_plain(130, 192, 100, "bf16", "nk"), "splitk=4 why=1")
    assert partial.attributes[tile.PLAN].rule.data == "mma_sync"  # type: ignore[union-attr]
    refusals = [r.data for r in partial.attributes[tile.REFUSALS].data]  # type: ignore[union-attr]
    assert any("4 chunks of 25" in r for r in refusals), refusals


@pytest.mark.parametrize(("m", "n", "k", "splits"), [(278, 7360, 4656, 2), (1360, 744, 2976, 2)])
def test_a_split_set_by_hand_keeps_wgmma(m: int, n: int, k: int, splits: int) -> None:
    # ⌈K / 2⌉ (2328, 1488) is not whole boxes; the kernel is wgmma's unsplit, so its chunks
    # are (2368, 1536), the last reaching past K, and wgmma takes the partial kernel (it went
    # to mma.sync and ran 0.23-0.31× cuBLAS: benchmarks/RESULTS.md fifty-first session).
    text = matmul_plain(m, n, k, "bf16", "nk", relu=False)
    partial, fold = _kernels(text, f"splitk={splits}")
    assert partial.attributes[tile.PLAN].rule.data == "wgmma"  # type: ignore[union-attr]
    assert fold.sym_name.data.endswith("_reduce")


def test_chunks_off_the_tma_box_are_refused_by_name_under_wgmma() -> None:
    # K = 100 in 4 chunks: chunks of 64 would leave the last empty, so they are of 25.
    with pytest.raises(DiagnosticException, match="got 4 chunks of 25"):
        _kernels(matmul_plain(130, 192, 100, "bf16", "nk"), "mma=wgmma splitk=4")


def test_chunks_are_whole_boxes_where_none_is_left_empty() -> None:
    assert chunk_elements(200, 4, 64) == 64  # 64, 64, 64 and 8
    assert chunk_elements(4096, 8, 64) == 512  # dividing K, as before
    assert chunk_elements(13080, 16, 64) == 832  # the last of 600
    assert chunk_elements(100, 4, 64) == 25  # boxes of 64 would leave the last chunk empty
    assert chunk_elements(1955, 16) == 123  # no alignment asked: ⌈K / splits⌉
    for k in range(64, 3000, 7):
        for splits in (2, 3, 4, 8, 16):
            chunk = chunk_elements(k, splits, 64)
            if chunk % 64:  # whole boxes would leave a chunk empty
                assert chunk == -(-k // splits) and (splits - 1) * 64 * -(-k // (64 * splits)) >= k
            else:
                assert (splits - 1) * chunk < k <= splits * chunk, (k, splits, chunk)


def _partial_block(text: str, knobs: str) -> tuple[int, int, int]:
    """The (bm, bn, kernels) of the plan's first kernel: the partial one where K is split."""
    kernels = _kernels(text, knobs)
    values = kernels[0].attributes[tile.PLAN].values  # type: ignore[union-attr]
    return values["bm"], values["bn"], len(kernels)  # type: ignore[return-value]


def test_small_grids_split_on_square_blocks_where_narrow_ones_cannot() -> None:
    """130×128: 6 blocks of 64×64. On 10 SMs they cannot split within a wave, and a K of 72
    steps splits on 128×128 blocks; on 12 SMs they split themselves; with 64 K steps, or
    explicit blocks, nothing changes."""
    text = matmul_plain(130, 128, 4608, "bf16", "nk", relu=False)
    assert _partial_block(text, "sms=10") == (128, 128, 2)
    assert _partial_block(text, "sms=12") == (64, 64, 1)
    assert _partial_block(text, "sms=10 bm=64 bn=64") == (64, 64, 1)
    short = matmul_plain(130, 128, 4096, "bf16", "nk", relu=False)
    assert _partial_block(short, "sms=10")[:2] != (128, 128)
