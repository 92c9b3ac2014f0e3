"""The wgmma GEMM's plan: its tiling (`WgmmaTiles`, every knob of the rule resolved), the
operands TMA copies, and the choices made from the shape (rule and emitter: wgmma.py)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TypeVar

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import FloatAttr, IndexType, MemRefType, bf16, f16
from xdsl.ir import Attribute, Operation, SSAValue

from tinyopt.dialects import tile
from tinyopt.dialects.graph import FP8_SCALE_BLOCK as SCALE_BLOCK
from tinyopt.passes.tile.emit import index_constant
from tinyopt.passes.tile.gemm.block_scales import split_block_scale
from tinyopt.passes.tile.gemm.contraction_match import Contraction
from tinyopt.passes.tile.target import Target
from tinyopt.passes.tile.knobs import WGMMA_DEEPEST_STAGES, Knobs
from tinyopt.passes.tile.gemm.paired import PairedContraction

WARPGROUP = 128
BK = 64
"""K step: one 128-byte swizzle row of 16-bit elements."""

SWIZZLE = 128
ATOM = 1024
"""Bytes of one 128B-swizzle atom (8 rows of 128 bytes): the descriptors' 8-row stride."""


def k_step(element: Attribute) -> int:
    """Elements of `element` per K step: one 128-byte swizzle row (`BK` = 64 of 16 bits, 32 f32)."""
    return SWIZZLE // (element.bitwidth // 8)  # type: ignore[attr-defined]


STAGE_COLUMNS = 64
"""Accumulator columns a consumer warpgroup stages at a time with `store=smem` (16 KiB per
warpgroup, beside the ring: the other warpgroup's wgmmas may still read the B slots)."""

MAX_STAGES = 6
"""The ring depth of blocks that may share an SM (6 slots of 128×128 fit beside the staging
tiles)."""

GROUP = 16
"""Default `group` (measured 2026-11-29: benchmarks/RESULTS.md, "Run 4 (408d6b1): the `group`
launch order for wgmma GEMMs")."""

PRODUCER_REGISTERS, CONSUMER_REGISTERS = 40, 232
"""`setmaxnreg` budgets: 128·(40 + 2·232) = 64512 of the SM's 65536 registers."""

TALL_REGISTERS = 24, 160
"""The budgets of a 192-row block's producer and three consumers: 128·(24 + 3·160) = 64512."""

TALL = 192
"""The rows of a block of three consumer warpgroups (`tall` in `choose_wgmma_tiles`)."""

TALL_STAGES = 3
"""The ring depth of 192×192 blocks: 3 slots of 48 KiB fit beside the staging tiles of
`store=smem` (4 only with `store=direct`, 3000³ 124.7 µs against 110.0 on an H100)."""


def registers(consumers: int) -> tuple[int, int]:
    """The producer's and each consumer's `setmaxnreg` budget for `consumers` warpgroups."""
    return TALL_REGISTERS if consumers == 3 else (PRODUCER_REGISTERS, CONSUMER_REGISTERS)


@dataclass(frozen=True)
class ScaleOperand:
    """An operand's f32 block scales (`block_scales.BlockScale`) in kernel argument `arg`."""

    arg: int
    kinds: tuple[str, ...]


@dataclass(frozen=True)
class Operands:
    """The global buffers of A and B (kernel argument positions) and B's orientation; a dual
    GEMM's second B has B's orientation."""

    a: int
    b: int
    b_mn_major: bool
    second_b: int | None = None
    splits: int = 1
    """A split-K partial kernel's K chunks (`split_k.py`): its batch index is b·splits + s, and
    it reads K at s·chunk + k and the operands' batch (if they have one) at b."""
    chunk: int = 0
    a_scale: ScaleOperand | None = None
    """A's FP8 block scales (`block_scales.py`), applied per K step."""
    b_scale: ScaleOperand | None = None

    @property
    def bs(self) -> list[int]:
        """The B operands: one, or a dual GEMM's two (the first product's first)."""
        return [self.b] if self.second_b is None else [self.b, self.second_b]


