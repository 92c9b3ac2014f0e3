"""Schedule rule for f32 GEMMs on Hopper tensor cores as three TF32 products (`mma=3xtf32`).

An f32 product a·b is taken as small_a·big_b + big_a·small_b + big_a·big_b, where big is the
f32 rounded to TF32 and small the rest rounded to TF32 (`wgmma_tf32_split.py`); the dropped
small_a·small_b is below 2^-22 of |a·b|. Each of the three is an m64nNk8 TF32 `wgmma`, so a K
step costs three times the tensor-core work of one TF32 product, which the H200 runs at
several times its f32 FMA rate. Each K step's products (12 wgmmas over 32 K elements) are
summed on the tensor cores in registers of their own, then added to the f32 accumulators on
the CUDA cores: the tensor cores' additions drop low bits, and over a whole K loop they left
2e-5 relative error at K = 4096 (H200, 2026-12-04) where per-step promotion leaves 2e-7,
below the f32 FMA kernel's 8e-7 (tests/test_wgmma_3xtf32.py holds it to f32 order beside
that kernel). A step holding an infinity or a nonzero value below 2^-114 runs in f32 FMA
instead, so special values come out as from f32.

The pipeline is the wgmma GEMM's (`wgmma.py`: TMA ring, producer warpgroup, one or two
consumer warpgroups of 64 rows) with 32-element (128-byte) K steps, each split by the
consumers into its slot and a second, "small" copy of the slot. TF32 wgmma reads K-major
operands only: A `[b?, M, K]`, and B `[b?, N, K]` (a linear's weight) is split in place; an
N-major B `[b?, K, N]` is split into K-major tiles of its own (one more tile a stage, so
fewer stages fit). Rows must be 16-byte aligned (K, or N of an N-major B, a multiple of 4).
Blocks are at most 128 columns wide (a thread holds bn/2 accumulators and
bn/2 products). Not taken: a paired contraction (the planner splits it into two
GEMMs this rule takes); `bk`, `persistent` and `ws` are not read (32-wide K steps, blocks
that are not persistent, a producer warpgroup). K may be split (`splitk`, or under
`mma=3xtf32` on a small grid the split `split_k_plan.auto_wgmma_splits` estimates with
`SPLIT_TF32_STEP_SECONDS`; partial sums folded in a second pass). `mma=auto` takes the rule
for f32 GEMMs of more than 64 rows whose grid has at least one block per SM: there it ran
1.29-1.39x cuBLAS's SGEMM; at 64 rows, on 64×64 blocks with K split, it ran 0.70-0.88x where
the CUDA-core rules ran 0.85-0.98x (H200, 2026-12-04), so smaller grids keep those rules,
except 33-64 rows too little work for the CUDA-core rule's 64-row block whose K is split
(`_starved`: 1.07-1.43x cuBLAS where the CUDA cores ran 0.62-0.87x, 2026-12-05). Before
all that, `swap` (auto: linears of 17 rows or more, past 128 with a full block of weight
rows, K of 256 or more, `auto_swaps`) runs the GEMM with its sides exchanged
(`wgmma_swapped.py`): 1.50-1.69x cuBLAS at the Llama-8B linears of 64 rows where the CUDA
cores ran 0.94-1.20x (H100, 2026-12-05, RESULTS.md twenty-ninth session run 7), 1.28-1.74x at
12 linears of 72-128 rows where the CUDA-core plans ran 0.67-1.08x (thirty-first session run
2), 0.93-1.73x at 32 linears of 129-4096 rows where the CUDA-core and plain 3xTF32 plans ran
0.66-1.48x (thirty-second session run 2; 4096³ 1.45 against 1.19): the swapped block splits
its weight fragments in registers, the plain one both operands' tiles in shared memory.
With an N-major B the transposing split costs most of the gain:
`x @ w` ran 1.07-1.10x cuBLAS against the CUDA-core rules' 0.96-1.01x (4096³, 4000×4096×1024,
a batch of 16 × 1024³; H200, 2026-12-04), so `auto` leaves N-major B to the CUDA-core rules
(and their stream-K and L2-prefetch plans) and `mma=3xtf32` asks for it. Under `auto` the rule
also steps aside for `streamk=on` or `tail`. `mma=none` keeps every f32 GEMM on CUDA-core FMA.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from xdsl.dialects.builtin import f32
from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop
from tinyopt.passes.tile.gemm.contraction_match import (
    Contraction,
    match_contraction,
    operand_types,
)
from tinyopt.passes.tile.gemm.contraction_plan import starved_row_block
from tinyopt.passes.tile.gemm.mma_sync import sums_products
from tinyopt.passes.tile.gemm.split_k import SPLIT_PARTIAL
from tinyopt.passes.tile.gemm.split_k_plan import (
    SPLIT_TF32_STEP_SECONDS,
    auto_wgmma_splits,
    swap_splits,
)
from tinyopt.passes.tile.gemm.wgmma import emit_wgmma_gemm
from tinyopt.passes.tile.gemm.skinny_plan import CUDA_CORE_BALANCE
from tinyopt.passes.tile.gemm.wgmma_plan import (
    fitted_ring,
    BK,
    SMALL_M,
    SWIZZLE,
    WgmmaTiles,
    choose_wgmma_tiles,
    plain_operands,
    wgmma_tile_refusal,
)
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.rule import Rule
from tinyopt.passes.tile.target import Target

SPLIT_STAGES = {128: 3, 64: 4}
"""Ring depth by block width: a slot and its small copy take 2·(bm + bn)·128 bytes (64 KiB at
128×128), so 3 fit beside the staging tiles at bn = 128 and 4 at bn = 64."""

WIDEST = 128
"""The widest block: a thread holds bn/2 f32 accumulators and as many for a step's products."""


