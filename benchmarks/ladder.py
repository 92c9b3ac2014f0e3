"""The SGEMM ladder: each optimization step as a knob setting of the `tile` pass.

Shared by the benchmark (bench_ladder.py), the sanitizer script (sanitize_matmul.py) and the
SASS test (tests/test_sass.py), so the kernels measured are the kernels checked.
"""

BLOCK = "bm=128 bn=128 bk=8 tm=8 tn=8"
LADDER = [
    ("naive: one thread per output", "schedule=sequential"),
    ("shared-memory tiling 32x32x32", "bm=32 bn=32 bk=32 tm=1 tn=1 vec=1 stages=1 split=1 group=0"),
    ("register tiling 8x8 per thread", "bm=64 bn=64 bk=8 tm=8 tn=8 vec=1 stages=1 split=1 group=0"),
    ("128x128 block tile", f"{BLOCK} vec=1 stages=1 split=1 group=0"),
    ("16-byte vector loads", f"{BLOCK} vec=4 stages=1 split=1 group=0"),
    ("split fragments (LDS.128)", f"{BLOCK} vec=4 stages=1 split=2 group=0"),
    ("double-buffered smem, 255 regs", f"{BLOCK} vec=4 stages=2 split=2 group=0 minblocks=1"),
    ("+ 2 blocks/SM (128 regs)", f"{BLOCK} vec=4 stages=2 split=2 group=0 minblocks=2"),
    ("+ grouped CTA raster (L2)", f"{BLOCK} vec=4 stages=2 split=2 group=8 minblocks=2"),
    ("defaults (heuristic)", ""),
]

TALL_K = [
    ("tall K 512x512x32768, no split", "splitk=1"),
    ("tall K 512x512x32768, split-K 8 (two-pass)", "splitk=8"),
    ("tall K 512x512x32768, split-K 16 (two-pass)", "splitk=16"),
]
