"""The wgmma GEMM with B multicast to the two blocks of a cluster (`multicast=b`, or A with
`multicast=a`: passes/tile/gemm/wgmma_multicast.py) run on the CPU (tests/cpu_wgmma.py: the
blocks of a cluster at once as processes, their mbarriers shared, each TMA multicast copy
landing in both blocks) against float64: clusters of two rows of tiles (1, 2, 1), an odd number
of rows of tiles (the last pair's second block past M), persistent pairs (2, 1, 1) taking
several tiles (one pair for a one-SM target), an N-major B (in halves of its chunks, or of
each chunk's K rows), 8-bit floats, and A shared by an
odd number of columns of tiles; and the same over clusters of four blocks (`b4`, `a4`).
The kernels' consumers release a slot with one thread's arrival a block after
`wgmma.wait_group`, which the emulation's warpgroup-wide commit makes sound.
"""

from __future__ import annotations

import re

import pytest
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu
from programs import matmul_plain, scaled_matmul, tile_with

from tinyopt.compiler import lower
from tinyopt.dialects import tile

pytestmark = pytest.mark.skipif(COMPILER is None, reason="g++ not found")

CASES = [
    # (id, program, knobs, cluster dims)
    ("nk_256x256x512", matmul_plain(256, 256, 512, "bf16", "nk"), "", (1, 2, 1)),
    ("odd_rows_320x256x264", matmul_plain(320, 256, 264, "bf16", "nk"), "", (1, 2, 1)),
    # A shared by 3 columns of 128: the second block of the last pair past N
    (
        "a_odd_columns_256x384x264",
        matmul_plain(256, 384, 264, "bf16", "nk"),
        "multicast=a bn=128",
        (2, 1, 1),
    ),
    # 18 rows of 64-row tiles by 12 columns: 108 pairs of tiles for 66 pairs of blocks
    (
        "persistent_pairs_1100x1500x128",
        matmul_plain(1100, 1500, 128, "bf16", "nk"),
        "persistent=1 bm=64 bn=128",
        (2, 1, 1),
    ),
    # a persistent grid planned for one SM: one pair of blocks walks all 3 × 2 pairs of tiles
    # (the grid was sms // 2 = 0 pairs, which the kernel's verifier refused)
    (
        "persistent_one_sm_pair_330x200x136",
        matmul_plain(330, 200, 136, "bf16", "nk"),
        "persistent=1 bm=64 bn=128 sms=1",
        (2, 1, 1),
    ),
    # N-major B: each block copies one of the tile's two 64-column chunks; a ragged K
    ("n_major_256x256x520", matmul_plain(256, 256, 520, "bf16"), "splitk=1 bn=128", (1, 2, 1)),
    # N-major B in 192-wide blocks: three chunks, each block copying 32 of every chunk's 64 K
    # rows; a ragged N (the third column of tiles past it) and a K tail inside the second half
    (
        "n_major_k_halves_256x400x552",
        matmul_plain(256, 400, 552, "bf16"),
        "splitk=1 mma=wgmma bm=128 bn=192",
        (1, 2, 1),
    ),
    # the same on 192×192 blocks (three consumer warpgroups), persistent pairs
    (
        "n_major_k_halves_tall_persistent_400x400x200",
        matmul_plain(400, 400, 200, "bf16"),
        "splitk=1 mma=wgmma bm=192 bn=192 persistent=1 sms=2",
        (2, 1, 1),
    ),
    ("fp8_256x256x512", scaled_matmul(256, 256, 512), "", (1, 2, 1)),
    # Four blocks sharing B (`b4`): a K-major tile's 256 rows, 64 each
    (
        "b4_nk_512x256x520",
        matmul_plain(512, 256, 520, "bf16", "nk"),
        "multicast=b4 mma=wgmma bm=128 bn=256 splitk=1",
        (1, 4, 1),
    ),
    # 5 rows of tiles: the last cluster's three blocks past M copy zeros and store nothing
    (
        "b4_odd_rows_520x256x264",
        matmul_plain(520, 256, 264, "bf16", "nk"),
        "multicast=b4 mma=wgmma bm=128 bn=128 splitk=1",
        (1, 4, 1),
    ),
    # N-major B: four 64-column chunks, one each; two chunks, 16 of each chunk's 64 K rows each
    (
        "b4_n_major_chunks_512x256x264",
        matmul_plain(512, 256, 264, "bf16"),
        "multicast=b4 mma=wgmma bm=128 bn=256 splitk=1",
        (1, 4, 1),
    ),
    (
        "b4_n_major_k_quarters_512x256x520",
        matmul_plain(512, 256, 520, "bf16"),
        "multicast=b4 mma=wgmma bm=128 bn=128 splitk=1",
        (1, 4, 1),
    ),
    # A over 5 columns of tiles (three blocks past N), 32 of its 128 rows each
    (
        "a4_odd_columns_256x640x264",
        matmul_plain(256, 640, 264, "bf16", "nk"),
        "multicast=a4 mma=wgmma bm=128 bn=128 splitk=1",
        (4, 1, 1),
    ),
    ("fp8_b4_512x256x512", scaled_matmul(512, 256, 512), "multicast=b4 bm=128", (1, 4, 1)),
    # persistent clusters of four: 2 clusters (the 10 of 12 SMs four-block clusters fill) walk
    # 5 × 12 cluster rows of 64×128 tiles; A shared on a one-SM target: one cluster walks all
    (
        "b4_persistent_1100x1500x128",
        matmul_plain(1100, 1500, 128, "bf16", "nk"),
        "multicast=b4 persistent=1 bm=64 bn=128 sms=12",
        (4, 1, 1),
    ),
    (
        "a4_persistent_one_sm_330x600x136",
        matmul_plain(330, 600, 136, "bf16", "nk"),
        "multicast=a4 persistent=1 bm=64 bn=128 sms=1",
        (4, 1, 1),
    ),
    # 128×256 blocks with 4 slots beside the staging tiles: the two mbarrier arrays share one
    # 1024-byte place in dynamic shared memory (16-byte aligned, `hopper.MBARRIER_ALIGN`)
    (
        "four_slots_beside_staging_256x512x520",
        matmul_plain(256, 512, 520, "bf16", "nk"),
        "splitk=1 mma=wgmma bm=128 bn=256 stages=4 store=smem",
        (1, 2, 1),
    ),
]


@pytest.mark.parametrize(
    ("text", "knobs", "dims"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_multicast_wgmma_matches_float64_on_cpu(
    text: str, knobs: str, dims: tuple[int, int, int]
) -> None:
    pipeline = tile_with(knobs if "multicast" in knobs else f"multicast=b {knobs}")
    lowered = lower(text, pipeline)
    (kernel,) = [op for op in lowered[1].ops if isinstance(op, tile.CudaKernelOp)]
    source = kernel.source.data
    assert f"__cluster_dims__({dims[0]}, {dims[1]}, {dims[2]})" in source
    assert re.search(r"tinyopt_tma_load_\dd_multicast\w*\(&", source)
    assert "tinyopt_mbarrier_arrive_cluster(&" in source
    error, bound = error_on_cpu(text, pipeline, seed=3, lowered=lowered)
    assert error < bound, error
