"""B tiles multicast to clusters of two blocks (`multicast`, passes/tile/gemm/wgmma_multicast.py):
the SASS of the paired kernel, what `multicast=b` and a written plan refuse by name, and the
automatic choice on shapes of each kind the measurements separated. The kernels' numbers are
checked on the GPU by tests/test_gpu_programs.py (the `multicast` programs of programs.py)."""

import re
from dataclasses import replace
from pathlib import Path

import pytest
from programs import batched_matmul, matmul_plain, swiglu, tile_with
from test_sass import CUOBJDUMP, HAS_NVDISASM, LOCAL_MEMORY, sass_of_each
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.compiler import apply_pipeline, parse
from tinyopt.passes.tile.gemm.wgmma_multicast import multicast_pays, multicast_tiles
from tinyopt.passes.tile.gemm.wgmma_plan import Operands, WgmmaTiles
from tinyopt.passes.tile.target import H200

OFF_SECTORS = matmul_plain(1000, 2048, 4392, "bf16", "nk")
"""K = 4392: B's rows (8784 bytes) start 16 bytes off 32-byte sectors; 8 rows of 128x128
tiles, 128 blocks, 69 K steps: multicast=auto pairs them."""


def _plans(text: str, knobs: str = "") -> list[str]:
    planned = str(apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}"))
    return re.findall(r"#tile\.plan<wgmma, [^>]*>", planned)