@dataclass(frozen=True)
class WgmmaTiles:
    """Block tile (bm × bn, K step 64), ring depth, warp specialization and the other knobs
    of the rule (docs/knobs.md), resolved."""

    bm: int
    bn: int
    stages: int
    ws: int
    store: str = "direct"
    persistent: int = 0
    group: int = 1
    fastmath: str = "off"
    dual: str = "off"
    """on: a dual GEMM, accumulator columns bn/2..bn holding the second product."""
    promote: str = "off"
    """on: each K step's products (8-bit floats) summed in registers of their own, then added
    to the f32 accumulators on the CUDA cores (`PROMOTED_WIDEST`)."""
    streamk: str = "off"
    """tail: the persistent blocks share the last waves' K steps (`wgmma_stream_k.py`)."""
    evict: str = "off"
    """The operands whose TMA loads carry an L2 evict-first hint: "a", "b", "ab" or "off"
    (`evicted_operands`)."""
    cluster: int = 1
    """K cut into this many chunks, one a block of a thread-block cluster, the partial sums
    added through the cluster's shared memory before the epilogue (`wgmma_cluster.py`;
    `splitk_mode=cluster`); 1: each block runs all of K."""
    multicast: str = "off"
    """b: each B tile multicast to the two blocks of a thread-block cluster (two rows of
    tiles), each block copying its share; a: each A tile to two blocks of two columns of tiles
    (`wgmma_multicast.py`); b4 and a4: the same over four blocks; off: each block its own."""
    l2promo: int = 0
    """The L2 promotion of the operands' tensor maps in bytes (`tile.L2_PROMOTIONS`; 0: none):
    a TMA copy's L2 misses are filled in aligned pieces of this size (`l2_promotion`)."""
    poverlap: str = "off"
    """on (with promote on): the K steps' products alternate between two sets of registers,
    and each step's wgmmas are issued before the last step's products are added, so the
    tensor cores run a step while the CUDA cores add (`OVERLAPPED_WIDEST`); off: a step is
    issued once the last one's products are added."""
    pturns: str = "off"
    """on (with promote on, two consumer warpgroups): the consumer warpgroups take turns to
    issue their K steps' wgmmas (a named barrier each), so that the tensor cores run one's
    step while the other adds its products; off: both issue each step as soon as its slot
    is full, and wait and add in step with each other."""
    pscales: str = "step"
    """How the K loop reads FP8 block scales: step: each step those of the step two ahead;
    pair: the first step of each pair of steps computes both steps' factors, then reads the
    next pair's scales, so that no wait for scales includes loads issued a step before."""
    swap: str = "off"
    """on: the GEMM with its sides exchanged, Yᵀ = B·Aᵀ: a block's consumer rows are bm of
    B's N, its columns bn of A's M, and the output tile lies transposed in the accumulators
    (`wgmma_swap.py`; the 3xTF32 rule's `swap`, `wgmma_3xtf32.py`)."""

    @property
    def halves(self) -> int:
        """The parts each promoted K step's products are issued and added in (`PROMOTED_HALVES`)."""
        return 2 if self.promote == "on" and self.bn == PROMOTED_HALVES else 1

    @property
    def tile_n(self) -> int:
        """Output columns per block."""
        return self.bn // 2 if self.dual == "on" else self.bn

    @property
    def sharers(self) -> int:
        """Blocks that share each tile of the multicast operand: 2 with `multicast` a or b, 4
        with a4 or b4, else 1."""
        return 1 if self.multicast == "off" else int(self.multicast[1:] or 2)

    @property
    def cluster_rows(self) -> int:
        """Rows of tiles a cluster spans: `sharers` where B is multicast (`multicast` b or
        b4), else 1."""
        return self.sharers if self.multicast.startswith("b") else 1

    @property
    def cluster_columns(self) -> int:
        """Columns of tiles a cluster spans: `sharers` where A is multicast (a or a4)."""
        return self.sharers if self.multicast.startswith("a") else 1

    @property
    def consumers(self) -> int:
        return self.bm // tile.WGMMA_M

    @property
    def threads(self) -> int:
        return WARPGROUP * (self.consumers + self.ws)

    @property
    def b_columns(self) -> int:
        """The B tile's columns in a ring slot: bn, in whole 64-column chunks (an N-major B's
        128-byte swizzle rows; a block of a width off them reads the last chunk whole); with
        `swap`, bn rows of A, K-major."""
        if self.swap == "on":
            return self.bn
        return -(-self.bn // BK) * BK

    @property
    def stage_bytes(self) -> int:
        """A ring slot's bytes in shared memory."""
        return (self.bm + self.b_columns) * BK * 2

    def copied_bytes(self, b_mn_major: bool) -> int:
        """The bytes a K step's TMA copies bring into a slot: a K-major B tile's bn rows, an
        N-major one's whole 64-column chunks."""
        return (self.bm + (self.b_columns if b_mn_major else self.bn)) * BK * 2

    @property
    def staging_bytes(self) -> int:
        """The f32 tiles (64 × STAGE_COLUMNS per consumer and product) of `store=smem`, the
        16-bit output tiles (64 × bn per consumer) of `store=tma`; with
        `cluster`, the block's whole f32 tile (bm × bn) and 2048 bytes for the mbarriers in
        dynamic shared memory, one place more than they take since they share one
        (`hopper.MBARRIER_ALIGN`): the cluster split's blocks were measured as so planned
        (`wgmma_cluster.py`)."""
        if self.cluster > 1:
            return self.bm * self.bn * 4 + 2 * ATOM
        if self.store == "tma":  # each consumer warpgroup's 64 rows of 16-bit outputs
            return self.consumers * tile.WGMMA_M * self.tile_n * 2
        if self.store != "smem":
            return 0
        if self.swap == "on":  # output rows of 64 columns and 4 of padding (`wgmma_swapped`)
            return self.consumers * tile.WGMMA_M * (STAGE_COLUMNS + 4) * 4
        return self.products * self.consumers * tile.WGMMA_M * STAGE_COLUMNS * 4

    @property
    def products(self) -> int:
        return 2 if self.dual == "on" else 1

    @property
    def shared_bytes(self) -> int:
        """Dynamic ring and staging tiles (with 1024 bytes of alignment slack) and the
        2·stages mbarriers (with `multicast`, dynamic too: one more 1024-byte place, which
        both arrays share, `hopper.MBARRIER_ALIGN`)."""
        barriers = ATOM if self.multicast != "off" else 0
        return (
            self.stages * self.stage_bytes + self.staging_bytes + ATOM + 16 * self.stages + barriers
        )


Tiles = TypeVar("Tiles", bound="WgmmaTiles")


def fitted_ring(t: Tiles, target: Target) -> Tiles:
    """`t` with its ring cut to the deepest that fits the block's shared memory beside its other
    tiles (`WgmmaTiles.shared_bytes`), 2 slots at least."""
    while t.stages > 2 and t.shared_bytes > target.dynamic_shared:
        t = replace(t, stages=t.stages - 1)
    return t


def deepened(t: WgmmaTiles, batch: int, m: int, n: int, k: int, target: Target) -> WgmmaTiles:
    """`t` with a deeper ring where each block streams B tiles no other block reads (one row of
    blocks covers M) and each SM runs one block (a persistent grid, or no more blocks than
    SMs): such a block's K loop waits on its own loads, and the shared memory no second block
    will use goes to more slots in flight, as many as it holds (at most `WGMMA_DEEPEST_STAGES`)
    and the K steps need. The wide blocks keep their measured depth (`WIDE_STAGES`).

    Measured (benchmarks/RESULTS.md, twenty-seventh session; bf16 linears, 6 slots against up
    to 13 of 64×64): on the H200, 64-row q/o (4096×4096) 19.8 → 17.5 µs, 0.88 → 0.99×
    cuBLAS, and over 30 random shapes of one row of blocks 0.93-1.18× as fast; deepening
    grids of several rows of blocks too (96-1000 rows) ran 0.91-1.20×, so those keep 6. On
    an H100, the rule as it stands, over the 21 shapes it changes only the ring of: 0.92-1.13×
    (geometric mean 1.02; the losses on 8-17 µs kernels that ran 1.00-1.09× on the H200)."""
    one_block_an_sm = t.persistent or one_wave(t, batch, m, n, target)
    if t.bn in WIDE_STAGES or not (m <= t.bm and one_block_an_sm):
        return t
    steps = -(-k // BK)
    deepest = t.stages
    while deepest < min(WGMMA_DEEPEST_STAGES, steps) and (
        replace(t, stages=deepest + 1).shared_bytes <= target.dynamic_shared
    ):
        deepest += 1
    return replace(t, stages=deepest)


def tile_count(t: WgmmaTiles, batch: int, m: int, n: int) -> int:
    """The output tiles of a `batch × m × n` GEMM under `t`."""
    return batch * -(-m // t.bm) * -(-n // t.tile_n)


def one_wave(t: WgmmaTiles, batch: int, m: int, n: int, target: Target) -> bool:
    """Whether the blocks of a `batch × m × n` GEMM under `t`, launched one per tile (a cluster
    of `t.cluster` for each), all run at once at one block an SM (`Target.cluster_slots`)."""
    tiles = tile_count(t, batch, m, n)
    return target.cluster_slots(t.cluster) >= tiles if t.cluster > 1 else tiles <= target.sms


_SLT, _ULT = 2, 6
"""`arith.cmpi` predicates `slt` and `ult`."""


def _fail(message: str) -> str:
    return f"mma=wgmma {message}"


CLUSTER_SPLITS = (1, 2, 4, 8)
"""The K splits over a cluster's blocks (`WgmmaTiles.cluster`): up to the portable cluster."""

EVICT_PLANS = ("off", "a", "b", "ab")


def evicted_operands(knob: str, t: WgmmaTiles, m: int, n: int) -> str:
    """The `evict` knob resolved: the operands whose TMA loads carry an L2 evict-first hint.
    auto: each operand whose every tile is read by blocks that run at the same time, and never
    again. B where one group of block rows (`group`: the launch walks a column of the group's
    blocks before the next column) covers M, so a B tile's readers are consecutive blocks; A
    where one column of blocks covers N. Their lines then give way first in L2, before the
    other operand's (read again by later blocks) and the rest of the cache (other kernels'
    outputs, dirty lines awaiting write-back). Measured on the H200 (benchmarks/RESULTS.md,
    2026-12-04, nineteenth session runs 4-6): the 64- and 128-row bf16 decode linears, 0.75-0.95x
    cuBLAS without it. Any other value names the operands itself."""
    if knob not in ("auto", "once"):
        return knob
    rows, columns = -(-m // t.bm), -(-n // t.tile_n)
    b_together = rows == 1 or (t.group > 1 and rows <= t.group)
    hinted = ("a" if columns == 1 else "") + ("b" if b_together else "")
    return hinted or "off"


AUTO_L2_PROMOTION = 0
"""The L2 promotion `l2promo=auto` gives the operands' tensor maps, in bytes: none. On an H100
(RESULTS.md, thirty-eighth session run 1) 128 bytes ran within 2% of it on 11 GEMMs, and 256
bytes as fast with rows on 32-byte sectors but up to 1.16x slower with rows off them (3000³,
5000³, 997×6112×5064)."""


def l2_promotion(knob: int | str) -> int:
    """The `l2promo` knob resolved: the L2 promotion of the operands' tensor maps in bytes."""
    return AUTO_L2_PROMOTION if knob == "auto" else int(knob)


TMA_ALIGN = 16
"""Bytes every global stride of a TMA tensor map but the innermost must be a multiple of."""


def row_misaligned(t: MemRefType) -> bool:
    """Whether a buffer's rows (its innermost extent) are not a multiple of `TMA_ALIGN` bytes."""
    width = t.element_type.bitwidth // 8  # type: ignore[attr-defined]
    return (t.get_shape()[-1] * width) % TMA_ALIGN != 0


def operand_buffers(c: Contraction, shared_a: bool = False) -> Operands | str:
    """Returns the buffers of a contraction whose sides are plain loads TMA could copy (rows
    aside), else the sentence that says which limit the contraction is outside. A split-K
    partial kernel's sides are plain loads at its K chunk (`split_form`). With `shared_a`, A
    may be one `[m, k]` matrix for every batch entry of B (a 1×1 convolution's weight against
    each image's `[C, H·W]`), its TMA copies then without the batch coordinate."""
    split = split_form(c)
    splits, chunk, k_index, batch = split if split else (1, 0, None, c.nest.body.block.args[:-2])
    k_iv = c.reduce.body.block.args[0]
    sides = [(c.a_side, c.a_value, c.m_iv, k_iv), (c.b_side, c.b_value, c.n_iv, k_iv)]
    if isinstance(c, PairedContraction):
        second = c.second
        sides.append((second.b_side, second.b_value, c.n_iv, second.reduce.body.block.args[0]))
    positions = []
    args = list(c.nest.parent_block().args)  # type: ignore[union-attr]
    scales: list[ScaleOperand | None] = []
    for side, value, outer, k_iv in sides:
        if split:
            side, value = split_guard(side, value)
        index_ops = split_index_ops(side) if split else []
        loads = [op for op in side if op not in index_ops]
        scaled = None if split else split_block_scale(loads, value, outer, k_iv)
        scales.append(None)
        if scaled:
            loads, value, scale = scaled
            position = args.index(scale.load.memref)
            scales[-1] = ScaleOperand(position, scale.kinds)
        if not _plain_load(loads, value):
            return _fail(
                "needs both operands to be plain loads (TMA copies raw bytes: no prologue math)"
            )
        k = k_index if split else k_iv
        load = loads[0]
        assert isinstance(load, memref.LoadOp)
        indices = list(load.indices)
        if indices == [*batch, outer, k] or (
            shared_a and batch and not split and outer is c.m_iv and indices == [outer, k]
        ):
            positions.append((load.memref, False))
        elif outer is c.n_iv and indices == [*batch, k, outer]:
            positions.append((load.memref, True))
        else:
            return _fail(
                "needs A indexed [b?, m, k] and B [b?, k, n] or [b?, n, k] (one batch index "
                "shared by both)"
            )
    (a, _), (b, b_mn_major), *second = positions
    if not second:
        a_scale, b_scale = scales
        return Operands(
            args.index(a), args.index(b), b_mn_major, None, splits, chunk, a_scale, b_scale
        )
    if any(scales):
        return _fail("runs no dual GEMM with block scales")
    ((second_b, second_mn_major),) = second
    if second_mn_major != b_mn_major:
        return _fail("needs a dual GEMM's two B operands in one layout ([k, n] or [n, k])")
    return Operands(args.index(a), args.index(b), b_mn_major, args.index(second_b))


def _plain_load(ops: list[Operation], value: SSAValue) -> bool:
    """Whether an operand side is one load whose value is the operand: a 16-bit load widened
    to f32 (`arith.extf`), or an f32 load as it is."""
    if not ops or not isinstance(load := ops[0], memref.LoadOp):
        return False
    if len(ops) == 1:
        return load.res == value
    ext = ops[1]
    return (
        len(ops) == 2
        and isinstance(ext, arith.ExtFOp)
        and ext.input == load.res
        and ext.result == value
    )


def split_form(c: Contraction) -> tuple[int, int, SSAValue, list[SSAValue]] | None:
    """(splits, chunk, the K index, the operands' batch indices) of a split-K partial kernel
    (`split_k.py`): nest `(b·S + s, m, n)`, K read at `s·chunk + k` with `s = (b·S + s) % S`,
    and the operands' batch at `(b·S + s) / S` where they have one; else None. Where the chunks
    reach past K, the index is clamped, `min(s·chunk + k, K - 1)`, and A's value taken only
    below K (`split_guard`): the zeros TMA copies past the buffer's K, or, where K is shorter
    than the buffer's rows (a GEMM on operands staged into padded workspaces,
    `wgmma_staged.py`), the padding's zeros, as the unsplit GEMM reads them."""
    if len(c.nest.extents) != 3:
        return None
    first, k_iv = c.nest.body.block.args[0], c.reduce.body.block.args[0]
    loads = [op for op in c.a_side if isinstance(op, memref.LoadOp)]
    if len(loads) != 1:
        return None
    k_index = loads[0].indices[-1]
    if isinstance(clamp := k_index.owner, arith.MinSIOp):
        row = loads[0].memref.type.get_shape()[-1]  # type: ignore[attr-defined]
        last = index_constant(clamp.rhs)
        if last is None or not 0 <= last < row:
            return None
        k_index = clamp.lhs
    if not isinstance(add := k_index.owner, arith.AddiOp):
        return None
    if add.rhs != k_iv or not isinstance(mul := add.lhs.owner, arith.MuliOp):
        return None
    if not isinstance(rem := mul.lhs.owner, arith.RemUIOp) or rem.lhs != first:
        return None
    splits, chunk = index_constant(rem.rhs), index_constant(mul.rhs)
    if splits is None or chunk is None:
        return None
    batch = list(loads[0].indices[:-2])
    if batch:
        div = batch[0].owner
        if (
            len(batch) != 1
            or not isinstance(div, arith.DivUIOp)
            or div.lhs != first
            or index_constant(div.rhs) != splits
        ):
            return None
    return splits, chunk, loads[0].indices[-1], batch


def split_guard(side: list[Operation], value: SSAValue) -> tuple[list[Operation], SSAValue]:
    """An operand side of a split partial kernel without its guard past K, and its value: for
    `select(s·chunk + k < K, a, 0.0)` (`split_k._partial_kernel` where the chunks reach past
    K), the side less the comparison, the select and its zero, and `a`; else both as they are.
    TMA copies zeros past the buffer's K, so the unguarded load is the guarded value."""
    select = value.owner
    if not isinstance(select, arith.SelectOp) or not isinstance(
        compare := select.cond.owner, arith.CmpiOp
    ):
        return side, value
    zero = select.rhs.owner
    add = compare.lhs.owner
    loads = [op for op in side if isinstance(op, memref.LoadOp)]
    clamp = loads[0].indices[-1].owner if len(loads) == 1 else None
    last = index_constant(clamp.rhs) if isinstance(clamp, arith.MinSIOp) else None
    if not (
        isinstance(zero, arith.ConstantOp)
        and isinstance(zero.value, FloatAttr)
        and zero.value.value.data == 0.0
        and compare.predicate.value.data in (_SLT, _ULT)
        and isinstance(add, arith.AddiOp)
        and isinstance(clamp, arith.MinSIOp)
        and clamp.lhs == add.result
        and last is not None
        and index_constant(compare.rhs) == last + 1
    ):
        return side, value
    return [op for op in side if op not in (select, compare, zero)], select.lhs


def split_index_ops(side: list[Operation]) -> list[Operation]:
    """The ops of a split partial kernel's operand side that compute indices (all of whose
    results are `index`s: its K and batch indices), not values."""
    return [
        op for op in side if op.results and all(isinstance(r.type, IndexType) for r in op.results)
    ]


def chunk_refusal(operands: Operands) -> str | None:
    """Why the wgmma rule cannot copy a split-K partial kernel's K chunks by TMA (chunks that
    are not whole 64-wide boxes), or None."""
    if operands.splits > 1 and operands.chunk % BK:
        return _fail(
            f"takes a split of K in chunks that are multiples of {BK} (whole TMA boxes), got "
            f"{operands.splits} chunks of {operands.chunk}"
        )
    return None


def plain_operands(c: Contraction, k: int, n: int) -> Operands | str:
    """Returns the buffers of a contraction whose sides are plain loads TMA can copy, else
    the sentence that says which limit the contraction is outside. The rows checked are the
    buffers': a GEMM over operands staged into padded workspaces (`wgmma_staged.py`) reads
    K or N columns of longer rows, which TMA copies past the extents as the zeros there."""
    operands = operand_buffers(c, shared_a=True)
    if isinstance(operands, str):
        return operands
    if why := chunk_refusal(operands):
        return why
    args = list(c.nest.parent_block().args)  # type: ignore[union-attr]
    buffers = [args[p].type for p in (operands.a, *operands.bs)]
    if any(row_misaligned(t) for t in buffers):  # type: ignore[arg-type]
        return _fail(
            f"needs the rows of A and B to be multiples of {TMA_ALIGN} bytes (TMA), got "
            f"K={k}, N={n}"
        )
    return operands


BLOCK_EFFICIENCY = {
    (128, 256): 1.0,
    (128, 192): 1.0,
    (192, 192): 1.05,
    (128, 128): 0.65,
    (64, 128): 0.36,
}
"""Throughput per FLOP of a block shape (bm, bn) relative to 128×256 blocks, at whole waves of
one block per SM, measured on the H200 (192×192 on an H100). 192×192 (three consumer
warpgroups, `tall`; thirty-fourth session runs 5-6): its operand tiles are 20% fewer bytes per
FLOP than 128×192's, which counts where every SM streams its tiles from L2 and rows of K start
off 32-byte sectors (K ≡ 8 mod 16 elements): 3000³ 132.7 → 110.0 µs (0.62 → 0.75× cuBLAS) in
2 rounds where 128×192 takes 3, 5000³ 545 → 516, and a tie where rows are aligned
(3000×3000×3008 83.2 → 82.5); on more rounds than 128×256 it lost (4096³ 0.98 → 0.90×), so it
is taken only where its waves cost no more, 1.05 breaking the tie. 128×192 (eighteenth session,
runs 2-3): one whole wave at K = 8192 763 TFLOP/s (1536×2112) where 128×256 ran 752
(1536×2816), two waves 744 against 742, so its narrower tiles cost nothing and it wins where
they fill the waves better
(2000×3000×4096 1.04× cuBLAS against 0.83× on 128×256). 128×128 (eighth session run 3):
128×128 blocks ran 3000³ in 5 waves at 468 TFLOP/s a wave where 128×256 ran 4096³ at 727 (0.64);
64×128 blocks ran 1000³ in one wave of 128 blocks in 12.3 µs where 128×128 took 13.7 in one
wave of 64 (0.56 of 128×128's, at K = 1000 where a block's fixed costs weigh most: an
underestimate at larger K). The H100 figure this replaced, 0.85 for 128×128, picked 128×128
for 3000³, 0.60× cuBLAS, where 128×256 ran 0.67× and the tuner's best 128×256 plan 0.76×."""


NARROWER_MARGIN = 0.95
"""How much cheaper by `_wave_cost` a narrower block must be than the widest to be taken: the
wave count is exact, the efficiencies hold to about 5% across shapes, and narrower blocks read
more operand bytes per FLOP. Measured on the H200 (benchmarks/RESULTS.md, eighteenth session
run 4): 128×192 estimated 25% cheaper at 3000³ ran 1.09-1.12× faster, 6% cheaper at
1000×14336×4096 1.06× faster, 3.5% cheaper at 5000³ 0.9× as fast."""

PROMOTED_WIDEST = 192
"""The widest block whose K steps are promoted: bn/2 accumulators and bn/2 products a thread
(96 + 96 registers at 192, no local memory in the SASS)."""

OVERLAPPED_WIDEST = 128
"""The widest block whose promoted K steps overlap (`poverlap`): bn/2 accumulators and two
sets of bn/2 products a thread, 192 registers at 128 columns."""

SCALED_B_WIDEST = 192
"""The widest block with B block scales (one per 128 columns and K step) whose products are
promoted whole: 192 columns, whose blocks start on a scale block or half-way through one, and
so read two scales a K step."""

PROMOTED_HALVES = 256
"""The block width whose promoted K steps run in two halves of 128 columns, each half's
products (64 registers a thread) added before the next half is issued into them: 128
accumulators and 64 products a thread. Its blocks start on a B scale block and take two."""


def scaled_b_width(bn: int) -> bool:
    """Whether blocks `bn` columns wide take B block scales (`SCALED_B_WIDEST`): those within
    one scale block (bn dividing 128), 192-wide ones and those promoted in halves."""
    return SCALE_BLOCK % bn == 0 or bn in (SCALED_B_WIDEST, PROMOTED_HALVES)


PROMOTED_EFFICIENCY = {(128, 192): 1.0, (128, 128): 0.94}
"""Throughput per FLOP of 128-row blocks with promoted FP8 steps by width, measured on the
H200 (benchmarks/RESULTS.md, seventeenth session runs 4-5: 8192³ e4m3 in 21 waves of 128×192
blocks 922 µs, in 32 waves of 128×128 993 µs). With block scales the same on an H100
(fortieth session run 1: 8192³ 1096 against 1180 µs; 4096³ 151.5 against 139.6, 6 rounds of
128×192 against 8 of 128×128; 1000×4096×4096 54.3 against 40.0, two rounds each)."""


WIDE_STAGES = {256: 3, 192: 4}
"""Ring depth of the wide blocks (at most `MAX_STAGES` for the others): 3 measured best for
bn = 256; 4 the most that fit beside the staging tiles for bn = 192."""


SMALL_M = 64
"""Rows at most which a GEMM takes 64×64 blocks (`choose_wgmma_tiles`)."""


def _wave_cost(
    batch: int,
    m: int,
    n: int,
    sms: int,
    dual: bool,
    bm: int,
    bn: int,
    table: dict[tuple[int, int], float] = BLOCK_EFFICIENCY,
) -> float:
    """A grid of bm×bn blocks' time in waves of one block per SM, each wave costing a block's
    bm·bn at its shape's efficiency in `table` (a 64-row block's width taken at its 128-row
    one's where the table has no entry)."""
    columns = bn // 2 if dual else bn
    blocks = batch * -(-m // bm) * -(-n // columns)
    efficiency = table.get((bm, bn)) or table[(128, bn)]
    return -(-blocks // sms) * bm * bn / efficiency


def wide_split_fits(batch: int, m: int, n: int, sms: int, bm: int = 128) -> bool:
    """Whether the grid of bm×256 blocks, split over K in two, still fits one wave of one block
    an SM: a small grid whose SMs the split fills (`split_k_plan.wgmma_splits`' condition)."""
    return 2 * batch * -(-m // bm) * -(-n // 256) <= sms


def _wave_cheapest_block(
    batch: int,
    m: int,
    n: int,
    sms: int,
    dual: bool,
    bm: int = 0,
    widest: int = 256,
    tall: bool = False,
) -> tuple[int, int]:
    """Returns the block (bm, bn accumulator columns) whose grid takes least time by
    `_wave_cost`: among `BLOCK_EFFICIENCY`'s blocks, or with `bm` given the widths 256, 192 and
    128, or with `widest` under 256 (promoted FP8 steps) among `PROMOTED_EFFICIENCY`'s widths.
    192 columns neither for a dual GEMM (bn/2 of each product: 128 or 256) nor where 128×256
    blocks split in two still fit one wave: there the split over K fills the SMs (8B k/v at
    M = 2048: 96 blocks of 128×192 ran 0.75× cuBLAS, 64 of 128×256 split in 2 0.94×). Between
    half a wave and a wave of 128×256 blocks no split fits, and 128×192 fills more of the SMs
    (H100, benchmarks/RESULTS.md thirty-fourth session run 3: 1000×2544×6032, 80 blocks against
    112, 0.71 → 0.90× cuBLAS; 700×3000×4096 0.72 → 0.88; 512×4888×9440 0.74 → 0.94).
    128×256 wherever its grid fits the same number of waves, a narrower block where 128×256
    would leave SMs idle or add a nearly empty wave (2026-12-02: 4000×1024×4096 bf16, 128
    blocks of 128×256 in one wave ran 1.21× faster than 256 blocks of 128×128 in two). A dual
    GEMM's block holds bn/2 columns of each product and takes 128-row blocks. 192×192 blocks
    only where `tall` (a plain GEMM the wgmma rule may give three consumer warpgroups); with
    `bm` = 192 given, the widths 192 and 128."""
    if widest < 256:  # promoted FP8 steps: their own blocks' throughputs
        promoted = [b for b in PROMOTED_EFFICIENCY if b[1] <= widest]
        return min(
            promoted, key=lambda b: _wave_cost(batch, m, n, sms, dual, *b, PROMOTED_EFFICIENCY)
        )
    if bm:
        candidates = [(bm, w) for w in (256, 192, 128) if bm != TALL or w <= TALL]
    else:
        candidates = [b for b in BLOCK_EFFICIENCY if tall or b[0] != TALL]
    if dual and not bm:
        candidates = [b for b in candidates if b[0] == 128]
    if dual or wide_split_fits(batch, m, n, sms, candidates[0][0]):
        candidates = [b for b in candidates if b[1] != 192]
    costs = {b: _wave_cost(batch, m, n, sms, dual, *b) for b in candidates}
    widest = candidates[0]
    best = min(candidates, key=costs.__getitem__)
    return best if costs[best] < NARROWER_MARGIN * costs[widest] else widest


def choose_wgmma_tiles(
    knobs: Knobs,
    batch: int,
    m: int,
    n: int,
    target: Target,
    dual: bool = False,
    loads_by_row: bool = False,
    widest: int = 256,
    promote: bool = False,
    tall: bool = False,
    overlap: bool = False,
) -> WgmmaTiles | str:
    """Picks 128×256 blocks (two consumer warpgroups of 64×256) and 3 stages, or 128×192 (4
    stages), 128×128 or 64×128 blocks (6) when 128×256 would leave SMs idle, or with `tall`
    192×192 (three consumer warpgroups, 3 stages) where its waves cost no more
    (`_wave_cheapest_block`);
    a dual GEMM's block computes both
    products for half as many output columns (measured 2026-11-29: benchmarks/RESULTS.md, "Run
    5 (snapshot of the fastmath commit: …)"; 2026-12-01: "bf16 GEMM (`python
    benchmarks/bench_bf16.py`, run 4)"). 64×64 blocks (one consumer warpgroup; a dual GEMM's
    block 64 columns of each product) where 128×128 ones would be mostly padding or too few:
    at most `SMALL_M` rows (M = 64 bf16 on the H200, RESULTS.md seventh session run 3:
    0.64-0.88x cuBLAS where 128×128 ran 0.45-0.87x), or fewer 128×128 blocks than a quarter of
    the SMs (run 4: 512³ 16 blocks 1.00x against 0.76x, Llama-3-8B projections at M = 128 with
    8 or 32 blocks 0.62-0.81x against 0.48-0.67x; at 64 and 112 blocks 64×64 lost).

    Persistent blocks (`persistent=auto`) where the grid has more blocks than SMs: the producer
    fills a block's next tile while its consumers run the epilogue, which a block launched
    per tile pays as a pipeline fill (2026-12-04, H200, benchmarks/RESULTS.md fifteenth session
    run 2: 4096³ 0.973 → 0.998× cuBLAS, 16384×14336×4096 0.970 → 0.998, 4000×4096×1024 with
    GELU 1.08 → 1.21). Not where the epilogue prefetches a load per row (`loads_by_row`, a
    residual): the persistent consumers spill those registers (876 local-memory instructions
    at 16384×768×768 with a residual; BERT's residual linears at 8×2048 ran 1.6-2.2× slower
    than with a block per tile, run 5)."""
    wide_blocks = batch * -(-m // 128) * -(-n // (64 if dual else 128))
    small = m <= SMALL_M or 4 * wide_blocks < target.sms
    bm, bn = knobs.bm, knobs.bn
    if not bm and not bn and not small:
        bm, bn = _wave_cheapest_block(batch, m, n, target.sms, dual, widest=widest, tall=tall)
    bm = bm or (SMALL_M if small else 128)
    if not bn:
        if small and bm == SMALL_M:  # a dual GEMM's 128 columns are 64 of each product
            bn = 2 * SMALL_M if dual else SMALL_M
        else:
            bn = _wave_cheapest_block(batch, m, n, target.sms, dual, bm, widest)[1]
    stages = knobs.stages or (TALL_STAGES if bm == TALL else WIDE_STAGES.get(bn, MAX_STAGES))
    store = "smem" if knobs.store == "auto" else knobs.store
    group = knobs.group or GROUP
    blocks = batch * -(-m // bm) * -(-n // (bn // 2 if dual else bn))
    auto = int(knobs.ws == 1 and blocks > target.sms and not loads_by_row)
    persistent = auto if knobs.persistent == "auto" else int(knobs.persistent)
    t = WgmmaTiles(
        bm,
        bn,
        stages,
        knobs.ws,
        store,
        persistent,
        group,
        dual="on" if dual else "off",
        promote="on" if promote else "off",
        poverlap="on" if overlap else "off",
    )
    # As deep a ring as fits: beside a ragged width's tiles, or the output tiles of store=tma.
    ragged = bn % BK and bm != TALL
    if not knobs.stages and (ragged or knobs.store == "tma"):
        t = fitted_ring(t, target)
    if knobs.store == "auto" and t.shared_bytes > target.dynamic_shared:
        t = replace(t, store="direct")
    return wgmma_tile_refusal(t, target, knobs.bk) or t


def wgmma_tile_refusal(t: WgmmaTiles, target: Target, bk: int = 0) -> str | None:
    """Why the wgmma tiling cannot run, or None."""
    bm, bn, stages, dual = t.bm, t.bn, t.stages, t.dual == "on"
    if t.persistent and not t.ws:
        return _fail(
            "persistent=1 needs ws=1 (the producer warpgroup runs ahead into a block's next tile)"
        )
    if stages < 2:
        return _fail(
            f"needs stages of at least 2 (a ring of TMA slots filled ahead), got stages={stages}"
        )
    if bm not in (64, 128, TALL):
        return _fail(f"needs bm = 64, 128 or 192 (one to three consumer warpgroups), got bm={bm}")
    if bm == TALL and (why := _tall_refusal(t)):
        return _fail(
            f"runs 192-row blocks (three consumer warpgroups of {TALL_REGISTERS[1]} registers) "
            f"with bn up to 192, on no dual GEMM, promoted FP8 steps, cluster split or stream-K; "
            f"got {why}"
        )
    if bn % 16 or not 64 <= bn <= 256:
        return _fail(f"needs bn a multiple of 16 in [64, 256], got bn={bn}")
    if bn % BK and (why := _ragged_width_refusal(t)):
        return _fail(
            f"runs blocks of a width off 64-column chunks (bn={bn}) as a plain GEMM of one "
            f"product to each block (no dual GEMM, cluster split, stream-K or promoted FP8 "
            f"steps); got {why}"
        )
    if dual and bn not in (128, 256):
        return _fail("needs bn = 128 or 256 for a dual GEMM (64 or 128 columns of each product)")
    if bk not in (0, BK):
        return _fail(f"stages K in steps of {BK} (one 128-byte swizzle row), got bk={bk}")
    if t.store not in ("direct", "smem", "tma") or t.fastmath not in ("on", "off"):
        return _fail("needs store direct, smem or tma and fastmath on or off")
    if t.streamk not in ("off", "tail") or (t.streamk == "tail" and not t.persistent):
        return _fail("runs streamk=tail (on persistent blocks) or off")
    if t.cluster not in CLUSTER_SPLITS:
        return _fail(f"splits K over clusters of 1, 2, 4 or 8 blocks, got cluster={t.cluster}")
    if t.cluster > 1 and (t.store != "smem" or t.persistent or t.streamk != "off" or dual):
        return _fail(
            f"adds a cluster's partial sums (cluster={t.cluster}) in the staged epilogue "
            "(store=smem) of blocks that are not persistent, in no dual GEMM"
        )
    if t.evict not in EVICT_PLANS:
        return _fail(f"takes evict = {', '.join(EVICT_PLANS)} in a plan, got {t.evict!r}")
    if t.l2promo not in tile.L2_PROMOTIONS:
        return _fail(f"takes l2promo = 0, 64, 128 or 256 in a plan, got {t.l2promo!r}")
    # Promoted steps take bn up to PROMOTED_WIDEST, or PROMOTED_HALVES in halves: the widths
    # between are off 64-column chunks, which `_ragged_width_refusal` refuses with promote=on.
    if t.poverlap == "on" and (why := _overlap_refusal(t)):
        return _fail(
            f"overlaps promoted K steps (poverlap=on) with promote=on, bn up to "
            f"{OVERLAPPED_WIDEST} (bn/2 accumulators and two sets of bn/2 products a thread) "
            f"and, without a producer warpgroup (ws=0), stages of at least 3; got {why}"
        )
    if t.pturns == "on" and (t.promote != "on" or t.consumers != 2):
        return _fail(
            f"takes turns between two consumer warpgroups' promoted K steps (pturns=on) with "
            f"promote=on and bm=128; got promote={t.promote} bm={bm}"
        )
    if t.shared_bytes > target.dynamic_shared:
        store = f" store={t.store} ({t.staging_bytes} of them staging)" if t.staging_bytes else ""
        return _fail(
            f"with bm={bm} bn={bn} stages={stages}{store} needs {t.shared_bytes} bytes of "
            f"shared memory, more than the {target.dynamic_shared} a block may use"
        )
    return None


def _ragged_width_refusal(t: WgmmaTiles) -> str:
    """What of plan `t`, whose B tile ends in a partial 64-column chunk, its block does not
    run, or ""."""
    for setting, refused in (
        ("a dual GEMM", t.dual == "on"),
        (f"a cluster split of {t.cluster}", t.cluster > 1),
        (f"streamk={t.streamk}", t.streamk != "off"),
        ("promote=on", t.promote == "on"),
    ):
        if refused:
            return setting
    return ""


def _overlap_refusal(t: WgmmaTiles) -> str:
    """What of plan `t` its overlapped promoted K loop does not run, or "". Without a producer
    warpgroup the consumers copy step s + stages - 1 once they have added step s; with two
    stages that is step s + 1, which the overlap issues before those adds."""
    for setting, refused in (
        (f"promote={t.promote}", t.promote != "on"),
        (f"bn={t.bn}", t.bn > OVERLAPPED_WIDEST),
        (f"ws=0 with stages={t.stages}", not t.ws and t.stages < 3),
    ):
        if refused:
            return setting
    return ""


def _tall_refusal(t: WgmmaTiles) -> str:
    """What of plan `t` a 192-row block does not run, or ""."""
    for setting, refused in (
        (f"bn={t.bn}", t.bn > TALL),
        ("a dual GEMM", t.dual == "on"),
        ("promote=on", t.promote == "on"),
        (f"a cluster split of {t.cluster}", t.cluster > 1),
        (f"streamk={t.streamk}", t.streamk != "off"),
    ):
        if refused:
            return setting
    return ""


def approximate_math(fastmath: str, c: Contraction) -> bool:
    """Whether the epilogue's `exp` and `/` may be approximate (the `fastmath` knob): `auto`
    when every value it stores is f16/bf16. The K loop has neither op."""
    if fastmath != "auto":
        return fastmath == "on"
    return _stores_16_bit(c)


def promoted(promote: str, c: Contraction) -> bool:
    """Whether an FP8 GEMM's K steps are promoted to f32 (the `promote` knob): `auto` when the
    epilogue stores a value wider than 16 bits. Summing all of K in the tensor cores left, with
    a bf16 output, 2.1e-3 / 2.6e-3 / 3.3e-3 relative error at K = 4096 / 8192 / 14336 where
    promoted steps leave 1.7e-3, the output's own rounding (torch's `_scaled_mm` 1.7e-3), and
    ran 1.01-1.06x `_scaled_mm` where promoted 128x192 blocks ran 0.85-0.95x; to an f32
    output at 4096³ it left 1.33e-3 where promoted steps leave 1.26e-4, as torch with and
    without `use_fast_accum` (H200, 2026-12-04, benchmarks/RESULTS.md seventeenth session runs
    4-7)."""
    if promote != "auto":
        return promote == "on"
    return not _stores_16_bit(c)


def _stores_16_bit(c: Contraction) -> bool:
    stores = [o for op in c.epilogue for o in op.walk() if isinstance(o, memref.StoreOp)]
    return all(o.value.type in (f16, bf16) for o in stores)
