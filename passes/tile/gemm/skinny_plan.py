"""The skinny-GEMM rule's plan (`SkinnyPlan`) and the heuristics that choose it from the shape:
whether the kernel is bandwidth-bound, the vector width, the rows and columns each thread
accumulates, and the split over K that gives the SMs enough independent warps."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import memref
from xdsl.ir import Operation

from tinyopt.passes.tile.emit import depends_on, element_bytes, vector_width
from tinyopt.passes.tile.gemm.skinny_match import SkinnyContraction

CUDA_CORE_BALANCE = 8
"""The most FMA FLOPs per weight byte (2·M / element bytes) for which streaming the weights
through CUDA cores wins: the H200's peak is 16 (67 TFLOP/s over the 4.2 TB/s copy ceiling), but
measured (run 2 of 2026-12-03, `bench_gemv.py`, RESULTS.md) the rule kept up with the HBM to 8
(f32 M = 16: 1.00-2.38x cuBLAS but for the down projection's 0.78; bf16 M = 8: 0.57-0.88x, ahead
of wgmma's 0.45-0.75x) and fell behind past it (bf16 M = 16: 0.33-0.67x, below wgmma's
0.47-0.76x; f32 M = 64: 0.28-0.58x, below the FP32 contraction's 0.61-0.83x)."""

RESIDENT_WARPS = 16
"""Warps per SM the registers are allocated for (`__launch_bounds__` minimum blocks: 128
registers a thread)."""

FILL_WARPS = 8
"""Independent warps per SM below which the rule splits K: a warp has 8 16-byte loads a lane in
flight (4 KiB), so 8 warps keep 32 KiB in flight per SM, the HBM's latency-bandwidth product
(4.2 TB/s · ~1 µs over 132 SMs)."""

MAX_SPLITS = 64
"""The most K chunks a split makes (each a partial sum in the fold's workspace)."""

SPLIT_BYTES = 8 << 20
"""The fewest weight bytes worth a split: it adds a kernel (a launch and a tail, ~2 µs), in
which the HBM streams about 8 MiB at the copy ceiling."""

THREADS = 256
"""Threads per block: 8 warps sharing A's rows through L1 (more output columns per block, fewer
reads of A from L2)."""

SUM_THREADS = 128
"""Threads per block for `[K, N]` weights, whose warps split K: four warps' partial sums of
`ACCUMULATORS` each take 32 KiB of shared memory."""

LOADS_IN_FLIGHT = 8
"""16-byte weight vectors each lane loads per K-loop iteration (columns × unroll)."""

COLUMNS = 2
"""Output columns a warp accumulates over `[N, K]` weights by default (`choose_shape`)."""

ACCUMULATORS = 64
"""The most f32 accumulators a thread holds (rows × columns × vector lanes along N)."""

MOST_ROWS = 32
"""The most rows a plan takes (the `rows` knob's domain, knobs.py): at 64 rows of `[K, N]`
weights with one vector lane, `skinny=on` had planned 64, which `tile` then refused."""


@dataclass(frozen=True)
class SkinnyPlan:
    """Every knob of the skinny rule, resolved."""

    threads: int
    """Threads per block."""
    vec: int
    """Elements per vector access of the weights: along K for a `[N, K]` weight, along N for
    `[K, N]`."""
    rows: int
    """Output rows each thread accumulates: M is covered in chunks of `rows` by blocks that
    read the same weights one after another (the chunk index varies fastest)."""
    cols: int
    """Output columns per warp (`[N, K]`: lanes split K, shuffles sum), or column vectors per
    thread (`[K, N]`: warps split K, summed once through shared memory at the end)."""
    unroll: int
    """Weight vectors each thread loads per column in one K-loop iteration, all in flight."""
    splits: int
    """K chunks over blocks; more than 1 only while planning: the rule then puts a partial-sum
    kernel (split 1) and a fold in the kernel's place (`skinny_split.py`)."""
    evict: str = "off"
    """The sides whose 128-bit loads carry the L2 evict-first hint (`evicted_sides`)."""

    @property
    def warps(self) -> int:
        return self.threads // 32


CONSECUTIVE_READERS = 16
"""The most blocks, launched one after another, whose reads of the same weights `evict=auto`
hints (a skinny GEMM's chunks of M rows): they run at about the same time, as the wgmma rule's
group of block rows does (benchmarks/RESULTS.md, 2026-12-04, nineteenth session run 5)."""


def side_loads(side: list[Operation]) -> frozenset[memref.LoadOp]:
    """The loads of an operand side's ops (nested ones too)."""
    return frozenset(o for op in side for o in op.walk() if isinstance(o, memref.LoadOp))


def evicted_sides(knob: str, c: SkinnyContraction, readers: int) -> str:
    """The `evict` knob resolved for a skinny GEMM: the sides whose 128-bit loads carry the L2
    evict-first hint ("a": the activations, "b": the weights, "ab", "off"). auto: the weights,
    which the blocks of one group of columns alone read, where those are at most
    CONSECUTIVE_READERS consecutive blocks (`readers`: the chunks of M rows) and, under a
    batch, the weights are the batch entry's own (shared ones are read again by each entry's
    blocks, far apart). Measured on the H200 (benchmarks/RESULTS.md, 2026-12-04, nineteenth
    session run 9): the bf16 8-row decode linears 0.96-1.00x cuBLAS without it."""
    if knob not in ("auto", "once"):
        return knob
    if readers > CONSECUTIVE_READERS:
        return "off"
    if c.batch_iv is not None and c.extents[0] > 1:
        per_entry = depends_on(c.b_side, [c.batch_iv])
        if not all(any(i in per_entry for i in op.indices) for op in side_loads(c.b_side)):
            return "off"
    return "b"


def evicted_loads(c: SkinnyContraction, sides: str) -> frozenset[memref.LoadOp]:
    """The loads of the sides `sides` names ("a", "b", "ab" or "off")."""
    return (side_loads(c.a_side) if "a" in sides else frozenset()) | (
        side_loads(c.b_side) if "b" in sides else frozenset()
    )


WEIGHT_SHARE = 4
"""The fewest output columns per output row (N / M) `skinny=auto` asks for: the weights (N × K)
are then at least four times A (M × K), the bytes worth streaming once; a smaller N is a small
GEMM whose block tiles reuse both operands."""


def auto_refusal(c: SkinnyContraction) -> str | None:
    """Why `skinny=auto` leaves the kernel to the other rules, or None: one output row of
    `[N, K]` weights (the row-reduction rule's one-block-per-output GEMV was as fast or faster:
    f32 10.0-64.7 µs against 12.8-67.1, bf16 7.6-42.0 against 10.3-38.7, run 2 of 2026-12-03);
    weights that are not the bulk of its bytes (N < `WEIGHT_SHARE` · M); or 2·M FLOPs per weight
    element over the element's bytes past `CUDA_CORE_BALANCE` (M > 16 in f32, M > 8 in
    f16/bf16): bound by FMAs on CUDA cores."""
    batch, m, n, _ = c.extents
    if m == 1 and batch == 1 and c.k_contiguous:
        return (
            "one row of [N, K] weights: the row-reduction rule streams them as fast "
            "(skinny=on forces it)"
        )
    if n < WEIGHT_SHARE * m:
        return (
            f"N = {n} columns for M = {m} rows: the weights are not {WEIGHT_SHARE}x the rows' "
            "bytes (skinny=on forces it)"
        )
    size = element_bytes(_weight_element(c))
    intensity = 2 * m / size
    if intensity > CUDA_CORE_BALANCE:
        return (
            f"M = {m} rows of {size}-byte weights do {intensity:g} FLOPs per weight byte, more "
            f"than the {CUDA_CORE_BALANCE} the rule keeps up with: bound by FMAs, left to the "
            "other rules (skinny=on forces it)"
        )
    return None


def _weight_element(c: SkinnyContraction):
    loads = [o for op in c.b_side for o in op.walk() if isinstance(o, memref.LoadOp)]
    return max((load.memref.type.element_type for load in loads), key=element_bytes)  # type: ignore[attr-defined]


def weight_vector(c: SkinnyContraction, wanted: int) -> int:
    """The widest vector (≤ `wanted` elements, ≤ 16 bytes) every contiguous access along the
    weights' inner axis allows: K for `[N, K]` (A's reads too), N for `[K, N]`."""
    batch, m, n, k = c.extents
    if c.k_contiguous:
        return vector_width(c.reduce.body.block.ops, c.k_iv, k, wanted)
    return vector_width(c.b_side, c.n_iv, n, wanted)


def pow2_at_least(v: int) -> int:
    return 1 << (v - 1).bit_length()


def choose_shape(
    c: SkinnyContraction, threads: int, vec: int, rows: int, cols: int = 0
) -> tuple[int, int, int]:
    """(rows, cols, unroll): rows up to 16 (fewer where M is smaller, or for `[K, N]` the
    vector lanes leave fewer accumulators). Over `[N, K]` weights a warp accumulates `cols`
    columns (the knob) with `LOADS_IN_FLIGHT` weight vectors a lane in flight; by default two
    for 16-bit weights or one or two rows: each lane's A vectors, read through L1, then serve
    two weight rows (measured on the H200, RESULTS.md seventh session run 3: bf16 M = 8 went
    from 0.56-0.87x cuBLAS to 0.71-0.93x; four columns were no better). f32 weights with more
    rows keep one column, unrolled by four (by two at 16 rows): two columns of f32 A vectors
    spill past 128 registers at 8 and 16 rows (NVRTC, sm_90a)."""
    _, m, _, _ = c.extents
    if c.k_contiguous:
        rows = rows or min(pow2_at_least(m), 16)
        narrow = element_bytes(_weight_element(c)) <= 2
        cols = cols or (COLUMNS if narrow or rows <= 2 else 1)
        if cols > 1 or rows <= 2:
            return rows, cols, max(1, LOADS_IN_FLIGHT // cols)
        return rows, cols, 4 if rows < 16 else 2
    rows = rows or min(pow2_at_least(m), max(1, ACCUMULATORS // vec), MOST_ROWS)
    return rows, cols or 1, 4


def default_threads(c: SkinnyContraction) -> int:
    """`THREADS`, or for `[K, N]` weights `SUM_THREADS`: the warps' sums of up to
    `ACCUMULATORS` each then fit the 48 KiB of static shared memory."""
    return THREADS if c.k_contiguous else SUM_THREADS


def units(c: SkinnyContraction, plan: SkinnyPlan) -> int:
    """Independent warps of the grid: blocks × warps (each streams its own weights)."""
    return blocks(c, plan) * plan.warps


def blocks(c: SkinnyContraction, plan: SkinnyPlan) -> int:
    """Blocks of the launch: M chunks × column groups × batch."""
    batch, m, n, _ = c.extents
    return -(-m // plan.rows) * column_groups(c, plan) * batch


def column_groups(c: SkinnyContraction, plan: SkinnyPlan) -> int:
    """Output column groups, one block each: `cols` columns per warp along K, or `cols`
    vectors of `vec` per lane (all warps on the same columns) along N."""
    _, _, n, _ = c.extents
    per_block = plan.cols * plan.warps if c.k_contiguous else 32 * plan.vec * plan.cols
    return -(-n // per_block)


def choose_splits(c: SkinnyContraction, plan: SkinnyPlan, sms: int) -> int:
    """The fewest K chunks (a power of two) that give `FILL_WARPS` warps per SM, where each
    chunk keeps whole vectors (K divides evenly, in multiples of `vec` along K) and at least
    one full unrolled iteration per warp; 1 where the grid has them already or the weights are
    fewer than `SPLIT_BYTES`."""
    batch, _, n, k = c.extents
    if batch * n * k * element_bytes(_weight_element(c)) < SPLIT_BYTES:
        return 1
    step = 32 * plan.vec * plan.unroll if c.k_contiguous else plan.warps * plan.unroll
    quantum = plan.vec if c.k_contiguous else 1
    splits = 1
    while units(c, plan) * splits < FILL_WARPS * sms and splits < MAX_SPLITS:
        more = 2 * splits
        if k % (more * quantum) or k // more < step:
            break
        splits = more
    return splits


def shape_refusal(c: SkinnyContraction, plan: SkinnyPlan) -> str | None:
    """Why a plan cannot run the kernel, or None."""
    if plan.threads % 32 or not 32 <= plan.threads <= 1024:
        return f"threads={plan.threads} must be whole warps, 32 to 1024"
    if plan.vec < 1 or plan.vec & (plan.vec - 1) or weight_vector(c, plan.vec) != plan.vec:
        return f"vec={plan.vec}: the weights' accesses allow {weight_vector(c, 16)} at most"
    if plan.cols < 1 or plan.unroll < 1 or plan.rows < 1:
        return "rows, cols and unroll must be positive"
    accumulators = plan.rows * plan.cols * (1 if c.k_contiguous else plan.vec)
    if accumulators > ACCUMULATORS:
        return (
            f"rows={plan.rows} cols={plan.cols} vec={plan.vec} need {accumulators} accumulators "
            f"a thread, more than {ACCUMULATORS}"
        )
    if not c.k_contiguous and plan.warps * accumulators * 32 * 4 > 48 * 1024:
        return f"the cross-warp sum of {plan.warps} warps needs more than 48 KiB of shared memory"
    return None
