"""The plan of the tensor-core skinny rule (`SkinnyMmaPlan`, passes/tile/gemm/skinny_mma.py)
and the heuristics that choose it from the shape: when `skinny_mma=auto` takes a kernel, the
16-row weight strips each warp owns, the K chunks in flight, and the split over K that weighs
the weight bytes in flight on every SM against the partial sums' traffic."""

from __future__ import annotations

from dataclasses import dataclass, replace

from xdsl.dialects import memref
from xdsl.dialects.builtin import BFloat16Type, Float16Type

from tinyopt.passes.tile.emit import element_bytes, vector_width
from tinyopt.passes.tile.gemm.skinny_match import SkinnyContraction
from tinyopt.passes.tile.gemm.skinny_plan import MAX_SPLITS, SPLIT_BYTES, WEIGHT_SHARE

STRIP = 16
"""Weight rows (output columns) of one `mma.sync` m16n8k16: its M side."""

ROW_TILE = 8
"""Activation rows (output rows) of one `mma.sync`: its N side; M is padded to a multiple."""

CHUNK = 32
"""K elements one lane-quad row covers per step: each lane loads 8 consecutive weights of its
row (16 bytes), which feed two m16n8k16 products (K is permuted inside the chunk, the same way
for both operands, so the sum is unchanged)."""

THREADS = 512
"""Threads per block up to `AUTO_ROW_TILES` row tiles: sixteen warps, over column strips and
along K (`kwarps`), reading the same activation vectors through L1 (measured ahead of 128 and
256, RESULTS.md tenth session)."""

STAGES = 2
"""Default `stages` up to `AUTO_ROW_TILES` row tiles: each iteration loads the next one's
registers before its products (`stages=1` measured 0.52-0.85x cuBLAS at M = 4-16 where 2 gave
0.85-1.05x)."""

MANY_ROWS_THREADS, MANY_ROWS_STAGES = 128, 1
"""The defaults past `AUTO_ROW_TILES` (only `skinny_mma=on` takes those kernels): the carried
activations of more row tiles would not fit 512 threads' registers."""

AUTO_ROW_TILES = 2
"""The most 8-row activation tiles `skinny_mma=auto` takes (M ≤ 16)."""

SUM_BYTES = 48 << 10
"""Shared memory the warps splitting K may take to sum their accumulators (a block's static
limit)."""

CHUNKS_IN_FLIGHT = 8
"""Strips × K chunks × stages whose weight loads a warp has issued before its products: 8 KiB
of weights a warp (`unroll` = 8 / (strips · stages))."""


@dataclass(frozen=True)
class SkinnyMmaPlan:
    """Every knob of the tensor-core skinny rule, resolved."""

    threads: int
    """Threads per block (whole warps)."""
    vec: int
    """Weight elements per global load along K (8: 16 bytes); a lane loads 8 per chunk."""
    strips: int
    """16-row weight strips (output columns) each warp owns; the activation fragments of a K
    chunk are shared by them."""
    unroll: int
    """32-wide K chunks per loop iteration, every weight load of them in flight together."""
    splits: int
    """K chunks over blocks; more than 1 only while planning: the rule then puts a partial-sum
    kernel and a fold in the kernel's place (`skinny_split.py`)."""
    kwarps: int = 1
    """Warps of a block that split its K loop (each takes every `kwarps`-th iteration), their
    accumulators summed once through shared memory at the end; the block's other factor,
    `warps / kwarps`, spreads over strips of columns."""
    stages: int = 1
    """1: an iteration's loads, then its products; 2: each iteration first loads the registers
    of the warp's next one (weights and activations, carried by the loop), then runs the
    products of those the previous iteration loaded."""
    evict: str = "off"
    """The sides whose 128-bit loads carry the L2 evict-first hint (`evicted_sides`)."""

    @property
    def warps(self) -> int:
        return self.threads // 32

    @property
    def column_warps(self) -> int:
        """Warps of a block over distinct columns (the same K iterations)."""
        return self.warps // self.kwarps


def tensor_core_element(c: SkinnyContraction):
    """f16 or bf16 where every load of both operand sides reads that one type, else None."""
    loads = [o for op in (*c.a_side, *c.b_side) for o in op.walk() if isinstance(o, memref.LoadOp)]
    types = {load.memref.type.element_type for load in loads}  # type: ignore[attr-defined]
    if len(types) != 1 or not isinstance(element := types.pop(), Float16Type | BFloat16Type):
        return None
    return element


def auto_refusal(c: SkinnyContraction) -> str | None:
    """Why `skinny_mma=auto` leaves a kernel to the other rules, or None. Measured on the H200
    (2026-12-03, `bench_gemv.py --m 4,8,16 --dtype bf16`, RESULTS.md tenth session) with the
    auto plan (512 threads, `kwarps` by the grid, `stages=2`): 0.91-1.05x cuBLAS at M = 4, 8
    and 16 on the Llama-3-8B decode linears, ahead of the CUDA-core skinny rule (0.72-0.93x at
    M = 8) and wgmma (0.69-0.99x at M = 16) on most; one row is the GEMV rules', and past two
    8-row tiles the carried activations crowd the registers (not measured: wgmma keeps them);
    where the weights are not the bulk of the bytes, a small GEMM's rules."""
    _, m, n, _ = c.extents
    if m < 2:
        return "one row: the GEMV rules' (row reduction, skinny)"
    if n < WEIGHT_SHARE * m:
        return (
            f"N = {n} columns for M = {m} rows: the weights are not {WEIGHT_SHARE}x the rows' "
            "bytes (skinny_mma=on forces it)"
        )
    if row_tiles(m) > AUTO_ROW_TILES:
        return f"M = {m} > {AUTO_ROW_TILES * ROW_TILE}: left to wgmma (measured at M <= 16 only)"
    return None


