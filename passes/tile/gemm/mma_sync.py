"""Schedule rule for f16/bf16 contractions on tensor cores: `mma.sync` m16n8k16 with `ldmatrix`.

Taken when the `mma=sync` knob is set and both operand sides of a contraction read f16 or
bf16 buffers (of one type). A block computes a BM×BN output tile walking K in steps of BK.
Each step stages the A and B sides in shared memory as the input element type (a side's f32
value, with any fused prologue, is rounded back, like autocast; a plain load is staged
exactly), zero-filling out-of-range rows, columns and K. Each side is stored in the
orientation its global reads are contiguous in, `[outer][BK]` or `[BK][outer]` (which
`ldmatrix` reads with `.trans`), so staging uses 16-byte vector accesses. Shared rows are
padded by 8 elements (`PAD`): an odd number of 16-byte units, so the 8 rows of one `ldmatrix`
matrix fall in distinct bank groups and stay 16-byte aligned.

With `stages=2` (the default on grids of more than two blocks an SM, or more than one for a K
split's partial sums: `ring_depth`) the K loop is double-buffered through registers: each
thread loads its share of the next K step's A and B tiles into registers right after the
current step is staged, so those global loads are in flight while the warps run the current
step's `mma`s, and stores them to shared memory at the top of the next step; deeper rings keep
more steps in flight. `stages=1` loads and stores each step's tiles before its `mma`s (a block
waits on its loads every step: with a few blocks per SM and a long K, the whole kernel is that
wait).

The warps tile the block's output (warp tile WM×WN: 64×32 for BM, BN ≥ 128), each holding
(WM/16)×(WN/8) m16n8 fp32 fragments. The epilogue runs from the fragment layout: lane l holds
rows l/4 and l/4+8, columns 2(l%4) and 2(l%4)+1 of each m16n8 tile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float8E4M3FNType,
    Float8E5M2Type,
    FloatAttr,
    Float16Type,
    f32,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.gemm.block_scales import block_scale_loads
from tinyopt.passes.tile.gemm.contraction_match import Contraction, match_contraction
from tinyopt.passes.tile.gemm.skinny_match import MAX_ROWS
from tinyopt.passes.tile.target import Target
from tinyopt.passes.tile.emit import Emitter, LaneEmitter, Mapping, vector_width
from tinyopt.passes.tile.gemm.split_k import SPLIT_PARTIAL
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.rule import Rule

WARP = 32
MMA_M, MMA_N, MMA_K = 16, 8, 16
"""The tensor-core instruction shape: m16n8k16."""

BK = 32
"""The K depth a block stages per step unless `bk` says otherwise."""

PAD = 8
"""Shared-row padding in 16-bit elements (16 bytes): conflict-free, aligned `ldmatrix` rows."""


MOST_STAGES = 8
"""The deepest register ring of the K loop (`MmaTiles.stages`)."""

DEEP_RING_BLOCKS = 2
"""Blocks an SM up to which `stages=auto` keeps the K loop in flight (`ring_depth`), for blocks
of at most `PAIRED_THREADS` threads."""

PAIRED_THREADS = 128
"""Threads of a block two of which an SM's 65536 registers hold at any ring: 255 registers a
thread (the most) × 128 × 2 = 65280. Larger blocks (128×128, 256 threads) would lose the second
block of an SM to a deeper ring's registers, so they deepen only at one block an SM."""

HELD_REGISTERS = 160
"""Registers a thread may hold in accumulators and staged elements (`MmaTiles.held_registers`)
before the ring is refused: beside the fragments and addresses, more would spill (an
estimate; tests/test_sass.py checks the deepest rings it allows for local memory)."""


