"""`streamk=tail` on the persistent wgmma GEMM (`passes/tile/gemm/wgmma_stream_k.py`): whole
tiles first, then the last waves' K steps (all of them, on fewer tiles than blocks) shared by
every block, partial sums handed over
through the workspace and the flags; on the CPU emulation against float64, with small `sms`
so that a few tiles make a tail."""

from __future__ import annotations

import re

import pytest
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu
from programs import batched_matmul, matmul_plain, scaled_matmul, swiglu
from test_sass import CUOBJDUMP, HAS_NVDISASM, LOCAL_MEMORY, sass_of_each
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.compiler import apply_pipeline, lower
from tinyopt.passes.tile.gemm.wgmma_stream_k import aligned_head, shared_tiles

CASES = {
    # 3 x 3 tiles of 128x256 on 4 blocks: no whole round, 5 shared tiles (1.25 a block).
    "bf16_one_round_shared": (matmul_plain(300, 520, 384, "bf16"), "sms=4"),
    # 3 x 5 tiles of 128x128 on 4 blocks: one round of whole tiles, then 7 shared.
    "f16_whole_then_shared": (matmul_plain(330, 600, 256, "f16"), "sms=4 bn=128"),
    # the batch as part of the tile index; the epilogue from registers.
    "bf16_batched": (batched_matmul(3, 130, 256, 320, "bf16"), "sms=5 bn=128"),
    "bf16_direct_store_long_k": (matmul_plain(300, 520, 4096, "bf16"), "sms=4 bn=128 store=direct"),
    # FP8: K steps promoted (to f32) and not (to bf16).
    "fp8_promoted": (scaled_matmul(300, 520, 384, "f8E4M3FN", "f32"), "sms=4"),
    "fp8_fast": (scaled_matmul(300, 520, 640, "f8E4M3FN", "bf16"), "sms=5"),
    # promoted steps overlapped (`poverlap`): each piece's step count known only at run time,
    # odd or even, and the last step of a piece issuing none
    # (6 tiles of 5 steps over 7 blocks)
    "fp8_promoted_overlapped": (
        scaled_matmul(200, 264, 640, "f8E4M3FN", "f32"),
        "sms=7 promote=on poverlap=on",
    ),
    # fewer tiles than blocks: all of them shared. 3 x 3 tiles of 128x256 over 16 blocks (3.4
    # K steps of 6 a block), 8 tiles of 64x64 over 12 (10.7 of 16: the share bounds cut tiles
    # at different steps).
    "bf16_fewer_tiles_than_blocks": (matmul_plain(300, 520, 384, "bf16"), "sms=16 bn=256"),
    "bf16_64_rows": (matmul_plain(64, 512, 1024, "bf16", "nk"), "sms=12"),
    # K aligned (`aligned_head`): 9 tiles of 6 steps over 16 blocks (above, heads of 4), 8
    # tiles of 16 steps over 20 blocks (heads of 7, the tails cut over 12 helpers); the 12
    # blocks above keep contiguous shares (tails of 5 after heads of 11).
    "bf16_64_rows_aligned": (matmul_plain(64, 512, 1024, "bf16", "nk"), "sms=20"),
    # a SwiGLU: no dual GEMM shares K, so its two products run as two GEMMs that each do.
    "swiglu_unpaired": (swiglu(300, 256, 512), "mma=wgmma sms=5"),
}


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize("name", list(CASES))
def test_stream_k_tail_matches_whole_tiles_and_reference(name: str) -> None:
    """Each output as the reference computes it and, bit for bit in f32 sums of the same
    products, as without stream-K (the pieces add in K order of their shares)."""
    text, knobs = CASES[name]
    pipeline = f"fuse,tile{{streamk=tail {knobs}}},to-cuda"
    program, tiled = lower(text, pipeline.removesuffix(",to-cuda"))
    planned = str(tiled)
    assert re.search(r'#tile.plan<wgmma, .*persistent = 1, .*streamk = "tail"', planned)
    assert re.search(r"tile.kernel @\w+_flags", planned)  # the kernel zeroing the flags
    # The tile-level module goes on through to-cuda: `pipeline`, lowered once.
    lowered = (program, apply_pipeline(tiled, "to-cuda"))
    error, _ = error_on_cpu(text, pipeline, seed=2, lowered=lowered)
    whole, _ = error_on_cpu(text, pipeline.replace("streamk=tail", "streamk=off"), seed=2)
    limit = 1e-6 if "f32" in name or "promoted" in name else 2**-8
    assert error <= limit, error
    assert error == pytest.approx(whole, rel=0.05, abs=1e-7)


