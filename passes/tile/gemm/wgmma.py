"""Schedule rule for f16/bf16 and FP8 GEMMs on Hopper tensor cores: TMA → swizzled smem →
`wgmma`.

Taken when the `mma=wgmma` knob is set and a contraction's two operand sides are plain loads of
one f16/bf16 type (TMA copies raw bytes): A `[b?, M, K]`, B `[b?, K, N]` (N-major) or
`[b?, N, K]` (K-major); or of one 8-bit float type (f8E4M3FN, f8E5M2, widened to f32 where
they are loaded: `matmul(cast(a), cast(b))`), B K-major only (the tensor cores do not
transpose 8-bit operands), one m64nNk32 product per 32 of K. Each buffer's rows must be a
multiple of 16 bytes (TMA's stride rule; where they are not, `wgmma_staged.py` copies a 16-bit
operand into a padded workspace and the GEMM reading it
comes back here); the batch is the grid's z dimension. A contraction the rule cannot take
raises a diagnostic saying why, since the knob asked for it.

A block computes a BM×BN output tile (BM = 64 per consumer warpgroup, 1 or 2 of them) walking
K in steps of 64 elements (128 of 8-bit floats, 32 of f32): one 128-byte swizzled row of
shared memory per row of A (and of a
K-major B), or per K row of a 64-column chunk of an N-major B. Each K step occupies one of
`stages` ring slots in dynamic shared memory, guarded by two mbarriers: `full[s]` completes
when the TMA bytes of the slot landed, `empty[s]` when every consumer thread has finished
reading it. Out-of-range rows, columns and K are zero-filled by TMA; the epilogue is guarded.

With `ws=1` warpgroup 0 is the producer (`setmaxnreg` 40; one thread issues the TMA copies,
`stages` steps ahead) and warpgroups 1.. the consumers (232), issuing one m64nBNk16 `wgmma` per
16 of K. With `ws=0` the consumers are the whole block and thread 0 issues each copy `stages -
1` steps ahead once its slot is released. Consumers keep one wgmma group in flight
(`wgmma.wait_group 1`) and release the previous step's slot behind it. FP8 K steps are
promoted where the output is f32 or block scales apply (`promote`, `_promoted_k_loop`): a
step's products are summed in registers of their own, then added to the f32 accumulators, so
blocks are at most 192 columns wide (128 with B block scales).

A paired contraction (`paired.py`) runs as a dual GEMM: accumulator columns 0..bn/2 hold the
first product and bn/2..bn the second, for bn/2 output columns; the producer copies each B
tile into its half of the slot by that B's own tensor map, and one wgmma multiplies A by both.
The thread that holds column c of one product holds column c of the other, so the epilogue
combines them in registers.

With `streamk=tail` persistent blocks share the last waves' K steps (`wgmma_stream_k.py`):
a piece of a tile that does not start it writes its partial sums to a workspace and sets its
block's flag; the block holding the tile's first steps adds them before the epilogue.

The epilogue runs on the accumulators where wgmma leaves them (`store=direct`) or after each
consumer warpgroup staged them in shared memory (`store=smem`, `_staged_epilogue`), issuing
its loads of other buffers one chunk ahead (`epilogue_prefetch.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from math import prod

from xdsl.dialects import arith, memref, scf
from xdsl.dialects import math as fmath
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, f32, i32, i64
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop, tile
from tinyopt.dialects.graph import FP8_SCALE_BLOCK as SCALE_BLOCK
from tinyopt.passes.tile.gemm.contraction_match import Contraction, match_contraction
from tinyopt.passes.tile.gemm.contraction_plan import stream_k_blocks
from tinyopt.passes.tile.gemm.stream_k import shared_k_kernels
from tinyopt.passes.tile.emit import (
    Emitter,
    LaneEmitter,
    Mapping,
    element_bytes,
    index_constant,
    vector_width,
)
from tinyopt.passes.tile.gemm.epilogue_prefetch import EpiloguePrefetch, prefetches_by_row
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.rule import Rule
from tinyopt.passes.tile.gemm.mma_sync import tensor_core_contraction, tensor_core_type
from tinyopt.passes.tile.gemm.paired import PairedContraction, match_paired_contraction
from tinyopt.passes.tile.target import Target
from tinyopt.passes.tile.gemm.wgmma_tma_store import (
    TmaEpilogue,
    output_map,
    tma_output,
    tma_store_refusal,
)
from tinyopt.passes.tile.gemm.wgmma_stream_k import (
    Piece,
    StreamKWalk,
    shared_tiles,
    stream_k_refusal,
)
from tinyopt.passes.tile.gemm.wgmma_cluster import (
    cluster_chunk,
    cluster_epilogue,
    cluster_refusal,
    clustered_tiles,
)
from tinyopt.passes.tile.gemm.wgmma_swap import swapped_tiles
from tinyopt.passes.tile.gemm.wgmma_swapped import (
    SWAPPED_STAGE_STRIDE,
    swapped_epilogue,
    swapped_k_loop,
    swapped_produce,
    swapped_staged_epilogue,
)
from tinyopt.passes.tile.gemm.wgmma_multicast import (
    MULTICASTS,
    cluster_dims,
    k_halves,
    multicast_refusal,
    multicast_tiles,
)
from tinyopt.passes.tile.gemm.wgmma_staged import off_sectors, steps_aside
from tinyopt.passes.tile.gemm.wgmma_tf32_split import TF32Split
from tinyopt.passes.tile.gemm.wgmma_plan import (
    ATOM,
    BK,
    OVERLAPPED_WIDEST,
    PROMOTED_HALVES,
    PROMOTED_WIDEST,
    SCALED_B_WIDEST,
    scaled_b_width,
    STAGE_COLUMNS,
    SWIZZLE,
    WARPGROUP,
    Operands,
    ScaleOperand,
    WgmmaTiles,
    _fail,
    approximate_math,
    choose_wgmma_tiles,
    deepened,
    evicted_operands,
    k_step,
    l2_promotion,
    plain_operands,
    promoted,
    registers,
    tile_count,
    wgmma_tile_refusal,
)


class WgmmaRule(Rule[Contraction, WgmmaTiles]):
    """Schedules an f16/bf16 GEMM as a TMA + mbarrier + wgmma pipeline (Hopper, sm_90a); a
    paired contraction as one dual GEMM."""

    name = "wgmma"
    reads = "bm=0,64,128,192 bn=0,64,128,192,256 bk=0 stages=0,2,3,4,5,6 ws "
    reads += "store=auto,direct,tma persistent group=0,1,8,16 fastmath=auto,off dual=auto,off "
    reads += "promote=auto poverlap=auto pturns=auto,off pscales=auto streamk=auto,tail "
    reads += "evict=auto,off,ab multicast=auto,off,a,b l2promo=auto,0,256 swap=auto,on"
    plan_type = WgmmaTiles
    selector = ("mma", "wgmma")
    takes_paired = True

    def match(self, kernel: loop.KernelOp) -> Contraction | str:
        return tensor_core_contraction(
            match_contraction(kernel) or match_paired_contraction(kernel), fp8=True
        )

    def plan(self, kernel: loop.KernelOp, c: Contraction, knobs: Knobs) -> WgmmaTiles | str:
        dual = isinstance(c, PairedContraction)
        if dual and knobs.splitk > 1:
            return f"a dual GEMM does not split K (splitk={knobs.splitk})"
        if dual and tensor_core_type(c.second) != tensor_core_type(c):
            return "a dual GEMM needs f16 or bf16 operands, one type for both products"
        batch, m, n, k = c.extents
        if isinstance(operands := plain_operands(c, k, n), str):
            return operands
        if why := _fp8_refusal(c, operands):
            return why
        if not dual and (why := steps_aside(kernel, c, knobs, self.target)):
            return _fail(why)
        fp8 = tensor_core_type(c, fp8=True).bitwidth == 8  # type: ignore[union-attr]
        if knobs.swap == "on":
            return swapped_tiles(c, knobs, dual, fp8, self.target)
        results = [c.reduce.res[0]] + ([c.second.reduce.res[0]] if dual else [])
        by_row = prefetches_by_row(c.epilogue, results, c.m_iv)
        if knobs.promote == "on" and not fp8:
            return _fail(
                "promote=on applies to 8-bit float operands (the tensor cores sum f16/bf16 "
                "products in f32)"
            )
        scaled = operands.a_scale or operands.b_scale
        if scaled and knobs.promote == "off":
            return _fail(
                "applies block scales per K step (promote=on): promote=off sums all of K in "
                "the tensor cores"
            )
        if knobs.pscales == "pair" and not scaled:
            return _fail("pscales=pair reads the block scales of FP8 operands: here there are none")
        overlap = knobs.poverlap == "on"  # auto: off (it lost where timed: docs/knobs.md)
        asks = bool(scaled) or (overlap and knobs.promote != "off")  # promote=auto: on
        promote = fp8 and (asks or promoted(knobs.promote, c))
        if operands.b_scale and knobs.bn and not scaled_b_width(knobs.bn):
            return _fail(
                f"takes B block scales with bn dividing {SCALE_BLOCK}, {SCALED_B_WIDEST} or "
                f"{PROMOTED_HALVES} (a block's columns within two scale blocks), got bn={knobs.bn}"
            )
        widest = (SCALED_B_WIDEST if operands.b_scale else PROMOTED_WIDEST) if promote else 256
        if overlap:
            if not promote:
                return _fail(
                    "poverlap=on overlaps promoted K steps of 8-bit float operands (promote=on)"
                )
            widest = OVERLAPPED_WIDEST
        tall = not (dual or fp8 or by_row or knobs.streamk == "tail")
        tall = tall and knobs.splitk_mode != "cluster"
        t = choose_wgmma_tiles(
            knobs, batch, m, n, self.target, dual, by_row, widest, promote, tall, overlap
        )
        if isinstance(t, str):
            return t
        if knobs.splitk_mode == "cluster" and knobs.splitk > 1:
            t = clustered_tiles(t, c, knobs, fp8, self.target)
            if isinstance(t, str):
                return t
            if why := wgmma_tile_refusal(t, self.target):
                return why
        if not knobs.stages:
            t = deepened(t, batch, m, n, cluster_chunk(c, t.cluster), self.target)
        t = replace(
            t,
            fastmath="on" if approximate_math(knobs.fastmath, c) else "off",
            evict=evicted_operands(knobs.evict, t, m, n),
            l2promo=l2_promotion(knobs.l2promo),
            pturns=_turns(knobs.pturns, t),
            pscales=_scale_reads(knobs.pscales, operands),
        )
        t = replace(t, store=_store(knobs.store, t, kernel, c, self.target))
        if why := wgmma_tile_refusal(t, self.target) or tma_store_refusal(kernel, c, t):
            return why
        bits = tensor_core_type(c, fp8=True).bitwidth  # type: ignore[union-attr]
        b_args = kernel.body.block.args[operands.b]
        b_off = off_sectors(b_args.type)  # type: ignore[arg-type]
        if knobs.streamk == "on":
            return _fail("shares the K steps of the last waves only (streamk=tail)")
        if knobs.streamk != "tail" or knobs.multicast in MULTICASTS:
            # multicast=a/b/a4/b4 with streamk=tail: refused by name (`multicast_refusal`)
            shared = t if knobs.streamk != "tail" else replace(t, streamk="tail")
            return multicast_tiles(
                shared,
                knobs.multicast,
                operands,
                c.extents,
                bits,
                b_off,
                self.target,
                bool(knobs.stages),
            )
        tiles = tile_count(t, batch, m, n)
        steps = -(-k // k_step(tensor_core_type(c, fp8=True)))  # type: ignore[arg-type]
        clashes = [
            setting
            for setting, clash in (
                ("ws=0", not t.ws),
                ("a dual GEMM", dual),
                (f"a cluster split of {t.cluster}", t.cluster > 1),
                ("persistent=0", knobs.persistent == 0),
            )
            if clash
        ]
        if clashes:
            return _fail(
                "runs streamk=tail on persistent blocks with a producer warpgroup (ws=1), on no "
                f"dual GEMM and no split over a cluster; not with {', '.join(clashes)}"
            )
        if why := stream_k_refusal(tiles, self.target.sms, steps):
            return _fail(why)
        shared = replace(t, persistent=1, streamk="tail")
        return wgmma_tile_refusal(shared, self.target) or shared

    def rewrite(
        self, module: ModuleOp, kernel: loop.KernelOp, c: Contraction, plan: WgmmaTiles
    ) -> list[loop.KernelOp]:
        """`streamk=tail`: the kernel with the workspace (per block, each accumulator register's
        row of the consumer threads' partial sums, so a warp's store or load of one register is
        128 contiguous bytes) and the blocks' flags, after the kernel zeroing the flags."""
        if plan.streamk == "off" or stream_k_blocks(kernel)[0]:
            return []
        batch, m, n, _ = c.extents
        tiles = tile_count(plan, batch, m, n)
        blocks = launch_grid(plan, batch, m, n, self.target)[0]
        per_block = [plan.bn // 2, WARPGROUP * plan.consumers]
        shared = shared_tiles(tiles, blocks)
        return list(shared_k_kernels(module, kernel, c, per_block, blocks, shared))

    def check(self, kernel: loop.KernelOp, c: Contraction, plan: WgmmaTiles) -> str | None:
        batch, m, n, k = c.extents
        if (plan.dual == "on") != isinstance(c, PairedContraction):
            return _fail('runs a paired contraction with dual = "on" and no other with it')
        operands = plain_operands(c, k, n)
        if isinstance(operands, str):
            return operands
        fp8 = tensor_core_type(c, fp8=True).bitwidth == 8  # type: ignore[union-attr]
        if plan.promote == "on" and not fp8:
            return _fail('promotes K steps of 8-bit float operands only (promote = "on")')
        if (operands.a_scale or operands.b_scale) and plan.promote != "on":
            return _fail('applies block scales per K step (promote = "on")')
        if operands.b_scale and not scaled_b_width(plan.bn):
            return _fail(
                f"takes B block scales with bn dividing {SCALE_BLOCK}, {SCALED_B_WIDEST} or "
                f"{PROMOTED_HALVES}, got bn={plan.bn}"
            )
        if (plan.streamk == "tail") != bool(stream_k_blocks(kernel)[0]):
            return _fail(
                "decides streamk when the kernel is planned (stream-K adds its workspace and "
                "flags): set it as an option of plan or tile, not in a plan"
            )
        if plan.cluster > 1:
            partial = operands.splits > 1
            if why := cluster_refusal(c, plan.cluster, fp8, partial):
                return why
        shared = plan.sharers > 1 or plan.cluster > 1 or plan.streamk != "off"
        if plan.swap == "on" and (fp8 or plan.dual == "on" or plan.store == "tma" or shared):
            return _fail(
                "swaps the sides (swap) of one f16/bf16 GEMM whose blocks store direct or "
                "staged, each its own tiles"
            )
        if plan.multicast != "off":
            bits = tensor_core_type(c, fp8=True).bitwidth  # type: ignore[union-attr]
            if why := multicast_refusal(plan, operands, m, n, bits):
                return why
        return (
            _fp8_refusal(c, operands)
            or wgmma_tile_refusal(plan, self.target)
            or tma_store_refusal(kernel, c, plan)
        )

    def emit(
        self, kernel: loop.KernelOp, c: Contraction, t: WgmmaTiles, rewriter: PatternRewriter
    ) -> None:
        element = tensor_core_type(c, fp8=True)
        assert element is not None
        emit_wgmma_gemm(kernel, c, t, element, self.target, rewriter, t.swap == "on")


def narrow_rows(width: int, epilogue: list[Operation]) -> bool:
    """Whether the staged epilogue stores fewer than 8 elements and 16 bytes a lane
    (`width` elements of what it stores), so its lanes run along the output rows
    (`_staged_epilogue`): bf16/f16 rows of an odd number of elements, or of 2, 4 or 6 mod 8; f32
    rows of an odd number or of 2 mod 4. On an H100 (benchmarks/RESULTS.md, thirty-eighth
    session run 4) single elements stored along the rows ran 27 misaligned linears 1.158 →
    1.279× cuBLAS. Pairs and fours kept a thread's 8 columns of one row (2-8 bytes into each of
    16-20 sectors a store) until the fifty-second session; there the swapped plan, whose
    staged epilogue stores along the rows, ran 1.22-1.68× as fast as this one at three bf16
    outputs of 6 mod 8 (693×5470×224, 2448×1102×205, 7431×5814×3183). Storing along the
    rows here is untimed."""
    stored = [
        element_bytes(op.memref.type.element_type)  # type: ignore[attr-defined]
        for top in epilogue
        for op in top.walk()
        if isinstance(op, memref.StoreOp)
    ]
    return width < 8 and width * min(stored, default=16) < 16


def _scale_reads(knob: str, operands: Operands) -> str:
    """`pscales` resolved: `auto` reads FP8 block scales a pair of steps at a time (`pair`)
    wherever there are block scales. On an H100 (benchmarks/RESULTS.md, forty-seventh
    session, calls 1-3), × `_scaled_mm`, `step` → `pair`: 4096³ 0.835 → 0.889 and 0.865 →
    0.916, 8192³ 0.939 → 0.967, 16384×4096×14336 0.895 → 0.916."""
    if knob != "auto":
        return knob
    return "pair" if operands.a_scale or operands.b_scale else "step"


def _store(knob: str, t: WgmmaTiles, kernel: loop.KernelOp, c: Contraction, target: Target) -> str:
    """`store` resolved: `auto` takes the TMA-store epilogue (`wgmma_tma_store.py`) on a
    persistent grid whose output it can store, where its output tiles fit beside the ring
    the plan has; else the staged epilogue (`choose_wgmma_tiles`). On an H100
    (benchmarks/RESULTS.md, forty-seventh session call 4: `bench_gemm_sweep.py` with and
    without `store=tma`, the 43 shapes both ran on wgmma) the persistent grids ran 1.013×
    as fast (geometric mean over 24; 4096³ 190.4 → 184.4 µs, 0.97 → 1.02× cuBLAS, Llama-3 8B
    down at 16384 rows 1.063×, 70B down 1.056×; 21 of 24 at least as fast, the slowest
    0.966×), grids of one block per tile 1.001× (0.961-1.094: a one-wave grid has no next
    tile to start while the boxes drain)."""
    if knob != "auto" or t.store != "smem" or not t.persistent:
        return t.store
    stored = replace(t, store="tma")
    if tma_store_refusal(kernel, c, stored) or stored.shared_bytes > target.dynamic_shared:
        return t.store
    return "tma"


def _turns(knob: str, t: WgmmaTiles) -> str:
    """`pturns` resolved: `auto` takes turns wherever two consumer warpgroups promote FP8
    steps. Measured on an H100 (benchmarks/RESULTS.md, 2026-12-07, forty-sixth session):
    block scales 2-8% faster (8192³ 1040 → 964 µs), per-tensor promoted steps 11% faster at
    8192³ and even at 4096³."""
    if knob == "auto":
        return "on" if t.promote == "on" and t.consumers == 2 else "off"
    return knob


def _fp8_refusal(c: Contraction, operands: Operands) -> str | None:
    """Why the GEMM of 8-bit float operands cannot run on wgmma, or None (or not FP8): their
    products read both operands K-major (no transpose), one GEMM at a time, K whole."""
    element = tensor_core_type(c, fp8=True)
    if element is None or element.bitwidth != 8:  # type: ignore[attr-defined]
        scaled = operands.a_scale or operands.b_scale
        return _fail("applies block scales to 8-bit float operands only") if scaled else None
    if isinstance(c, PairedContraction):
        return _fail(f"runs no dual GEMM of {element} operands")
    if operands.b_mn_major:
        return _fail(
            f"takes {element} B K-major only (B [N, K], as torch's linear and _scaled_mm hold "
            "it): the tensor cores do not transpose 8-bit operands"
        )
    if operands.splits > 1:
        return _fail(f"does not split K of {element} operands")
    if operands.b_scale and "row" in operands.b_scale.kinds:
        return _fail(
            f"takes B block scales of {SCALE_BLOCK}×{SCALE_BLOCK} (one per 128 columns and 128 "
            "of K), not one per column"
        )
    return None


def emit_wgmma_gemm(
    kernel: loop.KernelOp,
    c: Contraction,
    t: WgmmaTiles,
    element: Attribute,
    target: Target,
    rewriter: PatternRewriter,
    swapped: bool = False,
) -> None:
    """Replaces `kernel` by the wgmma GEMM of `c` on operands of `element` (f16/bf16, or f32
    split into TF32 pairs) with the tiling `t`; `swapped`: the block's consumer rows walk B's
    N and its columns A's M, the output tile transposed in the accumulators (`swap`: the
    3xTF32 rule's with a K-major B, A being B's rows split in registers; f16/bf16 with B
    either way, an N-major B's tile then wgmma's M-major A)."""
    batch, m, n, k = c.extents
    operands = plain_operands(c, k, n)
    assert not isinstance(operands, str)
    grid = launch_grid(t, batch, n, m, target) if swapped else launch_grid(t, batch, m, n, target)
    cluster = (1, 1, t.cluster) if t.cluster > 1 else cluster_dims(t)
    new, em, mapping = new_kernel(kernel, grid, (t.threads, 1, 1), cluster)
    new.attributes["tile.min_blocks"] = IntegerAttr(1, i64)
    a_rank, b_rank = (
        len(new.body.block.args[p].type.get_shape())  # type: ignore[attr-defined]
        for p in (operands.a, operands.b)
    )  # A may be shared by B's batch (`operand_buffers`)
    bk = k_step(element)
    rows, columns = (t.tile_n, t.bm) if swapped else (t.bm, t.tile_n)
    a_rows = rows // t.cluster_columns  # a block's share of a multicast A tile
    a_box = (*[1] * (a_rank - 2), a_rows, bk)
    b_rows = columns // t.cluster_rows  # of a multicast B tile
    k_rows = bk // t.cluster_rows if k_halves(t, operands.b_mn_major) else bk  # of an N-major chunk
    b_box = (*[1] * (b_rank - 2), *((k_rows, bk) if operands.b_mn_major else (b_rows, bk)))
    b_maps = [tile.TensorMapArg(b, b_box, SWIZZLE, t.l2promo) for b in operands.bs]
    a_map = tile.TensorMapArg(operands.a, a_box, SWIZZLE, t.l2promo)
    output = tma_output(kernel, c) if t.store == "tma" else None
    assert not isinstance(output, str)  # the rule's check refused it
    position = output[1] if output else None
    out_maps = [output_map(kernel, position)] if position is not None else []
    tile.set_tensor_maps(new, [a_map, *b_maps, *out_maps])
    args = list(new.body.block.args)
    _WgmmaEmitter(em, c, t, element, operands, mapping, args, swapped, position).emit()
    if t.fastmath == "on":
        for inner in new.walk():
            if isinstance(inner, fmath.ExpOp | arith.DivfOp):
                inner.properties["fastmath"] = APPROXIMATE
    replace_kernel(rewriter, kernel, new)


def launch_grid(t: WgmmaTiles, batch: int, m: int, n: int, target: Target) -> tuple[int, int, int]:
    """One block per (n, m, batch) tile, or with `persistent` one per SM (fewer when there
    are fewer tiles, but for `streamk=tail`, which shares their K steps), each walking tiles
    blockIdx.x, + gridDim.x, ...; with `multicast` the rows (B shared) or columns (A shared) of
    tiles rounded up to whole clusters, and a persistent grid whole clusters of blocks walking
    clusters of tiles, as many as run at once (`Target.cluster_slots`: 66 pairs or 30 clusters
    of four on 132 SMs; one cluster at least, on a one-SM target)."""
    rows = -(-(-(-m // t.bm)) // t.cluster_rows) * t.cluster_rows
    columns = -(-(-(-n // t.tile_n)) // t.cluster_columns) * t.cluster_columns
    tiles = (columns, rows, batch * t.cluster)
    if not t.persistent:
        return tiles
    if t.sharers > 1:
        clusters = max(target.cluster_slots(t.sharers), 1)
        return (t.sharers * min(clusters, prod(tiles) // t.sharers), 1, 1)
    sms = target.sms
    return (sms if t.streamk == "tail" else min(sms, prod(tiles)), 1, 1)


APPROXIMATE = arith.FastMathFlagsAttr([arith.FastMathFlag.APPROX_FUNC])

STREAM_K_BARRIER = 4
"""The consumer warpgroups' hardware barrier before a partial sum's flag (1 and 2 are the
staged epilogue's, 3 the TF32 split's)."""

TURN_BARRIERS = 6
"""The hardware barriers of the consumer warpgroups' turns (`pturns`): warpgroup g waits at
TURN_BARRIERS + g to issue a K step (5 is the swapped GEMM's vote)."""


class _WgmmaEmitter:
    """Emits the pipelined wgmma GEMM of one block."""

    def __init__(
        self,
        em: Emitter,
        c: Contraction,
        t: WgmmaTiles,
        element: Attribute,
        operands: Operands,
        mapping: Mapping,
        args: list[SSAValue],
        swapped: bool = False,
        output: int | None = None,
    ) -> None:
        self.em, self.c, self.t, self.element = em, c, t, element
        self.mapping = mapping
        self.swapped = swapped
        """The tiles' roles swapped (`emit_wgmma_gemm`): the ring's A tile holds B's rows, its
        B tile A's rows; m0 and n0 are then the block's first row of B and of A."""
        self.a_global = args[operands.a]
        self.product_a = self.a_global
        """The product's A (the ring's B tile's when `swapped`), which `evict` names "a"."""
        self.b_globals = [args[b] for b in operands.bs]
        self.batched = len(self.a_global.type.get_shape()) == 3  # type: ignore[attr-defined]
        if swapped:
            (b_global,) = self.b_globals
            self.a_global, self.b_globals = b_global, [self.a_global]
        self.results = [c.reduce.res[0]]
        """The K loops' sums, as the epilogue reads them (`WgmmaTiles.dual`)."""
        self.inits = [c.reduce.init[0]]
        if isinstance(c, PairedContraction):
            self.results.append(c.second.reduce.res[0])
            self.inits.append(c.second.reduce.init[0])
        self.mn_major = operands.b_mn_major and not swapped
        """The ring's B tile N-major: 64-column chunks of an N-major B."""
        self.a_mn_major = operands.b_mn_major and swapped
        """The ring's A tile M-major (`swapped`, an N-major B): 64-row chunks of B's N."""
        self.scales = [
            (args[scale.arg], scale) if scale else None
            for scale in (operands.a_scale, operands.b_scale)
        ]
        """A's and B's FP8 block scales (`block_scales.py`): each K step's products times
        the step's scales."""
        self.splits, self.chunk = operands.splits, operands.chunk
        self.k_base: SSAValue | int = 0
        """The block's first K element: its chunk's, in a split-K partial kernel or a block of
        a cluster splitting K (`wgmma_cluster.py`)."""
        self.batch, self.m, self.n, self.k = c.extents
        if t.cluster > 1:  # the chunks of K the cluster's blocks walk, as a partial kernel's
            self.splits, self.chunk = t.cluster, cluster_chunk(c, t.cluster)
        self.split = element == f32
        """f32 operands, each split into two TF32 values for three products (`wgmma_3xtf32.py`)."""
        self.bk = k_step(element)
        """K per step: one 128-byte swizzle row (64 16-bit or 32 f32 elements)."""
        self.steps = -(-(self.chunk if t.cluster > 1 else self.k) // self.bk)
        rows, columns = (self.n, self.m) if swapped else (self.m, self.n)
        self.n_tiles, self.m_tiles = -(-columns // t.tile_n), -(-rows // t.bm)
        self.m_units = -(-self.m_tiles // t.cluster_rows)
        self.n_units = -(-self.n_tiles // t.cluster_columns)
        """Rows and columns of what the launch walks: tiles, or a cluster's rows of tiles where
        B is multicast, its columns where A is."""
        self.rank: SSAValue | None = None
        """With `multicast`: the block's rank in its cluster (the cluster's row or column it
        computes)."""
        self.ring_steps: SSAValue | int = self.steps
        """The ring steps of the block's walk (all its tiles' K steps)."""
        self.turn: tuple[SSAValue, SSAValue] | None = None
        """With `pturns`: the hardware barriers of this consumer warpgroup's turn and of the
        other's (`TURN_BARRIERS`)."""
        self.walk: StreamKWalk | None = None
        """`streamk=tail`: the persistent blocks' walk over whole tiles, then shared ones."""
        self.stream_buffers = (args[-2], args[-1]) if t.streamk == "tail" else ()
        """With `streamk=tail`: the partial-sum workspace and the blocks' flags (the last
        buffers)."""
        self.output = args[output] if output is not None else None
        """With `store=tma`: the output argument, passed as a tensor map."""

    def emit(self) -> None:
        em, c, t = self.em, self.c, self.t
        for op in c.prologue:
            em.op(op.clone(value_mapper=self.mapping))
        self.tid = em.value(tile.ThreadIdOp("x"))
        if t.streamk == "tail":
            tiles = self.n_tiles * self.m_tiles * self.batch
            self.walk = StreamKWalk(em, tiles, self._blocks(), self.steps)
        if not t.persistent:
            x, y, z = (em.value(tile.BlockIdOp(d)) for d in "xyz")
            if t.cluster_rows > 1:  # the cluster along y: rows s·j .. s·j + s - 1 (s sharers)
                self.rank = em.rem(y, t.sharers)
                y = em.div(y, t.sharers)
            if t.cluster_columns > 1:  # along x: columns s·j .. s·j + s - 1
                self.rank = em.rem(x, t.sharers)
                x = em.div(x, t.sharers)
            if t.group == 1:
                self._unit_origin(x, y, z)
            else:
                self._unit_origin(*self._grouped(em.add(em.mul(y, self.n_units), x)), z)
        shared = tile.SHARED
        a_shape = (
            [t.stages, t.bm // self.bk, self.bk, self.bk]
            if self.a_mn_major
            else [t.stages, t.bm, self.bk]
        )
        self.a_smem = em.value(tile.AllocOp(tile.memref_in(a_shape, self.element, shared), True))
        b_shape = (
            [t.stages, t.b_columns // self.bk, self.bk, self.bk]
            if self.mn_major
            else [t.stages, t.bn, self.bk]
        )
        self.b_smem = em.value(tile.AllocOp(tile.memref_in(b_shape, self.element, shared), True))
        if self.split:
            split_a = None if self.swapped else a_shape  # swapped: A split in registers
            self.splitter = TF32Split(em, self, split_a, [t.stages, t.bn, self.bk])
        # A cluster's blocks keep all their shared memory dynamic: at one offset in each.
        clustered = t.cluster > 1
        dynamic_barriers = clustered or t.sharers > 1
        barriers = tile.memref_in([t.stages], i64, shared)
        self.full = em.value(tile.AllocOp(barriers, dynamic_barriers))
        self.empty = em.value(tile.AllocOp(barriers, dynamic_barriers))
        if self.split and self.swapped:  # the producer's split of each B tile, and its verdict
            self.ready = em.value(tile.AllocOp(tile.memref_in([t.stages], i64, shared)))
            self.special = em.value(tile.AllocOp(tile.memref_in([t.stages], i32, shared)))
        if clustered:  # the block's whole tile, which the cluster's blocks read
            staging = [t.consumers, t.tile_n // STAGE_COLUMNS, tile.WGMMA_M, STAGE_COLUMNS]
            self.staging = em.value(tile.AllocOp(tile.memref_in(staging, f32, shared), True))
        elif t.store == "tma":
            assert self.output is not None
            self.tma = TmaEpilogue(self, self.output)
        elif t.store == "smem":
            products = [t.products] if t.dual == "on" else []
            staging = [t.consumers, *products, tile.WGMMA_M, STAGE_COLUMNS]
            if self.swapped:  # output rows of the warpgroup's 64 columns, padded
                staging = [t.consumers, tile.WGMMA_M, SWAPPED_STAGE_STRIDE]
            self.staging = em.value(tile.AllocOp(tile.memref_in(staging, f32, shared), True))
        self.first = em.value(arith.CmpiOp(self.tid, em.index(0), "eq"))
        # `empty`: every consumer thread arrives, or with multicast one thread of each consumer
        # warpgroup of both blocks (`wgmma_multicast.py`)
        releases = t.consumers * t.sharers if t.sharers > 1 else WARPGROUP * t.consumers
        with em.when([self.first]):
            for s in range(t.stages):
                em.op(tile.MbarrierInitOp(self.full, em.index(s), 1))
                em.op(tile.MbarrierInitOp(self.empty, em.index(s), releases))
                if self.split and self.swapped:
                    em.op(tile.MbarrierInitOp(self.ready, em.index(s), WARPGROUP))
            em.op(tile.FenceProxyAsyncOp())
            if t.sharers > 1:
                em.op(tile.FenceMbarrierInitOp())
        em.op(tile.ClusterSyncOp() if t.sharers > 1 else tile.BarrierOp())
        warpgroup = em.div(self.tid, WARPGROUP)
        if not t.ws:
            self._consume(warpgroup)
            return
        producer = em.value(arith.CmpiOp(warpgroup, em.index(0), "eq"))
        then_block, else_block = Block(), Block()
        em.op(scf.IfOp(producer, [], Region(then_block), Region(else_block)))
        with em.into(then_block):
            em.op(tile.SetMaxNRegOp(registers(t.consumers)[0], inc=False))
            if self.split and self.swapped:
                swapped_produce(self)
            else:
                with em.when([self.first]):
                    if self.walk:
                        self.walk.walk(em.value(tile.BlockIdOp("x")), self._produce_piece)
                    else:
                        with self._tiles() as first_step:
                            with em.for_loop(0, self.steps, 1) as (step, _, _):
                                self._produce(step, em.add(first_step, step))
                                em.op(scf.YieldOp())
            for _ in range(2 if t.cluster > 1 else 0):  # the consumers' cluster barriers
                em.op(tile.ClusterSyncOp())
            em.op(scf.YieldOp())
        with em.into(else_block):
            em.op(tile.SetMaxNRegOp(registers(t.consumers)[1], inc=True))
            self._consume(em.value(arith.SubiOp(warpgroup, em.index(1))))
            em.op(scf.YieldOp())

    def _blocks(self) -> int:
        """The persistent grid's blocks (`launch_grid`): one per SM, fewer where there are fewer
        tiles but for `streamk=tail`."""
        kernel = self.a_global.owner.parent_op()  # type: ignore[union-attr]
        assert isinstance(kernel, tile.KernelOp)
        return kernel.grid_size[0]

    def _origin(self, coordinates: list[SSAValue]) -> None:
        """Sets the block tile's first column, row and batch index from its (n, m, batch)
        tile coordinates."""
        em, c, t = self.em, self.c, self.t
        self.n0 = em.mul(coordinates[0], t.tile_n)
        self.m0 = em.mul(coordinates[1], t.bm)
        self.b_index = []
        if len(c.nest.extents) == 3:
            batch = em.div(coordinates[2], t.cluster) if t.cluster > 1 else coordinates[2]
            self.mapping[c.nest.body.block.args[0]] = batch
            self.b_index = [batch]
        if self.splits > 1:  # batch index b·splits + s: chunk s of K, operand batch b
            if t.cluster == 1:  # a partial kernel: its batch is b·splits + s
                self.b_index = [em.div(coordinates[2], self.splits)] if self.batched else []
            self.k_base = em.mul(em.rem(coordinates[2], self.splits), self.chunk)

    def _unit_origin(self, n: SSAValue, m: SSAValue, batch: SSAValue) -> None:
        """Sets the block's tile from its column and row of tiles in launch order (a cluster's
        rows or columns with `multicast`, of which the block's rank takes one) and its batch
        index."""
        em, t = self.em, self.t
        if t.sharers > 1:
            assert self.rank is not None
        if t.cluster_rows > 1:
            m = em.add(em.mul(m, t.sharers), self.rank)  # type: ignore[arg-type]
        if t.cluster_columns > 1:
            n = em.add(em.mul(n, t.sharers), self.rank)  # type: ignore[arg-type]
        self._origin([n, m, batch])

    def _grouped(self, linear: SSAValue) -> list[SSAValue]:
        """Returns the (n, m) coordinates of the `linear`-th tile of a batch in launch order
        (counting clusters' rows or columns of tiles with `multicast`): in groups of `group` rows
        of tiles, down the rows of a group first."""
        em, t = self.em, self.t
        n_tiles, m_tiles = self.n_units, self.m_units
        group = min(max(t.group // t.cluster_rows, 1), m_tiles)
        per_group = group * n_tiles
        first = em.mul(em.div(linear, per_group), group)
        height = em.value(
            arith.MinSIOp(em.value(arith.SubiOp(em.index(m_tiles), first)), em.index(group))
        )
        within = em.rem(linear, per_group)
        return [
            em.value(arith.DivUIOp(within, height)),
            em.add(first, em.value(arith.RemUIOp(within, height))),
        ]

    @contextmanager
    def _tiles(self) -> Iterator[SSAValue | int]:
        """Runs the body once per tile of this block (with `persistent`, tiles blockIdx.x, +
        gridDim.x, ...) and yields the ring step of the tile's first K step: ring steps count
        on across tiles, so the ring's slots and phases carry over."""
        em, t = self.em, self.t
        if not t.persistent:
            yield 0
            return
        per_batch = self.n_units * self.m_units
        tiles = per_batch * self.batch
        blocks = self._blocks() // t.sharers  # with multicast, clusters walking clusters
        block = em.value(tile.BlockIdOp("x"))
        if t.sharers > 1:
            self.rank = em.rem(block, t.sharers)
            block = em.div(block, t.sharers)
        mine = em.div(em.add(em.value(arith.SubiOp(em.index(tiles), block)), blocks - 1), blocks)
        self.ring_steps = em.mul(mine, self.steps)
        with em.for_loop(0, mine, 1) as (turn, _, _):
            index = em.add(block, em.mul(turn, blocks))
            self._unit_origin(*self._grouped(em.rem(index, per_batch)), em.div(index, per_batch))
            yield em.mul(turn, self.steps)
            em.op(scf.YieldOp())

    def _produce(self, step: SSAValue, ring_step: SSAValue) -> None:
        """Waits for slot `ring_step % stages` to be free, then issues the TMA copies of K step
        `step` into it."""
        em, t = self.em, self.t
        slot = em.rem(ring_step, t.stages)
        em.op(tile.MbarrierWaitOp(self.empty, slot, em.ring_parity(ring_step, t.stages, flip=True)))
        em.op(tile.MbarrierArriveExpectTxOp(self.full, slot, t.copied_bytes(self.mn_major)))
        k0 = em.add(self.k_base, em.mul(step, self.bk))
        zero = em.index(0)

        def copy(
            source: SSAValue, at: list[SSAValue], smem: SSAValue, to: list[SSAValue], mask: int = 0
        ) -> None:
            hint = ("a" if source is self.product_a else "b") in t.evict
            rank = len(source.type.get_shape())  # type: ignore[attr-defined]
            batch = self.b_index if rank > len(at) else []  # A shared by the batch: none
            em.op(tile.TmaLoadOp(source, [*batch, *at], smem, to, self.full, slot, hint, mask))

        def chunks(source: SSAValue, first: SSAValue, count: int, smem: SSAValue, at: int) -> None:
            """`count` 64-column chunks of an N-major `source` from column `first`, into the
            slot's chunks `at`.."""
            for chunk in range(count):
                column = em.add(first, chunk * self.bk)
                copy(source, [k0, column], smem, [slot, em.index(at + chunk), zero, zero])

        if t.cluster_columns > 1:  # the block's share of the A tile's rows, into every block
            assert self.rank is not None
            row = em.mul(self.rank, t.bm // t.sharers)
            mask = (1 << t.sharers) - 1
            copy(self.a_global, [em.add(self.m0, row), k0], self.a_smem, [slot, row, zero], mask)
        elif self.a_mn_major:  # B's N-major chunks (`swapped`)
            chunks(self.a_global, self.m0, t.bm // self.bk, self.a_smem, 0)
        else:
            copy(self.a_global, [self.m0, k0], self.a_smem, [slot, zero, zero])
        if t.cluster_rows > 1:
            self._multicast_b(copy, k0, slot)
            return
        # A dual GEMM's two B tiles fill the two halves of the slot's bn rows (K-major) or
        # 64-column chunks (N-major), so one m64nBNk16 wgmma multiplies A by both.
        for product, b_global in enumerate(self.b_globals):
            if self.mn_major:  # a ragged width's last chunk copied whole
                count = -(-t.tile_n // self.bk)
                chunks(b_global, self.n0, count, self.b_smem, product * t.tile_n // self.bk)
            else:
                to = [slot, em.index(product * t.tile_n), zero]
                copy(b_global, [self.n0, k0], self.b_smem, to)

    def _multicast_b(self, copy: Callable[..., None], k0: SSAValue, slot: SSAValue) -> None:
        """The block's share of the slot's B tile, copied into every block of the cluster (s
        sharers): rows rank·bn/s.. of a K-major tile, or its 64-column chunks rank·c/s.. of c
        (N-major), or where s does not divide c, K rows rank·64/s.. of each chunk
        (`k_halves`)."""
        em, t = self.em, self.t
        (b_global,) = self.b_globals
        assert self.rank is not None
        zero, mask = em.index(0), (1 << t.sharers) - 1
        if k_halves(t, self.mn_major):
            row = em.mul(self.rank, self.bk // t.sharers)
            k = em.add(k0, row)
            for chunk in range(t.b_columns // self.bk):
                n = em.add(self.n0, chunk * self.bk)
                to = [slot, em.index(chunk), row, zero]
                copy(b_global, [k, n], self.b_smem, to, mask)
        elif self.mn_major:
            share = t.b_columns // self.bk // t.sharers
            for i in range(share):
                chunk = em.add(em.mul(self.rank, share), i)
                n = em.add(self.n0, em.mul(chunk, self.bk))
                copy(b_global, [k0, n], self.b_smem, [slot, chunk, zero, zero], mask)
        else:
            row = em.mul(self.rank, t.tile_n // t.sharers)
            copy(b_global, [em.add(self.n0, row), k0], self.b_smem, [slot, row, zero], mask)

    def _consume(self, group: SSAValue) -> None:
        """The K loop of consumer warpgroup `group` (rows 64·group of the block), then the
        epilogue; once per tile of the block."""
        em, t = self.em, self.t
        acc = em.value(tile.AllocOp(tile.memref_in([t.bn // 2], f32, tile.REGISTERS)))
        turns = em.index(TURN_BARRIERS)
        if t.pturns == "on":  # the second warpgroup lets the first take the first turn
            theirs = em.value(arith.SubiOp(em.add(turns, 1), group))
            self.turn = (em.add(group, TURN_BARRIERS), theirs)
            with em.when([em.value(arith.CmpiOp(group, em.index(1), "eq"))]):
                em.op(tile.NamedBarrierOp(turns, WARPGROUP * 2, arrive=True))
        if self.walk:
            block = em.value(tile.BlockIdOp("x"))
            self.walk.walk(block, lambda piece: self._consume_piece(acc, group, piece, block))
        else:
            with self._tiles() as first_step:
                self._consume_piece(acc, group, Piece(em.index(0), first_step, 0, self.steps))
        if t.pturns == "on":  # the first takes the second's last arrival: every phase completes
            with em.when([em.value(arith.CmpiOp(group, em.index(0), "eq"))]):
                em.op(tile.NamedBarrierOp(turns, WARPGROUP * 2))
        if t.store == "tma":
            self.tma.finish()

    def _consume_piece(
        self, acc: SSAValue, group: SSAValue, piece: Piece, block: SSAValue | None = None
    ) -> None:
        """The K steps of `piece` into `acc` (from the tile's initial values), then the
        epilogue; for a piece of a shared tile (`streamk=tail`), the partial sums written
        instead where the piece does not start the tile, or the other pieces' added first."""
        em, t = self.em, self.t
        if self.walk:
            self._set_tile(piece.tile)
        inits = [self.mapping.get(i, i) for i in self.inits]
        for r in range(t.bn // 2):
            init = inits[r // (t.tile_n // 2)]  # a thread holds tile_n/2 of each product
            em.op(memref.StoreOp.get(init, acc, [em.index(r)]))
        if not t.ws:
            with em.when([self.first]):
                with em.for_loop(0, min(t.stages - 1, self.steps), 1) as (step, _, _):
                    self._produce(step, step)
                    em.op(scf.YieldOp())
        row = em.mul(group, tile.WGMMA_M)
        first_step, count = piece.ring, piece.count
        if self.split and self.swapped:
            swapped_k_loop(self, acc, first_step, row, group)
        elif self.split:
            self._split_k_loop(acc, first_step, row, group)
        elif t.promote == "on":
            self._promoted_k_loop(acc, first_step, row, piece.first, count)
        else:
            self._k_loop(acc, first_step, row, count)
        if t.persistent and t.promote == "off":
            # the piece's last slot, which the next piece's K loop needs
            last = em.add(first_step, em.add(count, -1))
            self._release(em.rem(last, t.stages), last)
        if not piece.shared:
            self._tile_epilogue(acc, group, row)
            return
        assert self.walk is not None and block is not None
        starts = em.value(arith.CmpiOp(em.add(piece.first, 0), em.index(0), "eq"))
        with em.when([starts]):
            with em.for_loop(*self.walk.partials(piece), 1) as (index, _, _):
                self._add_partial(acc, self.walk.partial_slot(piece, index))
                em.op(scf.YieldOp())
            self._tile_epilogue(acc, group, row)
        with em.when([em.value(arith.CmpiOp(em.add(piece.first, 0), em.index(0), "ne"))]):
            self._write_partial(acc, self.walk.slot(piece))

    def _tile_epilogue(self, acc: SSAValue, group: SSAValue, row: SSAValue) -> None:
        if self.swapped and self.t.store == "smem":
            swapped_staged_epilogue(self, acc, group)
        elif self.swapped:
            swapped_epilogue(self, acc, row)
        elif self.t.cluster > 1:
            cluster_epilogue(self, acc, group)
        elif self.t.store == "smem":
            self._staged_epilogue(acc, group)
        else:
            self._epilogue(acc, row, group)

    def _consumer_thread(self) -> SSAValue:
        """The thread's index among the consumer warpgroups' threads."""
        return self.em.value(arith.SubiOp(self.tid, self.em.index(WARPGROUP)))

    def _write_partial(self, acc: SSAValue, block: SSAValue) -> None:
        """Writes the thread's partial sums to row `block` of the workspace (`walk.slot`), then,
        once every consumer thread has, sets that row's flag (release)."""
        em, t = self.em, self.t
        workspace, flags = self.stream_buffers
        thread = self._consumer_thread()
        for r in range(t.bn // 2):
            value = em.value(memref.LoadOp.get(acc, [em.index(r)]))
            em.op(memref.StoreOp.get(value, workspace, [block, em.index(r), thread]))
        em.op(tile.ThreadFenceOp())
        em.op(tile.NamedBarrierOp(em.index(STREAM_K_BARRIER), WARPGROUP * t.consumers))
        with em.when([em.value(arith.CmpiOp(thread, em.index(0), "eq"))]):
            em.op(tile.FlagSetOp(flags, block))

    def _add_partial(self, acc: SSAValue, helper: SSAValue) -> None:
        """Waits for row `helper`'s flag (acquire), then adds its partial sums to `acc`."""
        em, t = self.em, self.t
        workspace, flags = self.stream_buffers
        thread = self._consumer_thread()
        with em.when([em.value(arith.CmpiOp(thread, em.index(0), "eq"))]):
            em.op(tile.FlagWaitOp(flags, helper))
        em.op(tile.NamedBarrierOp(em.index(STREAM_K_BARRIER), WARPGROUP * t.consumers))
        for r in range(t.bn // 2):
            index = em.index(r)
            part = em.value(memref.LoadOp.get(workspace, [helper, index, thread]))
            self._accumulate(acc, [index], part)

    def _set_tile(self, index: SSAValue) -> None:
        """Sets the block's tile to the `index`-th of the walk (the launch order of
        `_tiles`)."""
        em = self.em
        per_batch = self.n_tiles * self.m_tiles
        self._origin([*self._grouped(em.rem(index, per_batch)), em.div(index, per_batch)])

    def _produce_piece(self, piece: Piece) -> None:
        """The producer's copies of `piece`'s K steps."""
        em = self.em
        self._set_tile(piece.tile)
        with em.for_loop(0, piece.count, 1) as (i, _, _):
            self._produce(em.add(piece.first, i), em.add(piece.ring, i))
            em.op(scf.YieldOp())

    def _k_loop(
        self,
        acc: SSAValue,
        first_step: SSAValue | int,
        row: SSAValue,
        count: SSAValue | int | None = None,
    ) -> None:
        """The K loop of f16/bf16 or 8-bit float operands (`count` steps, all by default):
        each step's products accumulate in `acc` on the tensor cores, one wgmma group kept in
        flight."""
        em, t = self.em, self.t
        with em.for_loop(0, self.steps if count is None else count, 1) as (step, _, _):
            ring_step = em.add(first_step, step)
            slot = em.rem(ring_step, t.stages)
            parity = em.ring_parity(ring_step, t.stages, flip=False)
            em.op(tile.MbarrierWaitOp(self.full, slot, parity))
            em.op(tile.WgmmaFenceOp())
            for kk in range(0, self.bk, tile.wgmma_k(self.element)):
                self._wgmma(acc, slot, row, kk)
            em.op(tile.WgmmaCommitOp())
            em.op(tile.WgmmaWaitOp(1))
            started = em.value(arith.CmpiOp(step, em.index(0), "ugt"))
            previous = em.add(ring_step, t.stages - 1)  # ≡ ring_step - 1 (mod stages)
            with em.when([started]):
                self._release(em.rem(previous, t.stages), em.add(ring_step, -1))
            if not t.ws:
                with em.when([self.first, em.less(previous, self.steps)]):
                    self._produce(previous, previous)
            em.op(scf.YieldOp())
        em.op(tile.WgmmaWaitOp(0))

    def _release(self, slot: SSAValue, ring_step: SSAValue) -> None:
        """The consumer thread's arrival on `empty[slot]`, done with ring step `ring_step`;
        with `multicast`, thread r of the warpgroup arrives for it on rank r's, for the steps
        a producer refills the slot after (`wgmma_multicast.py`: no arrival goes to a block
        that may have exited)."""
        em, t = self.em, self.t
        if t.sharers == 1:
            em.op(tile.MbarrierArriveOp(self.empty, slot))
            return
        local = em.rem(self.tid, WARPGROUP)
        refilled = em.less(em.add(ring_step, t.stages), self.ring_steps)
        with em.when([em.less(local, t.sharers), refilled]):
            em.op(tile.MbarrierArriveClusterOp(self.empty, slot, local))

    def _promoted_k_loop(
        self,
        acc: SSAValue,
        first_step: SSAValue | int,
        row: SSAValue,
        first: SSAValue | int = 0,
        count: SSAValue | int | None = None,
    ) -> None:
        """The K loop of 8-bit float operands with `promote`: each step's products (four k32
        wgmmas, 128 of K) summed in registers of their own, the first overwriting them, then
        added to the f32 accumulators `acc` once they are done, and the slot released. The
        tensor cores' own FP8 sums keep fewer bits than f32: to an f32 output at 4096³, summing
        all of K in them (`promote=off`) left 1.33e-3 relative error and promoted steps 1.26e-4,
        each what torch's `_scaled_mm` gave with and without `use_fast_accum` in the same run
        (H200, 2026-12-04). Block scales are read two steps ahead, once the step before theirs
        is issued: the loads then have a step's wgmmas to arrive in.

        With `poverlap` the steps alternate between two sets of product registers: once a
        step's wgmmas are done, the next step's are issued into the other set, and this step's
        products are added while they run (FA3's order: nothing waits on a barrier while a
        group is in flight); without it a step is issued once the last one's adds are done.
        The loop runs pairs of steps, each set named statically, without a branch; the last
        one or two steps follow it."""
        em, t = self.em, self.t
        sets = [
            em.value(tile.AllocOp(tile.memref_in([t.bn // 2 // t.halves], f32, tile.REGISTERS)))
            for _ in range(2 if t.poverlap == "on" else 1)
        ]
        p0, p1 = sets[0], sets[-1]
        rows = self._scale_rows(row) if any(self.scales) else []
        scales = []  # carried: the step's scales, then the next step's
        if rows:
            second = em.value(arith.MinSIOp(em.add(first, 1), em.add(self.steps, -1)))
            scales = self._step_scales(em.add(first, 0), rows) + self._step_scales(second, rows)
        shifted = None  # the block starts half-way through one of B's scale blocks
        if self.scales[1] and self._straddles(self.scales[1][1]):
            shifted = em.value(arith.CmpiOp(em.rem(self.n0, SCALE_BLOCK), em.index(0), "ne"))
        steps = em.add(self.steps if count is None else count, 0)
        known = index_constant(steps)

        def step(i, products, following, carried, kept=None):
            return self._promoted_step(
                acc, products, following, first_step, row, first, rows, i, carried, shifted, kept
            )

        with em.when([] if known else [em.less(em.index(0), steps)]):  # a piece may have none
            self._issue_step(p0, first_step, row)
            pairs = em.div(em.add(steps, -1), 2)  # those followed by one or two more steps
            with em.for_loop(0, pairs, 1, scales) as (pair, carried, loop_op):
                i = em.mul(pair, 2)
                carried, kept = step(i, p0, p1, carried)
                em.op(scf.YieldOp(*step(em.add(i, 1), p1, p0, carried, kept)[0]))
            i, carried = em.mul(pairs, 2), list(loop_op.results)

            def last_steps(left: int) -> None:
                """The last two steps (the first issuing the second), or the last one."""
                if left == 2:
                    step(em.add(i, 1), p1, None, *step(i, p0, p1, carried))
                else:
                    step(i, p0, None, carried)

            if known is not None:
                last_steps(2 if known % 2 == 0 else 1)
                return
            two, one = Block(), Block()
            even = em.value(arith.CmpiOp(em.rem(steps, 2), em.index(0), "eq"))
            em.op(scf.IfOp(even, [], Region(two), Region(one)))
            for block, left in ((two, 2), (one, 1)):
                with em.into(block):
                    last_steps(left)
                    em.op(scf.YieldOp())

    def _promoted_step(
        self,
        acc: SSAValue,
        products: SSAValue,
        following: SSAValue | None,
        first_step: SSAValue | int,
        row: SSAValue,
        first: SSAValue | int,
        rows: list[SSAValue],
        i: SSAValue,
        scales: list[SSAValue],
        shifted: SSAValue | None,
        kept: list[list[SSAValue]] | None = None,
    ) -> tuple[list[SSAValue], list[list[SSAValue]] | None]:
        """Step `i` of the promoted K loop, its wgmmas issued into `products`: waits for them,
        issues the next step into `following` (None: `i` is the last) before this step's
        adds where the sets differ (`poverlap`), after them where they are one; releases the
        step's slot and adds its products to `acc` times the factors of its block scales
        (`scales`: this step's, then the next one's); returns the next two steps' scales.

        With `pscales=pair` the first step of a pair (`kept` None, a step following) also
        computes the next step's factors, returned with the scales for the second (which
        takes them as `kept` and loads nothing), and loads the next pair's scales after its
        adds: a wait for loads (ptxas waits for every load on their scoreboard) then never
        includes loads issued a step before it, only a pair before."""
        em, t = self.em, self.t
        ring_step, step = em.add(first_step, i), em.add(first, i)
        overlapped = following is not None and following is not products
        half = len(scales) // 2
        scales, ahead = scales[:half], scales[half:]  # this step's, the next one's
        pairwise = bool(rows) and t.pscales == "pair"
        lead = pairwise and kept is None and following is not None

        def issue_next() -> None:
            """The next step's wgmmas, then (`pscales=step`) the scales of the step after it
            (the last step's where there is none): loads with a step's wgmmas to arrive in
            before the adds that read them, which ptxas may place right before that step's
            wait."""
            assert following is not None
            self._issue_step(following, em.add(ring_step, 1), row)
            if rows and not pairwise:
                later = em.value(arith.MinSIOp(em.add(step, 2), em.add(self.steps, -1)))
                ahead.extend(self._step_scales(later, rows))

        em.op(tile.WgmmaWaitOp(0))
        if overlapped:
            issue_next()
        factors = kept or (self._step_factors(scales, shifted) if rows else None)
        following_factors = self._step_factors(ahead, shifted) if lead else None
        if t.halves == 2:  # the first half's products added, then the second half issued
            self._add_products(acc, products, factors)
            self._issue_step(products, ring_step, row, half=1)
            em.op(tile.WgmmaWaitOp(0))
        self._release(em.rem(ring_step, t.stages), ring_step)
        self._add_products(acc, products, factors, half=t.halves - 1)
        if not t.ws:  # the step stages - 1 ahead, into the slot released a step ago
            copied = em.add(ring_step, t.stages - 1)
            with em.when([self.first, em.less(copied, self.steps)]):
                self._produce(copied, copied)
        if following is not None and not overlapped:
            issue_next()
        if lead:  # the next pair's scales, after this pair's factors
            last = em.add(self.steps, -1)
            ahead = [
                value
                for later in (2, 3)
                for value in self._step_scales(
                    em.value(arith.MinSIOp(em.add(step, later), last)), rows
                )
            ]
        elif pairwise and kept is not None:
            ahead = scales + ahead  # the next pair's, loaded by the first step
        return ahead, following_factors

    def _issue_step(
        self, products: SSAValue, ring_step: SSAValue | int, row: SSAValue, half: int = 0
    ) -> None:
        """Waits for ring step `ring_step`'s slot to be full and issues its wgmmas into
        `products` (the first overwriting them) as one committed group; with `pturns`, in
        the warpgroup's turn, then passes the turn to the other. Where steps are promoted in
        halves (`WgmmaTiles.halves`), the wgmmas of half `half` of the block's columns (the
        second's slot is full already)."""
        em, t = self.em, self.t
        ring_step = em.add(ring_step, 0)
        slot = em.rem(ring_step, t.stages)
        if not half:
            parity = em.ring_parity(ring_step, t.stages, flip=False)
            em.op(tile.MbarrierWaitOp(self.full, slot, parity))
        if self.turn:
            em.op(tile.NamedBarrierOp(self.turn[0], WARPGROUP * 2))
        em.op(tile.WgmmaFenceOp())
        width = t.bn // t.halves
        for kk in range(0, self.bk, tile.wgmma_k(self.element)):
            self._wgmma(products, slot, row, kk, overwrite=kk == 0, columns=(half * width, width))
        em.op(tile.WgmmaCommitOp())
        if self.turn:
            em.op(tile.NamedBarrierOp(self.turn[1], WARPGROUP * 2, arrive=True))

    def _add_products(
        self,
        acc: SSAValue,
        products: SSAValue,
        factors: list[list[SSAValue]] | None = None,
        half: int = 0,
    ) -> None:
        """acc[r] += products[r] for each of the thread's accumulators, times the factor of
        its 8-column chunk and row where given (`factors`, `_step_factors`: by chunk, rows 0-7
        and 8-15 of the thread's fragment); where steps are promoted in halves, for the
        accumulators of half `half` of the block's columns."""
        em, t = self.em, self.t
        per_half = t.bn // 2 // t.halves
        for p in range(per_half):
            r = half * per_half + p
            index = [em.index(r)]
            product = em.value(memref.LoadOp.get(products, [em.index(p)]))
            if factors:  # accumulator r is in chunk r // 4, in row half (r % 4) // 2
                product = em.value(arith.MulfOp(product, factors[r // 4][(r % 4) // 2]))
            self._accumulate(acc, index, product)

    def _accumulate(self, acc: SSAValue, index: list[SSAValue], value: SSAValue) -> None:
        """acc[index] += value."""
        em = self.em
        total = em.value(arith.AddfOp(em.value(memref.LoadOp.get(acc, index)), value))
        em.op(memref.StoreOp.get(total, acc, index))

    def _fragment_row(self, row: SSAValue) -> tuple[SSAValue, SSAValue]:
        """The first output row of this thread's accumulators in the wgmma D fragment of the
        consumer's rows `row..row+63`, 16·warp + lane/4 (the second is 8 below), and the
        thread's lane."""
        em = self.em
        local = em.rem(self.tid, WARPGROUP)
        lane = em.rem(local, 32)
        first = em.add(em.add(self.m0, row), em.add(em.mul(em.div(local, 32), 16), em.div(lane, 4)))
        return first, lane

    def _scale_rows(self, row: SSAValue) -> list[SSAValue]:
        """The two rows of the output this thread's accumulators hold, clamped to the last
        row: where the block scales of A are read."""
        em = self.em
        (first, _), last = self._fragment_row(row), em.index(self.m - 1)
        return [em.value(arith.MinSIOp(em.add(first, 8 * half), last)) for half in range(2)]

    def _step_scales(self, step: SSAValue, rows: list[SSAValue]) -> list[SSAValue]:
        """The block scales of K step `step` (block `step` of 128 along K) for the thread's
        two rows: A's scale of each row, then B's of the block's columns (B's blocks are as wide
        as the block or wider: one scale), those of the operands that have them."""
        em = self.em

        def read(scaled: tuple[SSAValue, ScaleOperand], at: SSAValue) -> SSAValue:
            buffer, scale = scaled
            index = {"k": lambda: step, "row": lambda: at, "zero": lambda: em.index(0)}
            index["block"] = lambda: em.div(at, SCALE_BLOCK)
            return em.value(memref.LoadOp.get(buffer, [index[kind]() for kind in scale.kinds]))

        a_scaled, b_scaled = self.scales
        a = [read(a_scaled, r) for r in rows] if a_scaled else []
        if not b_scaled:
            return a
        b = [read(b_scaled, self.n0)]
        if self._straddles(b_scaled[1]):  # and the next block's, clamped to the last column
            following = em.mul(em.add(em.div(self.n0, SCALE_BLOCK), 1), SCALE_BLOCK)
            b.append(read(b_scaled, em.value(arith.MinSIOp(following, em.index(self.n - 1)))))
        return a + b

    def _straddles(self, b_scale: ScaleOperand) -> bool:
        """Whether a block's columns may fall in two of B's scale blocks: blocks wider than a
        scale block (192 columns: starting on one, or half-way through one)."""
        return self.t.bn > SCALE_BLOCK and "block" in b_scale.kinds

    def _step_factors(
        self, scales: list[SSAValue], shifted: SSAValue | None
    ) -> list[list[SSAValue]]:
        """The factors of each 8-column chunk of the thread's accumulators, for its two rows,
        from a step's block scales (`_step_scales`): A's scale of the row times B's of the
        chunk's columns. Where a block straddles two of B's scale blocks, its first 64 columns
        take the first, its last 64 the second, and the 64 between the first where the block
        starts on a scale block, else the second (`shifted`: the block starts half-way); a
        block promoted in halves starts on a scale block, each half taking one."""
        em = self.em
        chunks = self.t.bn // 8
        a, b = (scales[:2], scales[2:]) if self.scales[0] else ([], scales)

        def pair(column: SSAValue) -> list[SSAValue]:
            return [em.value(arith.MulfOp(f, column)) for f in a] if a else [column, column]

        if not b:
            return [a] * chunks
        if len(b) == 1:
            return [pair(b[0])] * chunks
        first, second = pair(b[0]), pair(b[1])
        if chunks == 2 * SCALE_BLOCK // 8:  # promoted in halves: each half one scale block
            return [first] * (chunks // 2) + [second] * (chunks // 2)
        assert shifted is not None and chunks == 24
        middle = [em.value(arith.SelectOp(shifted, s, f)) for f, s in zip(first, second)]
        return [first] * 8 + [middle] * 8 + [second] * 8

    def _split_k_loop(
        self, acc: SSAValue, first_step: SSAValue | int, row: SSAValue, group: SSAValue
    ) -> None:
        """The K loop of f32 operands: each step split (`wgmma_tf32_split.py`), its three
        TF32 products (the small terms first) issued into registers of their own, the first
        overwriting them, then added to the f32 accumulators `acc` once they are done. The
        tensor cores' own sums are kept to one step's 12 products: their additions drop bits
        (measured on the H200, 2026-12-04: accumulating all of K in them left 2e-5 relative
        error at K = 4096 where f32 FMA leaves 8e-7). A step holding an infinity adds its
        products to `acc` in f32 FMA and zeroes its tiles instead."""
        em, t, splitter = self.em, self.t, self.splitter
        products = em.value(tile.AllocOp(tile.memref_in([t.bn // 2], f32, tile.REGISTERS)))
        with em.for_loop(0, self.steps, 1) as (step, _, _):
            ring_step = em.add(first_step, step)
            slot = em.rem(ring_step, t.stages)
            em.op(
                tile.MbarrierWaitOp(
                    self.full, slot, em.ring_parity(ring_step, t.stages, flip=False)
                )
            )
            infinite = splitter.split(slot, group)
            with em.when([infinite]):
                splitter.exact_step(acc, slot, row)
                splitter.clear(slot, group)
            em.op(tile.WgmmaFenceOp())
            b_big = splitter.b_big
            for kk in range(0, self.bk, tile.WGMMA_K_TF32):
                self._wgmma(products, slot, row, kk, splitter.a_small, b_big, kk == 0)
                self._wgmma(products, slot, row, kk, self.a_smem, splitter.b_small)
                self._wgmma(products, slot, row, kk, self.a_smem, b_big)
            em.op(tile.WgmmaCommitOp())
            em.op(tile.WgmmaWaitOp(0))
            self._add_products(acc, products)
            em.op(tile.MbarrierArriveOp(self.empty, slot))
            em.op(scf.YieldOp())

    def _wgmma(
        self,
        acc: SSAValue,
        slot: SSAValue,
        row: SSAValue,
        kk: int,
        a_smem: SSAValue | None = None,
        b_smem: SSAValue | None = None,
        overwrite: bool = False,
        columns: tuple[int, int] | None = None,
    ) -> None:
        """One m64nBNk16 (TF32: k8, 8-bit floats: k32) product of the slot's A rows
        `row..row+63` and K columns `kk..`, of the ring's tiles or of `a_smem` and `b_smem`
        (the split's small tiles), added to `acc` or (`overwrite`) replacing it; with
        `columns` (first, width), of those of the block's columns only (K-major B)."""
        em, t = self.em, self.t
        first, width = columns or (0, t.bn)
        a_smem, b_smem = a_smem or self.a_smem, b_smem or self.b_smem
        zero, k = em.index(0), em.index(kk)
        mn_major = self.mn_major and not self.split  # the split's B tiles are K-major
        if mn_major:
            b_index = [slot, zero, k, zero]
            b_lbo = BK * BK * 2  # next 64-column chunk of N
        else:
            b_index = [slot, em.index(first), k]
            b_lbo = 16  # unused for K-major swizzled layouts ("assumed 1")
        a_index, a_lbo = [slot, row, k], None
        if self.a_mn_major:  # the consumer's 64 rows: one chunk, its K rows kk..
            a_index, a_lbo = [slot, em.div(row, BK), k, zero], BK * BK * 2
        em.op(
            tile.WgmmaOp(
                acc,
                a_smem,
                a_index,
                b_smem,
                b_index,
                width,
                a_sbo=ATOM,
                b_lbo=b_lbo,
                b_sbo=ATOM,
                b_mn_major=mn_major,
                overwrite=overwrite,
                a_lbo=a_lbo,
            )
        )

    def _epilogue(self, acc: SSAValue, row: SSAValue, group: SSAValue | None = None) -> None:
        """Applies the epilogue to each accumulator from the wgmma D fragment layout: thread
        t holds rows 16·warp + lane/4 (+8), columns 8j + 2(lane%4) (+1). With `store=tma`
        (consumer warpgroup `group`) the epilogue's last op, the output's store, becomes a
        write to the warpgroup's output tile, which TMA stores (`wgmma_tma_store.py`)."""
        em, t, c = self.em, self.t, self.c
        tma = self.tma if t.store == "tma" else None
        ops = c.epilogue[:-1] if tma else c.epilogue
        if tma:
            assert group is not None
            tma.begin(group)
        group_row, lane = self._fragment_row(row)
        pair = em.add(self.n0, em.mul(em.rem(lane, 4), 2))
        width = vector_width(c.epilogue, c.n_iv, 2, 2)
        width = width if self.n % width == 0 else 1
        groups = t.tile_n // 8  # of 8 columns, per product
        for half in range(2):
            m = em.add(group_row, 8 * half)
            for j in range(groups):
                for j0 in range(0, 2, width):
                    n = em.add(pair, 8 * j + j0)
                    with em.when([em.less(m, self.m), em.less(n, self.n)]):
                        lanes = [
                            {
                                result: em.value(
                                    memref.LoadOp.get(
                                        acc, [em.index(4 * (p * groups + j) + 2 * half + e)]
                                    )
                                )
                                for p, result in enumerate(self.results)
                            }
                            for e in range(j0, j0 + width)
                        ]
                        local_map = dict(self.mapping) | {c.m_iv: m}
                        emitter = LaneEmitter(em, c.n_iv, n, width)
                        emitter.emit(ops, local_map, lanes)
                        if tma:
                            stored = c.epilogue[-1].value  # type: ignore[attr-defined]
                            values = [each.get(stored, stored) for each in emitter.lanes]
                            tma.place(group, half, j, j0, values)  # type: ignore[arg-type]
        if tma:
            tma.store(group)  # type: ignore[arg-type]

    def _staged_epilogue(self, acc: SSAValue, group: SSAValue) -> None:
        """Applies the epilogue after staging the accumulators in the warpgroup's own f32 tile
        of shared memory (no double rounding), STAGE_COLUMNS columns at a time, so each thread
        handles 8 consecutive columns of one row (16-byte accesses). Only the warpgroup meets
        at its barrier (`bar.sync 1 + group, 128`). A half-warp writes the fragment's 8-byte
        pairs of 4 rows, a quarter-warp reads 16-byte chunks of 2 rows; the chunks are
        swizzled (`_swizzle`) so that neither meets a bank conflict."""
        em, t, c = self.em, self.t, self.c
        local = em.rem(self.tid, WARPGROUP)
        warp, lane = em.div(local, 32), em.rem(local, 32)
        barrier = em.add(group, 1)  # 0 is __syncthreads
        row0 = em.add(self.m0, em.mul(group, tile.WGMMA_M))
        # The wgmma D fragment: rows 16·warp + lane/4 (+8), columns 8j + 2(lane%4) (+1).
        fragment_row = em.add(em.mul(warp, 16), em.div(lane, 4))
        fragment_column = em.mul(em.rem(lane, 4), 2)
        # Rows 8 and 16 apart share their swizzle.
        fragment_swizzle = self._swizzle(fragment_row)
        width = vector_width(c.epilogue, c.n_iv, self.n, 8)
        # The thread's cells of each 16 staged rows: (row, column, the key of the loads the
        # same for every row); a warp covers 4 rows of the 64 columns. Stores of 16 bytes: a
        # thread takes 8 consecutive columns of one row. Narrower stores (`narrow_rows`: rows of
        # an odd number of elements, 16-bit rows of 2, 4 or 6 mod 8, f32 rows of 2 mod 4) run
        # along the rows: a warp's lanes take consecutive `width`-column pieces of one row (two
        # rows at width 4), so a store writes 64-128 contiguous bytes of a row (with a thread's
        # 8 columns of 4 rows it wrote 2-8 bytes into each of 16-20 sectors).
        narrow = narrow_rows(width, c.epilogue)
        if narrow:
            per_row = min(32, STAGE_COLUMNS // width)  # lanes along one row
            store_rows = 32 // per_row  # rows a store covers
            groups = STAGE_COLUMNS // (per_row * width)  # stores along one row
            row_of = em.add(em.mul(warp, 4), em.div(lane, per_row))
            column_of = em.mul(em.rem(lane, per_row), width)
            cells = [
                (em.add(row_of, r), em.add(column_of, g * per_row * width), g)
                for r in range(0, 4, store_rows)
                for g in range(groups)
            ]
        else:
            read_row = em.add(
                em.mul(warp, 4), em.add(em.mul(em.div(lane, 16), 2), em.rem(em.div(lane, 4), 2))
            )
            read_column = em.mul(em.add(em.mul(em.rem(em.div(lane, 8), 2), 4), em.rem(lane, 4)), 8)
            cells = [(read_row, em.add(read_column, j0), j0) for j0 in range(0, 8, width)]
        swizzles = {row: self._swizzle(row) for row, _, _ in cells}
        chunks = -(-t.tile_n // STAGE_COLUMNS)  # per product; the last may be partial
        prefetch = EpiloguePrefetch(
            em,
            c.epilogue,
            self.results,
            c.n_iv,
            c.m_iv,
            chunks * 8 // width,
            tile.WGMMA_M // 16,
            width,
        )
        where: dict[tuple[int, int, int], tuple[SSAValue, SSAValue, SSAValue]] = {}

        def staged(product: int) -> list[SSAValue]:
            """The leading indices of a product's staged tile."""
            return [group, em.index(product)] if t.dual == "on" else [group]

        def in_tile(chunk: int, column: SSAValue, n: SSAValue) -> SSAValue:
            """Whether output column `n`, column `column` of staged `chunk`, is the block's and
            N's: a partial last chunk (a width off 64 columns) stages only its first ones."""
            edge = t.tile_n - chunk * STAGE_COLUMNS
            inside = em.less(n, self.n)
            if edge >= STAGE_COLUMNS:
                return inside
            return em.value(arith.AndIOp(inside, em.less(column, edge)))

        def place(chunk: int, rows: int, cell: int) -> tuple[SSAValue, SSAValue, SSAValue]:
            """Row, column and bounds check of `cell` of staged rows `rows..` in `chunk`."""
            if (chunk, rows, cell) not in where:
                row, column, _ = cells[cell]
                m = em.add(row0, em.add(row, rows))
                n = em.add(self.n0, em.add(column, chunk * STAGE_COLUMNS))
                inside = em.value(arith.AndIOp(em.less(m, self.m), in_tile(chunk, column, n)))
                where[chunk, rows, cell] = m, n, inside
            return where[chunk, rows, cell]

        def issue(chunk: int) -> None:
            """Issues the epilogue loads of `chunk` into registers (none without such loads)."""
            if chunk == chunks or not prefetch:
                return
            issued: set[int] = set()  # the row-independent loads' keys, once a chunk
            for rows in range(0, tile.WGMMA_M, 16):
                for cell, (_, _, key) in enumerate(cells):
                    m, n, inside = place(chunk, rows, cell)
                    local_map = dict(self.mapping) | {c.m_iv: m}
                    if key not in issued and prefetch.shared.loads:
                        issued.add(key)
                        with em.when([in_tile(chunk, cells[cell][1], n)]):
                            prefetch.issue((chunk, key), n, local_map, by_row=False)
                    if prefetch.by_row.loads:
                        with em.when([inside]):
                            prefetch.issue((chunk, rows, cell), n, local_map, by_row=True)

        def staged_values(product: int, rows: int) -> list[SSAValue]:
            """The thread's accumulators of a product in staged rows `rows..`, cell by cell."""
            index = staged(product)
            if narrow:
                values = []
                for row, col, _ in cells:
                    where = [*index, em.add(row, rows), self._staged_column(swizzles[row], col)]
                    if width == 1:
                        values.append(em.value(memref.LoadOp.get(self.staging, where)))
                    else:
                        values += em.op(tile.VectorLoadOp(self.staging, where, width)).results
                return values
            read_row, read_column, _ = cells[0]  # the thread's 8 columns of one row
            row, values = em.add(read_row, rows), []
            for h in range(2):
                column = self._staged_column(swizzles[read_row], em.add(read_column, 4 * h))
                values += em.op(tile.VectorLoadOp(self.staging, [*index, row, column], 4)).results
            return values

        issue(0)
        for chunk in range(chunks):
            if chunk or t.persistent:  # every thread has read the previous chunk (or tile)
                em.op(tile.NamedBarrierOp(barrier, WARPGROUP))
            for product in range(t.products):
                fragment = (fragment_row, fragment_column, fragment_swizzle)
                self._stage_chunk(acc, product * chunks + chunk, staged(product), fragment)
            # The next chunk's loads fly while this one is read back and computed; its
            # accumulators are in shared memory now, which frees their registers for them.
            issue(chunk + 1)
            em.op(tile.NamedBarrierOp(barrier, WARPGROUP))
            for rows in range(0, tile.WGMMA_M, 16):
                # per product, the thread's 8 values of these rows
                values = [staged_values(product, rows) for product in range(t.products)]
                for cell, (_, _, key) in enumerate(cells):
                    m, n_j, inside = place(chunk, rows, cell)
                    first = cell * width
                    with em.when([inside]):
                        local_map = dict(self.mapping) | {c.m_iv: m}
                        lanes = [
                            dict(zip(self.results, column, strict=True))
                            for column in zip(
                                *(v[first : first + width] for v in values), strict=True
                            )
                        ]
                        if prefetch:
                            loads = prefetch.lanes((chunk, key), (chunk, rows, cell))
                            for lane, loaded in zip(lanes, loads, strict=True):
                                lane.update(loaded)
                        LaneEmitter(em, c.n_iv, n_j, width).emit(prefetch.rest, local_map, lanes)

    def _stage_chunk(
        self,
        acc: SSAValue,
        chunk: int,
        index: list[SSAValue],
        fragment: tuple[SSAValue, SSAValue, SSAValue],
    ) -> None:
        """Writes the thread's accumulators of 64-column chunk `chunk` (of its bn/2) to the
        staged tile `self.staging[*index]`, 8-byte pairs at the wgmma D fragment's places
        (`fragment`: the thread's first row and column there and the row's swizzle)."""
        em = self.em
        fragment_row, fragment_column, fragment_swizzle = fragment
        columns = min(STAGE_COLUMNS, self.t.bn - chunk * STAGE_COLUMNS)  # a ragged width's last
        for half in range(2):
            row = em.add(fragment_row, 8 * half)
            for j in range(columns // 8):
                first = 4 * (chunk * STAGE_COLUMNS // 8 + j)
                pair = [
                    em.value(memref.LoadOp.get(acc, [em.index(first + 2 * half + e)]))
                    for e in range(2)
                ]
                column = self._staged_column(fragment_swizzle, em.add(fragment_column, 8 * j))
                em.op(tile.VectorStoreOp(pair, self.staging, [*index, row, column]))

    def _swizzle(self, row: SSAValue) -> SSAValue:
        """Returns 2·(row % 4) + row % 2, what the 16-byte chunks of a staged row are XORed
        with: it spreads a half-warp's fragment writes (4 rows) and a quarter-warp's epilogue
        reads (2 rows) over all 32 banks."""
        quad = self.em.rem(row, 4)
        return self.em.add(self.em.mul(quad, 2), self.em.rem(quad, 2))

    def _staged_column(self, swizzle: SSAValue, column: SSAValue) -> SSAValue:
        """Returns where column `column` of a staged row with that swizzle lies."""
        em = self.em
        chunk = em.value(arith.XOrIOp(em.div(column, 4), swizzle))
        return em.add(em.mul(chunk, 4), em.rem(column, 4))