SWAP_WIDTHS = (32, 64, 128)
"""The `swap` block's widths (A's rows a block takes): powers of two whose tile's 16-byte
chunks the producer warpgroup's 128 threads split evenly."""

SWAP_STAGES = 4
"""The `swap` ring's default depth (fewer where they do not fit): a slot of 128 B rows and
64 A rows with A's big and small tiles is 40 KiB."""


TMA_STORE_REFUSAL = "stores its f32 outputs direct or staged, not with TMA (store=tma)"


@dataclass(frozen=True)
class Wgmma3xTf32Tiles(WgmmaTiles):
    """The wgmma GEMM's tiling; each ring slot has a small copy (the ring takes twice the
    shared memory), or with `swap` big and small tiles of its A rows (B's rows are split in
    registers). With `swap` on, the block's consumer rows are bm of B's rows (a `[N, K]`
    weight), its columns bn of A's, and B's TF32 fragments are split in registers (A from
    registers in `wgmma`): the output tile is transposed in the accumulators."""

    @property
    def b_columns(self) -> int:
        """The B tile's rows counted in whole 64-row chunks, swapped or not (the measured
        plans' shared memory: a swapped bn of 32 takes the room of 64)."""
        return -(-self.bn // BK) * BK

    @property
    def shared_bytes(self) -> int:
        split = 2 * self.bn * SWIZZLE if self.swap == "on" else self.stage_bytes
        return super().shared_bytes + self.stages * split


def _fail(message: str) -> str:
    return f"mma=3xtf32 {message}"


class Wgmma3xTf32Rule(Rule[Contraction, Wgmma3xTf32Tiles]):
    """Schedules an f32 GEMM as three TF32 wgmma products per K step."""

    name = "wgmma_3xtf32"
    reads = "bm=0,64,128 bn=0,64,128 stages=0,2,3,4 store=auto,direct group=0,1,8,16 swap"
    plan_type = Wgmma3xTf32Tiles
    selector = ("mma", "3xtf32")

    def match(self, kernel: loop.KernelOp) -> Contraction | str:
        return match_contraction(kernel) or "not a contraction"

    def plan(self, kernel: loop.KernelOp, c: Contraction, knobs: Knobs) -> Wgmma3xTf32Tiles | str:
        batch, m, n, k = c.extents
        if (types := operand_types(c)) != ["f32"] or not sums_products(c):
            return _fail(
                f"applies to sums of products of f32 operands; kernel @{kernel.sym_name.data} "
                f"reads {' and '.join(types)} (f16/bf16 take mma=sync or mma=wgmma)"
            )
        if refusal := _operand_refusal(c):
            return refusal
        if knobs.mma == "auto" and knobs.streamk in ("on", "tail"):
            return _fail(
                f"steps aside for streamk={knobs.streamk} (a CUDA-core plan) under mma=auto"
            )
        if knobs.store == "tma":
            return _fail(TMA_STORE_REFUSAL)
        if knobs.bn > WIDEST:
            return _fail(
                f"takes bn up to {WIDEST} (a thread holds bn/2 accumulators and bn/2 products), "
                f"got bn={knobs.bn}"
            )
        # Not read: K steps are 32 f32 (128 bytes), blocks not persistent, a producer warpgroup.
        knobs = replace(knobs, bk=0, persistent=0, ws=1)
        if (swapped := self._swapped(kernel, c, knobs)) is not None:
            return swapped
        t = choose_wgmma_tiles(knobs, batch, m, n, self.target)
        if not isinstance(t, str) and t.bn > WIDEST:
            t = choose_wgmma_tiles(replace(knobs, bn=WIDEST), batch, m, n, self.target)
        if isinstance(t, str):
            return t.replace("mma=wgmma", "mma=3xtf32")
        blocks = batch * -(-m // t.bm) * -(-n // t.bn)
        small = blocks < self.target.sms or m <= SMALL_M
        if knobs.mma == "auto" and small and not self._starved(kernel, c, knobs, t):
            return _fail(
                f"is taken by mma=auto only for more than {SMALL_M} rows and grids of at least "
                f"one block per SM ({m} rows, {blocks} blocks of {t.bm}x{t.bn} on "
                f"{self.target.sms} SMs): 64x64 blocks, split K or not, ran 0.70-0.88x cuBLAS "
                "at 64 rows where the CUDA-core rules ran 0.85-0.98x (the 3xTF32 rate needs "
                "full waves of 128-row blocks), or for 33-64 rows the CUDA-core row block "
                "starves on with K split"
            )
        if knobs.mma == "auto" and transposed_bytes(c, t):
            return _fail(
                "is taken by mma=auto only for a K-major B ([b?, n, k]): with an N-major B "
                "the transposing split ran only 1.07-1.10x cuBLAS, where the CUDA-core rules "
                "keep their stream-K and prefetch plans"
            )
        stages = knobs.stages or SPLIT_STAGES.get(t.bn, 3)
        tiles = Wgmma3xTf32Tiles(t.bm, t.bn, stages, t.ws, t.store, 0, t.group, t.fastmath, t.dual)
        while not knobs.stages and tiles.stages > 2 and self._over(c, tiles):
            tiles = replace(tiles, stages=tiles.stages - 1)  # an N-major B's big tile
        return self.check(kernel, c, tiles) or tiles

    def _swapped(
        self, kernel: loop.KernelOp, c: Contraction, knobs: Knobs
    ) -> Wgmma3xTf32Tiles | str | None:
        """The `swap` plan where `swap` asks for it or `auto` takes it, or why `swap=on`
        cannot run; None for the plain plan. `auto` takes it for f32 linears of 17 rows or more
        with a `[N, K]` weight (`auto_swaps`): more FMAs per weight byte than CUDA cores keep
        up with (`skinny_plan.CUDA_CORE_BALANCE`, where the skinny rule stops)."""
        batch, m, n, k = c.extents
        operands = plain_operands(c, k, n)
        assert not isinstance(operands, str)
        partial = SPLIT_PARTIAL in kernel.attributes  # K is a chunk its split chose
        if knobs.swap == "off":
            return None
        if knobs.swap == "auto" and not auto_swaps(c, self.target, partial):
            return None
        if operands.b_mn_major:
            return _fail("swap=on needs B [N, K] (its rows are the product's A, K-major)")
        clashes = [
            f"{name}={value}"
            for name, value, clash in (
                ("store", knobs.store, knobs.store not in ("auto", "direct")),
                ("group", knobs.group, knobs.group not in (0, 1)),
            )
            if clash
        ]
        if clashes:  # auto: the plain plan, which takes them
            return (
                None
                if knobs.swap == "auto"
                else _fail(
                    "swap=on stores its outputs direct from registers in row order (store=direct "
                    f"group=1), not with {' '.join(clashes)}"
                )
            )
        bm = knobs.bm or (128 if n > 64 else 64)
        bn = knobs.bn or next((w for w in SWAP_WIDTHS if w >= m), SWAP_WIDTHS[-1])
        t = Wgmma3xTf32Tiles(
            bm, bn, knobs.stages or SWAP_STAGES, 1, "direct", 0, 1, "off", "off", swap="on"
        )
        if not knobs.stages:
            t = fitted_ring(t, self.target)
        return swap_refusal(t, self.target) or t

    def _starved(self, kernel: loop.KernelOp, c: Contraction, knobs: Knobs, t: WgmmaTiles) -> bool:
        """Whether `mma=auto` takes a small grid all the same: 33-64 rows too little work for
        the CUDA-core rule's row block (`starved_row_block`), K split over the blocks (the
        split's partial kernel, or a kernel `auto_wgmma_splits` will split). Measured on the
        H200 (2026-12-05, RESULTS.md twenty-fourth session, × cuBLAS, CUDA cores → 3xTF32
        split): 64×4096×1024 0.83 → 1.13, 36 and 48 rows alike, 40×2048×512 0.62 → 1.07,
        64×4096×512 0.76 → 1.43, 50×8192×1024 0.87 → 1.10, 64×1024×256 0.46 → 0.68; unsplit
        (K of 64, 128 or 1000) the 64×64 blocks lost: 1.05 → 0.81, 0.94 → 0.83, 0.73 → 0.37."""
        batch, m, n, k = c.extents
        # The rule (under auto) reads a K-major B, which the CUDA-core rule stages by registers;
        # not `resolve_copy`: in a split's partial kernel B's K index is offset by its chunk, so
        # `b_k_major` would not see it and the partial would fall to the CUDA cores.
        staged = replace(knobs, copy="ld") if knobs.copy == "auto" else knobs
        if not starved_row_block(staged, batch, m, n, k, self.target):
            return False
        if SPLIT_PARTIAL in kernel.attributes:
            return True
        if knobs.splitk:  # the planner splits as asked (1: never), where K holds two chunks
            return knobs.splitk > 1 and k >= 2 * knobs.splitk
        return auto_wgmma_splits(c, t.bm, t.tile_n, self.target, SPLIT_TF32_STEP_SECONDS) > 1

    def _over(self, c: Contraction, t: Wgmma3xTf32Tiles) -> str | None:
        """Why the tiles with an N-major B's big tile (`transposed_bytes`) do not fit."""
        need = t.shared_bytes + transposed_bytes(c, t)
        if need <= self.target.dynamic_shared:
            return None
        return _fail(
            f"with bm={t.bm} bn={t.bn} stages={t.stages} and an N-major B needs {need} bytes of "
            f"shared memory, more than the {self.target.dynamic_shared} a block may use"
        )

    def check(self, kernel: loop.KernelOp, c: Contraction, plan: Wgmma3xTf32Tiles) -> str | None:
        if plan.swap == "on":
            return _operand_refusal(c) or swap_refusal(plan, self.target)
        refusal = _operand_refusal(c) or wgmma_tile_refusal(plan, self.target)
        if refusal:
            return refusal.replace("mma=wgmma", "mma=3xtf32")
        if plan.store == "tma":
            return _fail(TMA_STORE_REFUSAL)
        if plan.persistent or plan.dual != "off" or not plan.ws or plan.bn > WIDEST:
            return _fail(
                f"does not run persistent blocks, dual GEMMs, without ws or bn over {WIDEST}"
            )
        return self._over(c, plan)

    def emit(
        self, kernel: loop.KernelOp, c: Contraction, t: Wgmma3xTf32Tiles, rewriter: PatternRewriter
    ) -> None:
        emit_wgmma_gemm(kernel, c, t, f32, self.target, rewriter, t.swap == "on")


SWAP_MIN_K = 256
"""The shortest K `swap=auto` takes (8 steps of 32): at K = 64 and 128 the swapped plan's
fixed costs lost to the CUDA cores (64×64×256 0.85 against 0.97x cuBLAS, 64×128×1024 0.88
against 1.01; H100, RESULTS.md twenty-ninth session run 3); from K = 432 on it won or tied."""


SWAP_FULL_ROWS = 128
"""The fewest output columns (B's rows) for which `swap=auto` takes more than 128 rows of A:
a full 128-row block of B. Measured (H100, RESULTS.md thirty-second session run 2) at N of
1000, 4096 and 14336 with 129-4096 rows: the swapped plan 0.93-1.73x cuBLAS (every shape at
or above 1.01 but one), the default before it (CUDA cores to 1000 rows or so, the plain 3xTF32
tiles past) 0.66-1.48x, slower on all 32 shapes."""

SWAP_MIN_FILL = 2
"""Past 128 rows, `swap=auto` takes a grid of 128×128 blocks that holds at least 1 / this of
the SMs, or one its split fills: on 30 random f32 linears of 132-3812 rows (H100, RESULTS.md
thirty-third session run 1) the swapped plan lost to the other rules on the four grids of 6,
35, 36 and 45 blocks that K was too short to split (0.46-0.92x cuBLAS against 0.76-1.35x) and
won or tied on the 26 others, of 60 blocks or more or split (28 and 32 blocks split: 1.16x and
1.46x as fast); of those, 493×1822×768 on 60 blocks (0.90 against 0.78) falls below. Checked
on 28 fresh random shapes of 154-1459 rows (run 2): where the condition declines the swap, the
swapped plan would have run 0.50-0.90x against the default's 0.80-0.95x on its 10 shapes (two
ties); where it takes it (16), 0.73-2.45x against `swap=off`'s 0.53-2.02x, none slower."""


def auto_swaps(c: Contraction, target: Target, partial: bool = False) -> bool:
    """Whether `swap=auto` takes contraction `c`: more rows than the CUDA cores' FMAs per f32
    weight byte keep up with (`CUDA_CORE_BALANCE`, 17 and up), up to 128 (the widest swapped
    block, `SWAP_WIDTHS`) or past it with `SWAP_FULL_ROWS` columns or more and a grid that
    fills the SMs (`SWAP_MIN_FILL`), a K-major B, K of `SWAP_MIN_K` or more (but in a split's
    `partial` kernel, whose K is one chunk its split chose)."""
    batch, m, n, k = c.extents
    operands = plain_operands(c, k, n)
    if isinstance(operands, str) or operands.b_mn_major or (k < SWAP_MIN_K and not partial):
        return False
    if 2 * m / 4 <= CUDA_CORE_BALANCE:
        return False
    if m <= SWAP_WIDTHS[-1] or partial:
        return True
    widest = SWAP_WIDTHS[-1]
    blocks = batch * -(-n // widest) * -(-m // widest)
    filled = SWAP_MIN_FILL * blocks >= target.sms or swap_splits(c, widest, widest, target) > 1
    return n >= SWAP_FULL_ROWS and filled


def swap_refusal(t: Wgmma3xTf32Tiles, target: Target) -> str | None:
    """Why the `swap` tiling cannot run, or None."""
    if t.bm not in (64, 128) or t.bn not in SWAP_WIDTHS:
        return _fail(
            f"with swap takes bm = 64 or 128 rows of B and bn = {', '.join(map(str, SWAP_WIDTHS))}"
            f" rows of A, got bm={t.bm} bn={t.bn}"
        )
    if not 2 <= t.stages <= 4:
        return _fail(f"takes stages in [2, 4], got {t.stages}")
    if t.shared_bytes > target.dynamic_shared:
        return _fail(
            f"with swap bm={t.bm} bn={t.bn} stages={t.stages} needs {t.shared_bytes} bytes of "
            f"shared memory, more than the {target.dynamic_shared} a block may use"
        )
    return None


def _operand_refusal(c: Contraction) -> str | None:
    """Why the operands are not plain loads TMA can copy (`plain_operands`), or None."""
    _, _, n, k = c.extents
    operands = plain_operands(c, k, n)
    if isinstance(operands, str):
        return operands.replace("mma=wgmma", "mma=3xtf32")
    return None


def transposed_bytes(c: Contraction, t: Wgmma3xTf32Tiles) -> int:
    """Shared memory of an N-major B's K-major big tiles (the split writes them transposed;
    a K-major B's are split in place): `stages` tiles of bn rows of 128 bytes, else 0."""
    _, _, n, k = c.extents
    operands = plain_operands(c, k, n)
    mn_major = not isinstance(operands, str) and operands.b_mn_major
    return t.stages * t.bn * SWIZZLE if mn_major else 0