@pytest.mark.skipif(CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found")
def test_paired_blocks_multicast_b_and_arrive_without_a_memory_barrier(tmp_path: Path) -> None:
    (code,) = sass_of_each(OFF_SECTORS, tile_with(""), tmp_path).values()
    assert "UTMALDG.2D.MULTICAST" in code and "HGMMA.64x128x16" in code
    assert "SYNCS.ARRIVE.TRANS64.RED" in code  # the arrival on the other block's mbarrier
    assert not LOCAL_MEMORY.search(code), LOCAL_MEMORY.search(code)
    # Fences only before the cluster barrier that follows the mbarrier inits: an arrival with
    # cluster-scope release semantics put a MEMBAR.ALL.GPU in the K loop (1.5x slower).
    after_start = code[code.index("UCGABAR_WAIT") :]
    assert not re.search(r"\bMEMBAR", after_start), re.search(r"\bMEMBAR[.A-Z]*", after_start)


@pytest.mark.parametrize(
    ("text", "knobs", "why"),
    [
        (swiglu(1000, 1024, 2048), "dual=on", "a dual GEMM"),
        (OFF_SECTORS, "ws=0", "ws=0"),
        (OFF_SECTORS, "splitk=2 splitk_mode=cluster", "a split of K over a cluster"),
        (OFF_SECTORS, "streamk=tail", "streamk=tail"),
        (matmul_plain(100, 2048, 4392, "bf16", "nk"), "bm=128", "one row of tiles (M=100"),
    ],
)
def test_multicast_on_refuses_what_pairs_cannot_run(text: str, knobs: str, why: str) -> None:
    with pytest.raises(DiagnosticException, match=f"multicasts B .*not with .*{re.escape(why)}"):
        apply_pipeline(parse(text), f"fuse,plan{{mma=wgmma multicast=b {knobs}}}")


@pytest.mark.parametrize(
    ("text", "paired"),
    [
        (OFF_SECTORS, True),
        # B's rows on sectors (K = 4096): the Llama-3 linears ran 0.95-0.99x as fast paired
        (matmul_plain(1000, 2048, 4096, "bf16", "nk"), False),
        # 9 rows of tiles: the pair would add a block of zeros past M
        (matmul_plain(1100, 2048, 4392, "bf16", "nk"), False),
        # 17 K steps
        (matmul_plain(1000, 2048, 1064, "bf16", "nk"), False),
        # 4096 rows: 512 tiles, four waves
        (matmul_plain(4096, 4096, 4392, "bf16", "nk"), False),
        # an N-major B off sectors (N = 1000), 64 K steps: paired at any number of waves
        (batched_matmul(3, 512, 1000, 4096, "bf16"), True),
        (batched_matmul(17, 1000, 1000, 1000, "bf16"), True),
        # an N-major B of 7 K steps: the pair's barriers cost more than it saves
        (batched_matmul(3, 1000, 1000, 448, "bf16"), False),
        # an N-major B on sectors (N = 1024)
        (batched_matmul(3, 1000, 1024, 1000, "bf16"), False),
        # 192-wide blocks of an N-major B off sectors (N = 1064), under a wave, 22 K steps:
        # each block copies half of every chunk's K rows (`k_halves`)
        (matmul_plain(2535, 1064, 1408, "bf16"), True),
        # the same blocks over 3 K steps
        (matmul_plain(2239, 792, 192, "bf16"), False),
    ],
)
def test_auto_pairs_only_where_the_measurements_say(text: str, paired: bool) -> None:
    plans = _plans(text)
    assert plans, "no wgmma kernel"
    assert all(('multicast = "b"' in p) == paired for p in plans), plans


def test_an_odd_number_of_n_major_chunks_pairs_in_halves_of_k() -> None:
    """192-wide blocks of an N-major B hold three 64-column chunks: each block of the pair
    copies 32 of every chunk's 64 K rows (boxes of 32 × 64) instead of half of the chunks."""
    text = matmul_plain(1000, 960, 4392, "bf16")
    plans = _plans(text, "mma=wgmma bn=192 multicast=b")
    assert plans and all('multicast = "b"' in p for p in plans), plans
    lowered = str(apply_pipeline(parse(text), "fuse,tile{mma=wgmma bn=192 multicast=b}"))
    assert "box = array<i64: 32, 64>" in lowered
    assert len(re.findall(r"tile\.tma_load %1\[.*multicast 3", lowered)) == 3


@pytest.mark.parametrize(("rows", "paired"), [(4608, True), (11520, True), (14592, False)])
def test_auto_pairs_192_wide_n_major_blocks_up_to_five_waves(rows: int, paired: bool) -> None:
    """`k_halves` pairs ran 1.07x as fast (geometric mean) up to 5 waves, 1.00x past them:
    128×192 blocks (7 columns of them) of an N-major B off sectors, 1.9, 4.8 and 6.0 waves."""
    t = WgmmaTiles(bm=128, bn=192, stages=4, ws=1, store="smem")
    pays = multicast_pays(t, 1, rows, 1344, 1408, 16, True, True, H200)
    assert pays == paired


def test_a_written_multicast_plan_is_checked_as_the_knob_path() -> None:
    """A hand-written `multicast = "b"` plan where the rule cannot pair the blocks (one row of
    tiles) is refused, as the knob is."""
    one_row = matmul_plain(100, 2048, 4392, "bf16", "nk")
    planned = str(apply_pipeline(parse(one_row), "fuse,plan{mma=wgmma bm=128 bn=128 splitk=1}"))
    assert planned.count('multicast = "off"') == 1
    written = planned.replace('multicast = "off"', 'multicast = "b"')
    with pytest.raises(DiagnosticException, match="not with one row of tiles"):
        apply_pipeline(parse(written), "tile")


def test_stages_set_by_hand_are_kept_beside_the_pairs_mbarriers() -> None:
    """3×1000³ pairs 128×256 blocks by B. `stages=4` had been cut to 3 without a word where the
    pair's mbarriers took two 1024-byte places; they now share one, and 4 slots fit beside
    `store=smem`'s staging tiles. Where a hand-set ring and the pair's mbarriers do not fit
    (a target with 1 KiB less shared memory), `auto` keeps the blocks unpaired and `b` is
    refused by name."""
    text = batched_matmul(3, 1000, 1000, 1000, "bf16")
    assert all('multicast = "b"' in p and "stages = 3" in p for p in _plans(text, "mma=wgmma"))
    plans = _plans(text, "mma=wgmma stages=4")
    assert plans and all('multicast = "b"' in p and "stages = 4" in p for p in plans), plans
    t = WgmmaTiles(bm=128, bn=256, stages=4, ws=1, store="smem")
    paired = replace(t, multicast="b")
    tight = replace(H200, dynamic_shared=paired.shared_bytes - 1)
    operands = Operands(a=0, b=1, b_mn_major=True)
    extents = (3, 1000, 1000, 1000)
    assert multicast_tiles(t, "auto", operands, extents, 16, True, tight, True) == t
    assert multicast_tiles(t, "auto", operands, extents, 16, True, tight) == replace(
        paired, stages=3
    )
    why = multicast_tiles(t, "b", operands, extents, 16, True, tight, True)
    assert isinstance(why, str) and "multicast=b) with stages=4: the pair's ring" in why, why


@pytest.mark.parametrize(
    ("text", "knobs", "why"),
    [
        # 3 rows of 128-row tiles for a cluster of four
        (matmul_plain(300, 2048, 4392, "bf16", "nk"), "bm=128", "3 rows of tiles (M=300"),
        # a K-major B tile of 208 rows: 52 a block, off the 8-row swizzle atoms
        (OFF_SECTORS, "bm=128 bn=208", "a share of 52 rows of each B tile"),
    ],
)
def test_four_sharers_refuse_by_name(text: str, knobs: str, why: str) -> None:
    with pytest.raises(DiagnosticException, match=f"to four blocks' .*not with .*{re.escape(why)}"):
        apply_pipeline(parse(text), f"fuse,plan{{mma=wgmma multicast=b4 {knobs}}}")


def test_four_sharers_walk_tiles_in_the_clusters_that_run_at_once() -> None:
    """`multicast=b4` on a grid of more tiles than SMs: persistent, as without multicast, in
    the 30 clusters of four that run at once on 132 SMs (`Target.cluster_slots`: 120 blocks),
    each block copying a quarter of the B tile's 256 rows into all four (`multicast 15`)."""
    text = matmul_plain(4096, 4096, 4392, "bf16", "nk")
    knobs = "mma=wgmma bm=128 bn=256 multicast=b4"
    plans = _plans(text, knobs)
    assert plans and all('multicast = "b4"' in p and "persistent = 1" in p for p in plans), plans
    lowered = str(apply_pipeline(parse(text), f"fuse,tile{{{knobs}}}"))
    assert "grid [120, 1, 1] block [384, 1, 1] cluster [4, 1, 1]" in lowered
    assert "box = array<i64: 64, 64>" in lowered
    assert len(re.findall(r"tile\.tma_load %1\[.*multicast 15", lowered)) == 1
    one_tile = str(apply_pipeline(parse(text), f"fuse,tile{{{knobs} persistent=0}}"))
    assert "grid [16, 32, 1] block [384, 1, 1] cluster [1, 4, 1]" in one_tile