def default_threads_and_stages(m: int) -> tuple[int, int]:
    """`threads` and `stages` where the knobs leave them to the rule."""
    if row_tiles(m) <= AUTO_ROW_TILES:
        return THREADS, STAGES
    return MANY_ROWS_THREADS, MANY_ROWS_STAGES


def choose_kwarps(c: SkinnyContraction, plan: SkinnyMmaPlan, sms: int) -> int:
    """The most warps of `plan`'s block along K (a power of two dividing its warps, at most one
    per whole K iteration, their sums within `SUM_BYTES`) whose grid still fits one block per
    SM; 1 where none does. Fewer blocks than SMs at the top (q/o and down at M = 8: 128 blocks
    of 16 warps splitting K 16 ways) measured 1.00-1.03x cuBLAS against 0.95-0.98x at 8 ways
    (RESULTS.md, tenth session); gate/up's 14336 columns at 16 ways make 3.4 waves of blocks
    (0.91x)."""
    _, m, _, k = c.extents
    iterations = k // (CHUNK * plan.unroll)
    best = 1
    kwarps = 2
    while kwarps <= min(plan.warps, iterations):
        candidate = replace(plan, kwarps=kwarps)
        if blocks(c, candidate) > sms or sum_bytes(m, candidate) > SUM_BYTES:
            break
        best = kwarps
        kwarps *= 2
    return best


def weight_vector(c: SkinnyContraction, wanted: int) -> int:
    """The widest vector (≤ `wanted`, ≤ 8 elements: 16 bytes) every access along K allows."""
    _, _, _, k = c.extents
    return vector_width(c.reduce.body.block.ops, c.k_iv, k, min(wanted, 8))


def choose_strips(c: SkinnyContraction) -> int:
    """Two strips a warp where the activations take one or two row tiles (their fragments then
    serve twice the weights), one where more accumulators would crowd the registers."""
    _, m, _, _ = c.extents
    return 2 if row_tiles(m) <= 2 else 1


def row_tiles(m: int) -> int:
    """8-row activation tiles covering M."""
    return -(-m // ROW_TILE)


def column_groups(c: SkinnyContraction, plan: SkinnyMmaPlan) -> int:
    """Blocks along N: each covers warps × strips × 16 output columns."""
    _, _, n, _ = c.extents
    return -(-n // (plan.column_warps * plan.strips * STRIP))


def blocks(c: SkinnyContraction, plan: SkinnyMmaPlan) -> int:
    batch, _, _, _ = c.extents
    return batch * column_groups(c, plan)


def choose_splits(c: SkinnyContraction, plan: SkinnyMmaPlan, sms: int) -> int:
    """The K chunks over blocks: the largest power of two (each chunk keeping 16-byte alignment
    and a whole iteration) whose grid still fits one block per SM, where the unsplit grid
    leaves at least half the SMs idle; 1 for weights under `SPLIT_BYTES` (the fold's launch
    would cost more than the SMs gain). Measured (RESULTS.md, tenth session runs 3 and 5): the
    8B k/v weights at M = 16, 32 blocks, 0.86x cuBLAS unsplit, 0.79 split 2, 0.94 split 4;
    grids of 112-128 blocks ran as fast or faster unsplit than split 2 or 4."""
    batch, _, n, k = c.extents
    weight_bytes = batch * n * k * element_bytes(tensor_core_element(c))
    grid = blocks(c, plan)
    if weight_bytes < SPLIT_BYTES or 2 * grid > sms:
        return 1
    splits = 1
    while splits < MAX_SPLITS and 2 * splits * grid <= sms:
        more = 2 * splits
        if k % (more * 8) or k // more < CHUNK * plan.unroll:
            break
        splits = more
    return splits


def shape_refusal(c: SkinnyContraction, plan: SkinnyMmaPlan) -> str | None:
    """Why a plan cannot run the kernel, or None."""
    if plan.threads % 32 or not 32 <= plan.threads <= 1024:
        return f"threads={plan.threads} must be whole warps, 32 to 1024"
    if plan.vec not in (1, 2, 4, 8) or weight_vector(c, plan.vec) != plan.vec:
        return f"vec={plan.vec}: the accesses along K allow {weight_vector(c, 8)} at most"
    if plan.strips < 1 or plan.unroll < 1:
        return "strips and unroll must be positive"
    if plan.stages not in (1, 2):
        return f"skinny_mma stages its K loop once or twice (stages 1 or 2), got {plan.stages}"
    if plan.kwarps < 1 or plan.warps % plan.kwarps:
        return f"kwarps={plan.kwarps} must divide the block's {plan.warps} warps"
    _, m, _, _ = c.extents
    accumulators = plan.strips * row_tiles(m) * 4
    if accumulators > 64:
        return (
            f"strips={plan.strips} at M = {m} need {accumulators} accumulators a lane, more than 64"
        )
    if sum_bytes(m, plan) > SUM_BYTES:
        return (
            f"kwarps={plan.kwarps}: summing {plan.warps} warps' accumulators takes "
            f"{sum_bytes(m, plan)} bytes of shared memory, more than {SUM_BYTES}"
        )
    return None


def sum_bytes(m: int, plan: SkinnyMmaPlan) -> int:
    """Shared memory for the accumulators of every K warp but the first (0 for kwarps=1)."""
    per_warp = plan.strips * row_tiles(m) * 4 * 32 * 4
    return (plan.kwarps - 1) * plan.column_warps * per_warp
