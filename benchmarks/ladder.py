"""The matmul ladder: each optimization step as a knob setting of the `tile` pass.

Shared by the benchmark (bench_ladder.py), the sanitizer script (sanitize_matmul.py) and the
SASS test (tests/test_sass.py), so the kernels measured are the kernels checked. Every step
runs the same graph program, `relu(x @ w)` (`tests/programs.py: matmul_plain`), whose operands
are plain loads, so the copy engines that move raw bytes (cp.async, TMA) apply to it too; the
atomic split-K step runs `x @ w` (an activation cannot be applied to partial sums).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Step:
    """One row of the ladder: what it shows, its knobs, the operand type, and its shape."""

    name: str
    knobs: str
    dtype: str = "f32"
    tall_k: bool = False
    """Measured on 512×512×32768 (where split-K pays), not on size³."""
    relu: bool = True
    """The program is `relu(x @ w)`; False: `x @ w`."""

    @property
    def tf32(self) -> bool:
        """f32 inputs rounded to TF32 (compared with cuBLAS in TF32, to a looser tolerance)."""
        return "mma=tf32" in self.knobs

    def runs_at(self, m: int, n: int, k: int) -> bool:
        """Whether the step's kernels take (M, N, K): TMA (`copy=tma`, `mma=wgmma`) needs rows
        of A [M, K] and B [K, N] that are multiples of 16 bytes."""
        if "copy=tma" not in self.knobs and "mma=wgmma" not in self.knobs:
            return True
        per_16_bytes = 4 if self.dtype == "f32" else 8
        return k % per_16_bytes == 0 and n % per_16_bytes == 0

    def shape(self, size: int) -> tuple[int, int, int]:
        """Returns (M, N, K) of the step at ladder size `size`."""
        return TALL_K_SHAPE if self.tall_k else (size, size, size)

    @property
    def pipeline(self) -> str:
        return f"fuse,tile{{{self.knobs}}},to-cuda" if self.knobs else "fuse,tile,to-cuda"


TALL_K_SHAPE = (512, 512, 32768)
BLOCK = "bm=128 bn=128 bk=8 tm=8 tn=8"
FP32 = f"{BLOCK} split=2 group=8 minblocks=2"
"""The best register-staged SGEMM knobs: the base the copy-engine steps change one thing of."""
UNSWAPPED = "pairswap=0 interleave=off"
"""The steps before the register-bank step stage B as it is (`pairswap` is on by default) and
copy both sides' next K slices at once (`interleave` is on by default at 4096³)."""
BK16 = "bm=128 bn=128 bk=16 tm=8 tn=8 split=2 group=8 minblocks=2 vec=4 stages=2 pairswap=1"

LADDER = [
    Step("naive: one thread per output", "schedule=sequential"),
    Step(
        "shared-memory tiling 32x32x32",
        "bm=32 bn=32 bk=32 tm=1 tn=1 vec=1 stages=1 split=1 group=0",
    ),
    Step(
        "register tiling 8x8 per thread",
        f"bm=64 bn=64 bk=8 tm=8 tn=8 vec=1 stages=1 split=1 group=0 {UNSWAPPED}",
    ),
    Step("128x128 block tile", f"{BLOCK} vec=1 stages=1 split=1 group=0 {UNSWAPPED}"),
    Step("16-byte vector loads", f"{BLOCK} vec=4 stages=1 split=1 group=0 {UNSWAPPED}"),
    Step("split fragments (LDS.128)", f"{BLOCK} vec=4 stages=1 split=2 group=0 {UNSWAPPED}"),
    Step(
        "double-buffered smem, 255 regs",
        f"{BLOCK} vec=4 stages=2 split=2 group=0 minblocks=1 {UNSWAPPED}",
    ),
    Step(
        "+ 2 blocks/SM (128 regs)",
        f"{BLOCK} vec=4 stages=2 split=2 group=0 minblocks=2 {UNSWAPPED}",
    ),
    Step("+ grouped CTA raster (L2)", f"{FP32} vec=4 stages=2 {UNSWAPPED}"),
    Step(
        "+ B pairs swapped, serpentine FMAs (register banks)",
        f"{FP32} vec=4 stages=2 pairswap=1 interleave=off",
    ),
    Step("+ bk=16 (half the barriers)", f"{BK16} interleave=off"),
    Step("+ A's then B's next K slice (interleave)", f"{BK16} interleave=on"),
    Step("+ stream-K (one wave of blocks shares the K steps)", f"{BK16} streamk=on"),
    Step("cp.async ring, 3 stages", f"{FP32} copy=cp_async stages=3"),
    Step(
        "cp.async, bk=16, 4 stages",
        "bm=128 bn=128 bk=16 tm=8 tn=8 split=2 group=8 minblocks=2 copy=cp_async stages=4",
    ),
    Step(
        "TMA ring (thread 0 issues), bk=16, 4 stages",
        "bm=128 bn=128 bk=16 tm=8 tn=8 split=2 group=8 minblocks=2 copy=tma ws=0 stages=4",
    ),
    Step(
        "warp specialization: TMA producer warp",
        "bm=128 bn=128 bk=16 tm=8 tn=8 split=2 group=8 copy=tma ws=1 stages=4",
    ),
    Step("defaults (heuristic)", ""),
    Step("tall K, no split", "splitk=1", tall_k=True),
    Step("tall K, split-K 8 (two-pass)", "splitk=8 splitk_mode=twopass", tall_k=True),
    Step("tall K, split-K 16 (two-pass)", "splitk=16 splitk_mode=twopass", tall_k=True),
    Step("tall K, no split, no relu", "splitk=1", tall_k=True, relu=False),
    Step(
        "tall K, split-K 8 (atomic red.add, no relu)",
        "splitk=8 splitk_mode=atomic",
        tall_k=True,
        relu=False,
    ),
    Step(
        "tall K, split-K 16 (atomic red.add, no relu)",
        "splitk=16 splitk_mode=atomic",
        tall_k=True,
        relu=False,
    ),
    Step("tensor cores TF32: mma.sync m16n8k8 (f32 in, TF32-rounded)", "mma=tf32"),
    Step("tensor cores: mma.sync m16n8k16 + ldmatrix (bf16)", "mma=sync", dtype="bf16"),
    Step("Hopper: wgmma + TMA + warp specialization (bf16)", "mma=wgmma", dtype="bf16"),
]