@pytest.mark.parametrize(
    ("text", "knobs", "message"),
    [
        (
            matmul_plain(300, 520, 384, "bf16"),
            "streamk=on",
            "shares the K steps of the last waves only",
        ),
        (matmul_plain(256, 512, 256, "bf16"), "streamk=tail sms=4 bn=128", "fill whole waves of 4"),
        (
            matmul_plain(128, 256, 128, "bf16"),
            "streamk=tail sms=8 bn=128",
            "needs a K step for each of the 8 blocks, got 2 tiles of 2",
        ),
        # persistent=0 set by hand had been planned persistent = 1 without a word
        (
            matmul_plain(300, 520, 384, "bf16"),
            "streamk=tail sms=4 persistent=0",
            "runs streamk=tail on persistent blocks .*; not with persistent=0",
        ),
    ],
    ids=["on", "whole_waves", "fewer_steps_than_blocks", "persistent_0"],
)
def test_stream_k_the_wgmma_rule_cannot_run_is_refused(text: str, knobs: str, message: str) -> None:
    with pytest.raises(DiagnosticException, match=message):
        lower(text, f"fuse,tile{{mma=wgmma {knobs}}}")


@pytest.mark.parametrize(
    ("tiles", "blocks", "steps"),
    [(9, 4, 6), (5, 4, 3), (288, 132, 47), (17, 16, 1), (9, 16, 6), (8, 12, 16), (64, 132, 64)],
)
def test_every_k_step_of_the_shared_tiles_is_in_exactly_one_share(
    tiles: int, blocks: int, steps: int
) -> None:
    """The arithmetic `StreamKWalk` emits: the shares' bounds (`first_unit`) are consecutive
    and cover every unit once, and `share_holding` names the share whose bounds contain a
    unit."""
    shared = shared_tiles(tiles, blocks)
    units = shared * steps
    bounds = [share * units // blocks for share in range(blocks + 1)]
    assert bounds[0] == 0 and bounds[-1] == units
    for unit in range(units):
        holder = ((unit + 1) * blocks - 1) // units  # StreamKWalk.share_holding
        assert bounds[holder] <= unit < bounds[holder + 1]
    assert (tiles - shared) % blocks == 0  # whole rounds before the shared tiles


@pytest.mark.parametrize(
    ("tiles", "blocks", "steps"),
    [(9, 16, 6), (8, 20, 16), (80, 132, 95), (72, 132, 64), (16, 132, 64), (63, 132, 32)],
)
def test_aligned_shares_hold_each_tail_step_once_in_distinct_rows(
    tiles: int, blocks: int, steps: int
) -> None:
    """The K-aligned walk on fewer tiles than blocks (`StreamKWalk._aligned_walk`): owners run
    every tile's first `head` steps; the helpers' bounds over the tails are consecutive, give
    each helper a step or more, and cover every tail step once; the holder `partials` names
    holds it; the rows its pieces write (tile + helper) are distinct and within the blocks."""
    head = aligned_head(tiles, blocks, steps)
    assert 0 < head < steps and head * blocks >= tiles * steps
    helpers, tail = blocks - tiles, steps - head
    tails = tiles * tail
    bounds = [j * tails // helpers for j in range(helpers + 1)]
    assert bounds[0] == 0 and bounds[-1] == tails
    assert all(b - a >= 1 for a, b in zip(bounds, bounds[1:]))  # no helper without a step
    assert max(b - a for a, b in zip(bounds, bounds[1:])) <= head  # no helper past an owner
    rows = set()
    for j in range(helpers):
        for t in range(bounds[j] // tail, -(-bounds[j + 1] // tail)):
            low, high = max(bounds[j], t * tail), min(bounds[j + 1], (t + 1) * tail)
            assert low < high
            assert ((low + 1) * helpers - 1) // tails == j  # `partials`' holder of the piece
            assert t + j not in rows and t + j < blocks
            rows.add(t + j)


def test_aligned_walk_is_not_taken_where_a_tail_would_leave_helpers_idle() -> None:
    """No aligned walk on as many tiles as blocks, where the head would be the whole tile,
    where the tails hold fewer steps than there are helpers, or where a tail is shorter than
    half a head (contiguous shares then)."""
    assert aligned_head(132, 132, 64) == 0
    assert aligned_head(128, 132, 16) == 0  # ⌈128·16 / 132⌉ = 16 steps: nothing left
    assert aligned_head(3, 16, 2) == 0  # 3 tails of 1 step for 13 helpers
    assert aligned_head(128, 132, 64) == 0  # tails of 1 step after heads of 63
    assert aligned_head(100, 132, 64) == 0  # tails of 15 after heads of 49


@pytest.mark.skipif(CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found")
def test_stream_k_tail_sass_keeps_hgmma_and_no_spills(tmp_path) -> None:
    """3000³ bf16 on 128×256 blocks: the shared kernel still issues HGMMA 64x256x16 and holds
    its accumulators, workspace handoffs included, in registers (no local memory)."""
    pipeline = "fuse,tile{streamk=tail bm=128 bn=256},to-cuda"
    codes = sass_of_each(matmul_plain(3000, 3000, 3000, "bf16"), pipeline, tmp_path)
    (code,) = [code for name, code in codes.items() if not name.endswith("_flags")]
    assert set(re.findall(r"\bHGMMA\.\w+", code)) == {"HGMMA.64x256x16"}
    assert "ST.E.STRONG.GPU" in code or "STG.E.STRONG.GPU" in code  # the release of a flag
    assert not LOCAL_MEMORY.search(code)