@dataclass(frozen=True)
class MmaTiles:
    """The block tile (bm, bn, bk) and each warp's output tile (wm, wn)."""

    bm: int
    bn: int
    bk: int
    wm: int
    wn: int
    vec: int = 8
    """The widest vector of a global access."""
    stages: int = 2
    """1: each K step's tiles loaded, then stored to shared memory; s ≥ 2: the next s - 1
    steps' tiles loaded into registers (a ring of s - 1, the K loop unrolled over it) while the
    current one's `mma`s run, so s - 1 steps' loads are in flight at once."""
    store: str = "direct"
    """How the epilogue reaches the accumulators: direct, from the m16n8 fragment layout (a
    warp's store touches 8 rows); smem, each warp passing its tile 16 rows at a time through a
    16 × (wn + 1) f32 tile of its own in shared memory, so a store covers whole rows."""

    @property
    def warps(self) -> int:
        return (self.bm // self.wm) * (self.bn // self.wn)

    @property
    def threads(self) -> int:
        return self.warps * WARP

    @property
    def held_registers(self) -> int:
        """A thread's accumulators and staged elements (the worst case, one register each: the
        element loads of rows off 16 bytes) of its stages - 1 steps in flight."""
        staged = max(self.stages - 1, 1) * -(-(self.bm + self.bn) * self.bk // self.threads)
        return self.wm * self.wn // WARP + staged

    @property
    def staging_shape(self) -> list[int]:
        """The warps' f32 tiles of the `smem` epilogue: 16 rows of wn + 1 (the odd row length
        keeps a warp's reads of one column per lane off shared bank conflicts)."""
        return [self.warps, MMA_M, self.wn + 1]

    @property
    def shared_bytes(self) -> int:
        """Bytes of both staged sides in the larger of their two orientations (the pad goes on
        the contiguous dimension: BK or the side's outer size), and the `smem` epilogue's."""
        sides = sum(2 * (size * self.bk + PAD * max(size, self.bk)) for size in (self.bm, self.bn))
        staging = 4 * math.prod(self.staging_shape) if self.store == "smem" else 0
        return sides + staging


def block_and_warp_tiles(
    knobs: Knobs, batch: int, m: int, n: int, sms: int, quarter: bool = False
) -> MmaTiles:
    """Picks 128×128×32 blocks of 8 warps (64×32 each), or 64×64 when that leaves SMs idle,
    or with `quarter` (the bf16/f16 rule; not TF32's) 32×32 (4 warps of 16×16) when even 64×64
    blocks are fewer than the SMs and M is more than the skinny rules' `MAX_ROWS`; the knobs
    override the block tile, and the `mma.sync` schedules check what they need. A grid of
    fewer blocks than SMs runs in one partial wave whose time is one block's K loop: a quarter
    of the block (with as many threads) halves the loads each thread waits on per K step and
    puts up to four times the SMs to work, for twice the operand reads (from L2). That decides
    a batch of small GEMMs (3 × 127³: 12 blocks of 64×64, 48 of 32×32; measured on the H200,
    RESULTS.md eighth session run 2: 0.41-0.47× cuBLAS at 3, 7 and 17 × 127³ against
    0.34-0.40×)."""
    big = batch * -(-m // 128) * -(-n // 128) >= sms
    small = quarter and batch * -(-m // 64) * -(-n // 64) < sms and m > MAX_ROWS
    side = 128 if big else 32 if small else 64
    bm = knobs.bm or side
    bn = knobs.bn or side
    bk = knobs.bk or BK
    # Wide warp tiles reuse each ldmatrix fragment across more mma; narrow blocks still get
    # at least two warps per dimension where they can. bm, bn are powers of two ≥ 16, so the
    # warp tile always divides them.
    wm = 64 if bm >= 128 else max(MMA_M, bm // 2)
    wn = 32 if bn >= 64 else 2 * MMA_N
    return MmaTiles(bm, bn, bk, wm, wn)


def ring_depth(t: MmaTiles, extents: tuple[int, ...], sms: int, split: bool = False) -> int:
    """`stages=auto`: on a grid of at most `DEEP_RING_BLOCKS` blocks an SM (one, for a K
    split's partial sums: `split`), the deepest register ring that keeps the SM's whole K loop
    in flight (each block's steps over the blocks it shares the SM with) and that
    `HELD_REGISTERS` allows; else 2 (one step's loads in flight while the current step's
    `mma`s run). Blocks of more than `PAIRED_THREADS` threads deepen at one block an SM only.
    Such a grid runs in one partial wave or two blocks an SM, whose time is a block's K loop
    or two, each step waiting on its own loads: with several steps in flight the waits
    overlap (790×72×190, 75 blocks of 32×32 and 6 K steps: 10.1 µs at 2, 8.2 at 3, 7.5 at 6,
    cuBLAS 7.5; H100, RESULTS.md forty-third session; 11 linears of 140-264 blocks of 32×32 on
    132 SMs, K 111-210: 1.15× as fast as at 2 stages (geometric mean; 0.92-1.38×, the two
    losses at K of 4 steps), forty-eighth session call 4).
    But a K split's partial sums at two blocks an SM ran slower deeper (400×40×1111: 12.0 µs at
    2 stages, 15.3 at 4, call 3). Grids of more blocks hide the loads' latency with the other
    blocks of the SM, and keep the lighter ring."""
    batch, m, n, k = extents
    per_sm = -(-batch * -(-m // t.bm) * -(-n // t.bn) // sms)
    if per_sm > (1 if split or t.threads > PAIRED_THREADS else DEEP_RING_BLOCKS):
        return 2
    deepest = min(MOST_STAGES, -(-k // (t.bk * per_sm)) + 1)
    fitting = [
        s for s in range(2, deepest + 1) if replace(t, stages=s).held_registers <= HELD_REGISTERS
    ]
    return max(fitting, default=2)


def store_width(c: Contraction) -> int:
    """Output columns a lane's epilogue store takes at once: pairs where the epilogue and N
    allow them, else single elements."""
    width = vector_width(c.epilogue, c.n_iv, 2, 2)
    return width if c.extents[2] % width == 0 else 1


def mma_store(knob: str, c: Contraction) -> str:
    """The `store` knob resolved for the mma.sync rule: `auto` is `smem` where the epilogue
    stores single elements, at an odd N (the m16n8 fragments would put one element of each of 8
    rows into their sectors a store: 2 bytes of 16-bit output, 4 of a split's f32 partial
    sums), else `direct`. On an H100 (RESULTS.md thirty-ninth session runs 1-2), over 36 odd-N
    bf16 linears left on mma.sync, `smem` ran 1.10x as fast as `direct` (geometric mean):
    1.02-1.90x on every output of more than 100K elements, 0.91-1.13x on the smaller ones
    (6-12 us kernels); where the stores took pairs, within 1%. A split's f32 partial sums at
    N = 81 (the sweep's r19, run 4): 11.6 -> 11.1 us."""
    if knob != "auto":
        return knob
    return "smem" if store_width(c) == 1 else "direct"


def mma_tile_refusal(tiles: MmaTiles, target: Target) -> str | None:
    """Why the mma.sync tiling cannot run, or None."""
    bm, bn, bk = tiles.bm, tiles.bn, tiles.bk
    if bm % tiles.wm or bn % tiles.wn or tiles.wm % MMA_M or tiles.wn % (2 * MMA_N):
        return (
            f"mma=sync needs warp tiles (wm={tiles.wm}, wn={tiles.wn}) that divide the block "
            f"tile (bm={bm}, bn={bn}) into whole m{MMA_M} and n{2 * MMA_N} fragments"
        )
    if bk % MMA_K:
        return f"mma=sync needs bk to be a multiple of {MMA_K} (the mma K step), got bk={bk}"
    if not 1 <= tiles.stages <= MOST_STAGES:
        return f"mma=sync takes stages 1 to {MOST_STAGES}, got {tiles.stages}"
    if tiles.held_registers > HELD_REGISTERS:
        return (
            f"mma=sync with bm={bm} bn={bn} bk={bk} stages={tiles.stages} holds about "
            f"{tiles.held_registers} registers a thread in accumulators and staged elements, "
            f"more than {HELD_REGISTERS}: fewer stages"
        )
    if tiles.store not in ("direct", "smem"):
        return f"mma=sync stores its epilogue direct or through smem, got store={tiles.store}"
    if tiles.shared_bytes > target.static_shared:
        return (
            f"mma=sync with bm={bm} bn={bn} bk={bk} needs {tiles.shared_bytes} bytes of "
            f"shared memory, more than the {target.static_shared} a block may declare statically"
        )
    return None


def tensor_core_type(c: Contraction, fp8: bool = False) -> Attribute | None:
    """Returns f16 or bf16 (with `fp8`, also f8E4M3FN or f8E5M2: wgmma's) when every load of
    both operand sides reads that type (with `fp8`, block scales aside: `block_scales.py`) and
    the contraction sums its products, else None (the contraction is left to other rules)."""
    loads = [o for op in (*c.a_side, *c.b_side) for o in op.walk() if isinstance(o, memref.LoadOp)]
    if fp8:  # an FP8 operand's f32 block scales are applied per K step
        scales = block_scale_loads(c)
        loads = [load for load in loads if load not in scales]
    types = {load.memref.type.element_type for load in loads}  # type: ignore[attr-defined]
    kinds = (Float16Type, BFloat16Type, *((Float8E4M3FNType, Float8E5M2Type) if fp8 else ()))
    if len(types) != 1 or not isinstance(element := types.pop(), kinds):
        return None
    return element if sums_products(c) else None


def tensor_core_contraction(c: Contraction | None, fp8: bool = False) -> Contraction | str:
    """A rule's match of a contraction on f16/bf16 tensor cores (with `fp8`, 8-bit floats
    too): `c`, or why not."""
    if c is None:
        return "not a contraction"
    if tensor_core_type(c, fp8) is None:
        kinds = "f16, bf16 or 8-bit float" if fp8 else "f16 or bf16"
        return f"not a sum of products of {kinds} operands (one type)"
    return c


def sums_products(c: Contraction) -> bool:
    """Tells whether a contraction sums the products of its two operand sides (what a
    tensor-core `mma` computes): its combine region is `yield a + b` of its two arguments."""
    if {c.product.operands[0], c.product.operands[1]} != {c.a_value, c.b_value}:
        return False
    combine = c.reduce.combine.block
    ops = list(combine.ops)
    if len(ops) != 2 or not isinstance(add := ops[0], arith.AddfOp):
        return False
    return {add.lhs, add.rhs} == set(combine.args) and list(ops[1].operands) == [add.result]


class MmaSyncRule(Rule[Contraction, MmaTiles]):
    """Tiles an f16/bf16 contraction over blocks, warps and tensor-core fragments."""

    name = "mma_sync"
    reads = "bm=0,64,128,256 bn=0,64,128,256 bk=0,32,64 vec stages splitk store=auto,direct,smem"
    plan_type = MmaTiles
    selector = ("mma", "sync")

    def match(self, kernel: loop.KernelOp) -> Contraction | str:
        return tensor_core_contraction(match_contraction(kernel))

    def plan(self, kernel: loop.KernelOp, c: Contraction, knobs: Knobs) -> MmaTiles | str:
        batch, m, n, _ = c.extents
        t = block_and_warp_tiles(knobs, batch, m, n, self.target.sms, quarter=True)
        t = replace(t, vec=knobs.vec or 8)
        split = SPLIT_PARTIAL in kernel.attributes
        t = replace(t, stages=knobs.stages or ring_depth(t, c.extents, self.target.sms, split))
        chosen = replace(t, store=mma_store(knobs.store, c))
        refusal = mma_tile_refusal(chosen, self.target)
        if refusal and knobs.store == "auto":  # no room to stage: direct
            chosen, refusal = t, mma_tile_refusal(t, self.target)
        return refusal or chosen

    def check(self, kernel: loop.KernelOp, c: Contraction, plan: MmaTiles) -> str | None:
        return mma_tile_refusal(plan, self.target)

    def emit(
        self, kernel: loop.KernelOp, c: Contraction, t: MmaTiles, rewriter: PatternRewriter
    ) -> None:
        element = tensor_core_type(c)
        assert element is not None
        batch, m, n, _ = c.extents
        new, em, mapping = new_kernel(
            kernel, (-(-n // t.bn), -(-m // t.bm), batch), (t.threads, 1, 1)
        )
        MmaEmitter(em, c, t, element, mapping).emit()
        replace_kernel(rewriter, kernel, new)


@dataclass
class _Side:
    """One staged operand: its loop-level ops, the index it spans besides K, and its buffer."""

    ops: list[Operation]
    value: SSAValue
    iv: SSAValue
    origin: SSAValue
    extent: int
    tile: int
    width: int
    k_major: bool
    """True: shared `[outer][BK]` (k contiguous); False: `[BK][outer]`."""
    smem: SSAValue | None = None


class MmaEmitter:
    """Emits the tensor-core contraction for one block (`tf32.py` derives the TF32 one)."""

    k_step = MMA_K
    """K per `mma.sync`."""

    def __init__(
        self, em: Emitter, c: Contraction, t: MmaTiles, element: Attribute, mapping: Mapping
    ) -> None:
        self.em, self.c, self.t, self.element, self.mapping = em, c, t, element, mapping
        self.batch, self.m, self.n, self.k = c.extents
        self.k_iv = c.reduce.body.block.args[0]

    def emit(self) -> None:
        em, c, t, mapping = self.em, self.c, self.t, self.mapping
        for op in c.prologue:
            em.op(op.clone(value_mapper=mapping))
        self.tid = em.value(tile.ThreadIdOp("x"))
        m0 = em.mul(em.value(tile.BlockIdOp("y")), t.bm)
        n0 = em.mul(em.value(tile.BlockIdOp("x")), t.bn)
        if len(c.nest.extents) == 3:
            mapping[c.nest.body.block.args[0]] = em.value(tile.BlockIdOp("z"))
        a = self._side(c.a_side, c.a_value, c.m_iv, m0, self.m, t.bm)
        b = self._side(c.b_side, c.b_value, c.n_iv, n0, self.n, t.bn)
        lane, warp = em.rem(self.tid, WARP), em.div(self.tid, WARP)
        self.row0 = em.mul(em.div(warp, t.bn // t.wn), t.wm)
        self.col0 = em.mul(em.rem(warp, t.bn // t.wn), t.wn)
        # ldmatrix.x4: lanes 8q..8q+7 address the 8 rows of matrix q; see _fragments.
        self.r8 = em.rem(lane, 8)
        self.lo8 = em.mul(em.rem(em.div(lane, 8), 2), 8)
        self.hi8 = em.mul(em.div(lane, 16), 8)
        mi, nj = t.wm // MMA_M, t.wn // MMA_N
        acc = em.value(tile.AllocOp(tile.memref_in([mi, nj, 4], f32, tile.REGISTERS)))
        init = mapping.get(c.reduce.init[0], c.reduce.init[0])
        for i in range(mi):
            for j in range(nj):
                for r in range(4):
                    self._store(init, acc, i, j, r)
        if t.stages == 1:
            self._single_stage_k_loop(a, b, acc)
        else:
            self._register_ring_k_loop(a, b, acc)
        self._epilogue(acc, em.add(m0, self.row0), em.add(n0, self.col0), lane)

    def _single_stage_k_loop(self, a: _Side, b: _Side, acc: SSAValue) -> None:
        """Each K step's tiles loaded, stored to shared memory, then multiplied."""
        em, t = self.em, self.t
        staged = [(side, self._registers(side)) for side in (a, b)]
        with em.for_loop(0, self.k, t.bk) as (k0, _, _):
            for side, registers in staged:
                self._load(side, k0, registers)
                self._put(side, registers)
            em.op(tile.BarrierOp())
            self._multiply_step(a, b, acc)
            em.op(tile.BarrierOp())
            em.op(scf.YieldOp())

    def _register_ring_k_loop(self, a: _Side, b: _Side, acc: SSAValue) -> None:
        """The K loop with the next `stages - 1` steps' tiles in registers: slot j of the ring
        holds step j of each group of `stages - 1` steps; a loop iteration runs one group,
        unrolled, so each slot is named by a constant (registers indexed at run time would go
        to local memory). Each step stores its slot to shared memory, then refills the slot
        with the step `stages - 1` ahead before its `mma`s. Steps of the last group past K are
        skipped (block-uniform, barriers included)."""
        em, t = self.em, self.t
        ahead = t.stages - 1
        ring = [[(side, self._registers(side)) for side in (a, b)] for _ in range(ahead)]
        for j, slot in enumerate(ring):
            for side, registers in slot:
                self._load(side, em.index(j * t.bk), registers)
        group = ahead * t.bk
        tail = self.k % group  # K of the last group, where it is short of one
        with em.for_loop(0, self.k, group) as (k0, _, _):
            for j, slot in enumerate(ring):
                step = em.add(k0, j * t.bk)
                past_k = 0 < tail <= j * t.bk  # in the last group, step j lies past K
                with em.when([em.less(step, self.k)] if past_k else []):
                    for side, registers in slot:
                        self._put(side, registers)
                    em.op(tile.BarrierOp())
                    for side, registers in slot:
                        self._load(side, em.add(step, group), registers)
                    self._multiply_step(a, b, acc)
                    em.op(tile.BarrierOp())
            em.op(scf.YieldOp())

    def _multiply_step(self, a: _Side, b: _Side, acc: SSAValue) -> None:
        """The `mma`s of one K step of `bk` from the shared tiles."""
        em, t = self.em, self.t
        with em.for_loop(0, t.bk, self.k_step, unroll=True) as (kk, _, _):
            self._multiply(a, b, kk, acc)
            em.op(scf.YieldOp())

    def _side(
        self,
        ops: list[Operation],
        value: SSAValue,
        iv: SSAValue,
        origin: SSAValue,
        extent: int,
        size: int,
    ) -> _Side:
        """Picks a side's staging orientation (along its contiguous index) and allocates it."""
        t = self.t
        along_k = vector_width(ops, self.k_iv, t.bk, t.vec)
        along_k = along_k if self.k % along_k == 0 else 1
        along_outer = vector_width(ops, iv, size, t.vec)
        along_outer = along_outer if extent % along_outer == 0 else 1
        k_major = along_k >= along_outer
        side = _Side(ops, value, iv, origin, extent, size, max(along_k, along_outer), k_major)
        shape = self._shape(size, k_major)
        side.smem = self.em.value(tile.AllocOp(tile.memref_in(shape, self.element, tile.SHARED)))
        return side

    def _shape(self, size: int, k_major: bool) -> list[int]:
        """The shared tile of a side: `[outer][BK + pad]` or `[BK][outer + pad]`."""
        return [size, self.t.bk + PAD] if k_major else [self.t.bk, size + PAD]

    def _copies(self, side: _Side) -> tuple[int, int, int]:
        """A side's tile as (its contiguous extent, the other, vectors each thread copies)."""
        t = self.t
        fast, slow = (t.bk, side.tile) if side.k_major else (side.tile, t.bk)
        return fast, slow, -(-slow * fast // side.width // t.threads)

    def _registers(self, side: _Side) -> SSAValue:
        """The registers holding a thread's share of one K step of a side."""
        count = self._copies(side)[2]
        return self.em.value(
            tile.AllocOp(tile.memref_in([count, side.width], self.element, tile.REGISTERS))
        )

    def _copy(self, side: _Side, i: SSAValue) -> tuple[SSAValue, SSAValue, SSAValue | None]:
        """Where copy `i` of this thread lands in the side's tile: (k, outer) offsets, and
        whether it is a copy at all where the tile's vectors do not divide among the threads."""
        em, width = self.em, side.width
        fast_extent, slow_extent, count = self._copies(side)
        e = em.add(self.tid, em.mul(i, self.t.threads))
        fast = em.mul(em.rem(e, fast_extent // width), width)
        slow = em.div(e, fast_extent // width)
        kk, oo = (fast, slow) if side.k_major else (slow, fast)
        vectors = slow_extent * fast_extent // width
        real = None if vectors == count * self.t.threads else em.less(e, vectors)
        return kk, oo, real

    def _load(self, side: _Side, k0: SSAValue, registers: SSAValue) -> None:
        """Evaluates this thread's copies of a side's outer × BK tile at K offset `k0`, rounded
        to the element type and zero outside the operand, into `registers`."""
        em, width = self.em, side.width
        with em.for_loop(0, self._copies(side)[2], 1, unroll=True) as (i, _, _):
            kk, oo, real = self._copy(side, i)
            k, o = em.add(k0, kk), em.add(side.origin, oo)
            inside = [em.less(k, self.k), em.less(o, side.extent), *([real] if real else [])]
            types = [self.element] * width
            with em.if_(em.all_of(inside), types) as (then_block, else_block, if_op):
                with em.into(then_block):
                    local = dict(self.mapping) | {self.k_iv: k, side.iv: o}
                    fast_iv = self.k_iv if side.k_major else side.iv
                    lanes = LaneEmitter(em, fast_iv, k if side.k_major else o, width).emit(
                        [*side.ops, loop.YieldOp(side.value)], local
                    )
                    em.op(scf.YieldOp(*[self._narrow(lane[0]) for lane in lanes]))
                assert else_block is not None
                with em.into(else_block):
                    zero = em.value(arith.ConstantOp(FloatAttr(0.0, self.element)))
                    em.op(scf.YieldOp(*[zero] * width))
            for lane, value in enumerate(if_op.results):
                em.op(memref.StoreOp.get(value, registers, [i, em.index(lane)]))
            em.op(scf.YieldOp())

    def _put(self, side: _Side, registers: SSAValue) -> None:
        """Stores this thread's copies of a side's tile from `registers` to shared memory."""
        em, width = self.em, side.width
        assert side.smem is not None
        with em.for_loop(0, self._copies(side)[2], 1, unroll=True) as (i, _, _):
            kk, oo, real = self._copy(side, i)
            with em.when([real] if real else []):
                values = [
                    em.value(memref.LoadOp.get(registers, [i, em.index(lane)]))
                    for lane in range(width)
                ]
                index = [oo, kk] if side.k_major else [kk, oo]
                if width == 1:
                    em.op(memref.StoreOp.get(values[0], side.smem, index))
                else:
                    em.op(tile.VectorStoreOp(values, side.smem, index))
            em.op(scf.YieldOp())

    def _narrow(self, value: SSAValue) -> SSAValue:
        """Returns a side value as the element type: the loaded value itself when it was only
        widened (exact), else rounded to nearest even."""
        if isinstance(value.owner, arith.ExtFOp) and value.owner.input.type == self.element:
            return value.owner.input
        return self.em.value(arith.TruncFOp(value, self.element))

    def _fragments(self, side: _Side, outer: SSAValue, kk: SSAValue, a: bool) -> list[SSAValue]:
        """Loads the 16(outer)×16(k) block at (outer, kk) of a side with one `ldmatrix.x4`:
        for A the mma's a0..a3 (rows 0-7 then 8-15, k 0-7 then 8-15), for B b0, b1 of the n8
        tile at `outer`, then of the one 8 further. Lane 8q + r addresses row r of matrix q; a
        `[BK][outer]` side is read transposed."""
        em = self.em
        outer_offset, k_offset = (self.lo8, self.hi8) if a else (self.hi8, self.lo8)
        o, k = em.add(outer, outer_offset), em.add(kk, k_offset)
        if side.k_major:
            index = [em.add(o, self.r8), k]
        else:
            index = [em.add(k, self.r8), o]
        assert side.smem is not None
        return list(em.op(tile.LdMatrixOp(side.smem, index, not side.k_major)).results)

    def _multiply(self, a: _Side, b: _Side, kk: SSAValue, acc: SSAValue) -> None:
        """Accumulates one K step of 16 into every fragment of the warp tile."""
        em, t = self.em, self.t
        a_frags = [
            self._fragments(a, em.add(self.row0, i * MMA_M), kk, a=True)
            for i in range(t.wm // MMA_M)
        ]
        b_frags: list[list[SSAValue]] = []
        for jj in range(t.wn // (2 * MMA_N)):
            regs = self._fragments(b, em.add(self.col0, jj * 2 * MMA_N), kk, a=False)
            b_frags += [regs[:2], regs[2:]]
        for i, a_regs in enumerate(a_frags):
            for j, b_regs in enumerate(b_frags):
                old = [em.value(memref.LoadOp.get(acc, self._at(i, j, r))) for r in range(4)]
                mma = em.op(tile.MmaSyncOp(self.element, a_regs, b_regs, old))
                for r, new in enumerate(mma.results):
                    self._store(new, acc, i, j, r)

    def _at(self, *indices: int) -> list[SSAValue]:
        return [self.em.index(i) for i in indices]

    def _store(self, value: SSAValue, acc: SSAValue, i: int, j: int, r: int) -> None:
        self.em.op(memref.StoreOp.get(value, acc, self._at(i, j, r)))

    def _epilogue(self, acc: SSAValue, row0: SSAValue, col0: SSAValue, lane: SSAValue) -> None:
        """Applies the epilogue to each accumulator from the m16n8 fragment layout."""
        em, t, c = self.em, self.t, self.c
        if t.store == "smem":
            self._staged_epilogue(acc, row0, col0, lane)
            return
        width = store_width(self.c)
        group = em.add(row0, em.div(lane, 4))
        pair = em.add(col0, em.mul(em.rem(lane, 4), 2))
        result = c.reduce.res[0]
        for i in range(t.wm // MMA_M):
            for half in range(2):
                m = em.add(group, i * MMA_M + 8 * half)
                for j in range(t.wn // MMA_N):
                    for j0 in range(0, 2, width):
                        n = em.add(pair, j * MMA_N + j0)
                        with em.when([em.less(m, self.m), em.less(n, self.n)]):
                            values = [
                                em.value(memref.LoadOp.get(acc, self._at(i, j, 2 * half + r)))
                                for r in range(j0, j0 + width)
                            ]
                            local = dict(self.mapping) | {c.m_iv: m}
                            LaneEmitter(em, c.n_iv, n, width).emit(
                                c.epilogue, local, [{result: v} for v in values]
                            )

    def _staged_epilogue(
        self, acc: SSAValue, row0: SSAValue, col0: SSAValue, lane: SSAValue
    ) -> None:
        """Applies the epilogue after passing each 16-row strip of the warp's tile through its
        own f32 tile of shared memory (`MmaTiles.staging_shape`): the lanes write their
        fragments there, and read back `width` consecutive columns each, a row's wn columns
        over wn / width lanes, so each store covers whole rows of the warp's tile (32
        consecutive elements of one row where the output takes single elements)."""
        em, t, c = self.em, self.t, self.c
        width = store_width(self.c)
        staging = em.value(tile.AllocOp(tile.memref_in(t.staging_shape, f32, tile.SHARED)))
        warp = em.div(self.tid, WARP)
        group = em.div(lane, 4)
        pair = em.mul(em.rem(lane, 4), 2)
        per_row = t.wn // width  # lanes reading one row
        read_row = em.div(lane, per_row)
        read_column = em.mul(em.rem(lane, per_row), width)
        n = em.add(col0, read_column)
        result = c.reduce.res[0]
        for i in range(t.wm // MMA_M):
            for half in range(2):
                row = em.add(group, 8 * half)
                for j in range(t.wn // MMA_N):
                    for e in range(2):
                        value = em.value(memref.LoadOp.get(acc, self._at(i, j, 2 * half + e)))
                        column = em.add(pair, j * MMA_N + e)
                        em.op(memref.StoreOp.get(value, staging, [warp, row, column]))
            em.op(tile.WarpBarrierOp())
            for rows in range(0, MMA_M, WARP // per_row):
                row = em.add(read_row, rows)
                m = em.add(row0, em.add(row, i * MMA_M))
                with em.when([em.less(m, self.m), em.less(n, self.n)]):
                    values = [
                        em.value(memref.LoadOp.get(staging, [warp, row, em.add(read_column, w)]))
                        for w in range(width)
                    ]
                    local = dict(self.mapping) | {c.m_iv: m}
                    LaneEmitter(em, c.n_iv, n, width).emit(
                        c.epilogue, local, [{result: v} for v in values]
                    )
            em.op(tile.WarpBarrierOp())  # every lane has read the strip the next one overwrites
