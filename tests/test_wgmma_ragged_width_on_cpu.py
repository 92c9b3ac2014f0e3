"""wgmma blocks of a width off 64-column chunks (`bn` any multiple of 16 from 64 to 256, e.g. 208
as cuBLAS's 128×200 for 3×1000³): an N-major B's last 64-column chunk is copied whole and the
wgmma reads its first columns; the staged epilogue's last chunk stores only those. Run on the
CPU (tests/cpu_wgmma.py) against float64: K-major and N-major B, both epilogues, ragged M, N
and K, persistent blocks, 64-, 128- and 192-row blocks, a batch, a bias and GELU in the staged
epilogue, B or A multicast over a cluster of two; the blocks run last to first, so that a store
past a block's columns shows. What such a block does not run is refused by name; its machine
code keeps every value in registers.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu, run_program_on_cpu
from programs import batched_matmul, matmul_plain, mlp, tile_with
from test_sass import CUOBJDUMP, HAS_NVDISASM, LOCAL_MEMORY, sass_of_each
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.compiler import apply_pipeline, parse
from tinyopt.dialects import loop, tile

CASES = [
    # (name, program, knobs): K-major B (torch's linear) in 208 columns, N ragged (400 = 208
    # + 192), the staged epilogue with the bias; then the fragment stores.
    ("nk_208_smem", matmul_plain(300, 400, 200, "bf16", "nk"), "mma=wgmma bn=208"),
    ("nk_208_direct", matmul_plain(300, 400, 200, "bf16", "nk"), "mma=wgmma bn=208 store=direct"),
    # N-major B: the last chunk holds 16 of 64 columns (208; N = 440 = 208 + 232), 16 of 64
    # (80, 64-row blocks).
    ("kn_208", matmul_plain(260, 440, 136, "bf16", "kn", relu=False), "mma=wgmma bn=208"),
    ("kn_80_bm64", matmul_plain(100, 176, 72, "f16", "kn"), "mma=wgmma bm=64 bn=80"),
    # Persistent blocks walking several tiles (3 SMs), 144 = 2·64 + 16 columns.
    ("kn_144_persistent", matmul_plain(300, 296, 200, "bf16", "kn"), "mma=wgmma bn=144 sms=3"),
    # Three consumer warpgroups of 176 columns; a batch of 3 with 240 columns.
    ("tall_176", matmul_plain(400, 352, 128, "bf16", "nk"), "mma=wgmma bm=192 bn=176"),
    ("bmm_240", batched_matmul(3, 130, 248, 104, "bf16"), "mma=wgmma bn=240"),
    # GELU and a second linear in the staged epilogue's prefetch, 112 columns.
    ("mlp_112", mlp(200, 136, 232, "bf16"), "mma=wgmma bn=112"),
    # B multicast over pairs of rows of tiles: K-major (104 of 208 rows each, an odd third row
    # of tiles), N-major in an even number of chunks (two each of 208's four) and an odd one
    # (144's three: half of each chunk's K rows each), persistent; A multicast over pairs of
    # columns of 208 (N = 440: three columns of tiles).
    ("nk_208_multicast", matmul_plain(300, 400, 200, "bf16", "nk"), "mma=wgmma bn=208 multicast=b"),
    ("kn_208_multicast", matmul_plain(260, 440, 136, "bf16", "kn"), "mma=wgmma bn=208 multicast=b"),
    (
        "kn_144_multicast_persistent",
        matmul_plain(520, 296, 200, "bf16", "kn"),
        "mma=wgmma bn=144 multicast=b sms=3",
    ),
    (
        "kn_208_multicast_a",
        matmul_plain(260, 440, 136, "bf16", "kn"),
        "mma=wgmma bn=208 multicast=a",
    ),
]


def _plans(text: str, knobs: str) -> list[dict]:
    module = apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")
    return [k.attributes[tile.PLAN].values for k in loop.kernels(module)]  # type: ignore[union-attr]


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(("text", "knobs"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_ragged_width_blocks_match_float64_on_cpu(text: str, knobs: str) -> None:
    width = int(knobs.split("bn=")[1].split()[0])
    assert any(p.get("bn") == width for p in _plans(text, knobs))
    # Blocks last to first: a block's stores past its own columns would land after its
    # neighbour's, and show.
    backwards = partial(run_program_on_cpu, reverse=True)
    error, tolerance = error_on_cpu(text, tile_with(knobs), seed=5, run=backwards)
    assert error <= tolerance, error


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ("bn=208 streamk=tail persistent=1", "got streamk=tail"),
        ("bn=208 splitk=2 splitk_mode=cluster", "got a cluster split of 2"),
        ("bn=200", "a multiple of 16 in [64, 256] with mma=wgmma"),
        ("bn=48", "a multiple of 16 in [64, 256]"),
    ],
    ids=["streamk", "cluster", "off_16", "narrow"],
)
def test_what_ragged_width_blocks_do_not_run_is_refused(knobs: str, message: str) -> None:
    text = matmul_plain(512, 512, 2048, "bf16", "nk")
    with pytest.raises(DiagnosticException, match=message.replace("[", r"\[")):
        apply_pipeline(parse(text), f"fuse,plan{{mma=wgmma {knobs}}}")


@pytest.mark.skipif(CUOBJDUMP is None or not HAS_NVDISASM, reason="cuobjdump or nvdisasm not found")
def test_ragged_width_blocks_keep_their_accumulators_in_registers(tmp_path: Path) -> None:
    # 104 accumulators a consumer thread, an N-major B, the staged epilogue.
    text = batched_matmul(3, 1000, 1000, 1000, "bf16")
    kernels = sass_of_each(text, tile_with("mma=wgmma bn=208"), tmp_path)
    wide = [code for code in kernels.values() if "HGMMA.64x208x16" in code]
    assert wide, list(kernels)
    for code in wide:
        assert not LOCAL_MEMORY.search(code), "a 208-column block spills to local memory"
