"""Schedule rule for contractions (matmul, batched matmul) with fused prologue and epilogue.

The classic SGEMM ladder in one schedule: a block computes a BM×BN tile of the output, walking
K in steps of BK. Each step stages the A-side (BM×BK) and B-side (BK×BN) operands in shared
memory, each evaluated by the fused prologue (e.g. `x + bias`) as it is loaded, with vector
loads along whichever axis the operand is contiguous in. Each thread then accumulates a TM×TN
register tile from shared memory. The epilogue (bias, activation, cast) runs on the registers
and stores with vector stores. Out-of-range rows, columns and K are padded with zeros.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, f32, i64
from xdsl.ir import Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.emit import (
    Emitter,
    LaneEmitter,
    Mapping,
    inline_region,
    vector_width,
)
from tinyopt.passes.tile.gemm.contraction_cp_async import CpAsyncPipeline, copied_side, plain_load
from tinyopt.passes.tile.gemm.contraction_swizzle import swizzled, swizzled_shape
from tinyopt.passes.tile.gemm.contraction_tma import (
    TmaPipeline,
    TmaSide,
    tensor_map_args,
    tma_side,
)
from tinyopt.passes.tile.gemm.next_tile_prefetch import (
    PrefetchedSide,
    prefetch_tile,
    prefetched_side,
    prefetches,
)
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.gemm.contraction_match import (
    Contraction,
    match_contraction,
    operand_types,
)
from tinyopt.passes.tile.gemm.contraction_plan import (
    K_VECTOR,
    SHARED_LIMIT,
    TENSOR_CORE_ONLY,
    UNROLLED_HELPERS,
    Tiles,
    blocks_per_sm,
    choose_tiles,
    interleaves,
    resolve_copy,
    row_major,
    serpentine,
    stream_k_blocks,
    stream_k_unit,
    tile_refusal,
    two_steps_per_iteration,
)
from tinyopt.passes.tile.gemm.stream_k import (
    STREAM_K_MODES,
    stream_k_kernels,
    stream_k_mode,
    stream_k_share,
)
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.rule import Rule


def tma_sides(
    c: Contraction, t: Tiles, name: str, m0: SSAValue | None, n0: SSAValue | None
) -> list[TmaSide] | str:
    """How TMA copies A and B (origins `m0`, `n0`), or why it cannot."""
    k_iv = c.reduce.body.block.args[0]
    batch_ivs = list(c.nest.body.block.args[:-2])
    sides = []
    for which, side, value, iv, origin, size in (
        ("A", c.a_side, c.a_value, c.m_iv, m0, t.bm),
        ("B", c.b_side, c.b_value, c.n_iv, n0, t.bn),
    ):
        load = plain_load(side, value, name, t.copy, which)
        if isinstance(load, str):
            return load
        copied = tma_side(load, k_iv, iv, batch_ivs, origin, size, name, which)  # type: ignore[arg-type]
        if isinstance(copied, str):
            return copied
        sides.append(copied)
    return sides


def copy_refusal(c: Contraction, t: Tiles, name: str) -> str | None:
    """Why the copy engine `t.copy` cannot copy the contraction's operands, or None."""
    if t.copy == "tma":
        sides = tma_sides(c, t, name, None, None)
        return sides if isinstance(sides, str) else _refusal(tensor_map_args(sides, t.bk, name))
    if t.copy == "cp_async":
        batch, m, n, k = c.extents
        k_iv = c.reduce.body.block.args[0]
        for which, side, value, iv, extent, size in (
            ("A", c.a_side, c.a_value, c.m_iv, m, t.bm),
            ("B", c.b_side, c.b_value, c.n_iv, n, t.bn),
        ):
            load = plain_load(side, value, name, t.copy, which)
            if isinstance(load, str):
                return load
            copied = copied_side(load, k_iv, k, iv, None, extent, size, t.bk, t.vec, name, t.copy)  # type: ignore[arg-type]
            if isinstance(copied, str):
                return copied
    return None


def _refusal(result: object) -> str | None:
    return result if isinstance(result, str) else None


class ContractionRule(Rule[Contraction, Tiles]):
    """Tiles a contraction kernel over blocks, shared memory and per-thread registers."""

    name = "contraction"
    reads = (
        "bm bn bk tm tn split stages group minblocks pad vec splitk splitk_mode copy ws "
        "swizzle pairswap streamk interleave prefetch"
    )
    plan_type = Tiles
    selector = ("mma", "none")

    def considered(self, knobs: Knobs) -> bool:
        # Under mma=sync or wgmma a contraction the tensor-core rules left reaches this rule,
        # which refuses it rather than run it silently on CUDA cores; tf32's rule refuses its own.
        return knobs.schedule == "auto" and knobs.mma != "tf32"

    def insists(self, knobs: Knobs) -> bool:
        return True

    def match(self, kernel: loop.KernelOp) -> Contraction | str:
        return match_contraction(kernel) or "not a contraction (a sum of products over K)"

    def plan(self, kernel: loop.KernelOp, c: Contraction, knobs: Knobs) -> Tiles | str:
        if knobs.mma in TENSOR_CORE_ONLY:
            return (
                f"mma={knobs.mma} applies to sums of products of f16 or bf16 "
                f"operands (one type); kernel @{kernel.sym_name.data} reads "
                f"{' and '.join(operand_types(c))} (leave mma=none for CUDA cores)"
            )
        batch, m, n, _ = c.extents
        resolved = resolve_copy(knobs, batch, m, n, self.target.sms)
        if resolved.copy == "tma" and knobs.copy == "auto":
            plan = self._plan(kernel, c, resolved, resolved.copy)
            if not isinstance(plan, str):
                return plan
            # TMA cannot copy an operand (a fused prologue, rows that are not 16-byte
            # multiples): the defaulted copy engine falls back to register staging.
            return self._plan(kernel, c, replace(knobs, copy="ld"), resolved.copy)
        return self._plan(kernel, c, resolved, resolved.copy)

    def _plan(self, kernel: loop.KernelOp, c: Contraction, knobs: Knobs, copy: str) -> Tiles | str:
        """The plan for knobs whose copy engine is decided (`copy`: the engine the knobs
        resolved to before a fallback, which decides stream-K)."""
        batch, m, n, _ = c.extents
        name = kernel.sym_name.data
        t = choose_tiles(knobs, batch, m, n, self.target.sms)
        if isinstance(t, str):
            return t
        t = replace(t, vec=knobs.vec or 4)
        if refusal := copy_refusal(c, t, name):
            return refusal
        grid = (-(-n // t.bn), -(-m // t.bm), batch)
        t = replace(t, minblocks=blocks_per_sm(knobs, t, grid, self.target.sms))
        streamk = stream_k_mode(kernel, c, knobs, copy, t, self.target.sms)
        if isinstance(streamk, str) and streamk not in STREAM_K_MODES:
            return streamk
        prefetch = prefetches(
            knobs.prefetch,
            t.copy,
            t.stages,
            streamk != "off",
            self._prefetched_sides(c, t),
            batch,
            grid[0] * grid[1] * grid[2],
            self.target.sms * t.minblocks,
            t.block_threads,
            name,
        )
        if isinstance(prefetch, str):
            return prefetch
        interleave = interleaves(knobs.interleave, t, c, streamk != "off", prefetch)
        if isinstance(interleave, str):
            return interleave
        return replace(
            t,
            streamk=streamk,
            prefetch="on" if prefetch else "off",
            interleave="on" if interleave else "off",
        )

    def check(self, kernel: loop.KernelOp, c: Contraction, plan: Tiles) -> str | None:
        if plan.copy not in ("ld", "cp_async", "tma") or plan.interleave not in ("on", "off"):
            return "copy must be ld, cp_async or tma and interleave on or off"
        if plan.prefetch not in ("on", "off"):
            return f"prefetch must be on or off, got {plan.prefetch}"
        if (plan.streamk != "off") != bool(stream_k_blocks(kernel)[0]):
            return (
                "streamk is decided when the kernel is planned (stream-K adds its workspace "
                "and flags): set it as an option of plan or tile, not in a plan"
            )
        return tile_refusal(plan) or copy_refusal(c, plan, kernel.sym_name.data)

    def rewrite(
        self, module: ModuleOp, kernel: loop.KernelOp, c: Contraction, plan: Tiles
    ) -> list[loop.KernelOp]:
        if plan.streamk == "off" or stream_k_blocks(kernel)[0]:
            return []
        blocks, tiles = stream_k_share(c, plan, plan.streamk, self.target.sms)
        return list(stream_k_kernels(module, kernel, c, plan, blocks, tiles))

    def _prefetched_sides(self, c: Contraction, t: Tiles) -> list[PrefetchedSide | None]:
        batch, m, n, _ = c.extents
        k_iv = c.reduce.body.block.args[0]
        return [
            prefetched_side(c.a_side, c.a_value, k_iv, c.m_iv, m, t.bm),
            prefetched_side(c.b_side, c.b_value, k_iv, c.n_iv, n, t.bn),
        ]

    def emit(
        self, kernel: loop.KernelOp, c: Contraction, t: Tiles, rewriter: PatternRewriter
    ) -> None:
        batch, m, n, _ = c.extents
        grid = (-(-n // t.bn), -(-m // t.bm), batch)
        stream_blocks, stream_tiles = stream_k_blocks(kernel) if t.copy == "ld" else (0, 0)
        whole_tiles = grid[0] * grid[1] * grid[2] - stream_tiles
        launch = (stream_blocks + whole_tiles, 1, 1) if stream_blocks else grid
        new, em, mapping = new_kernel(kernel, launch, (t.block_threads, 1, 1))
        new.attributes["tile.min_blocks"] = IntegerAttr(t.minblocks, i64)
        emitter = _ContractionEmitter(em, c, t, t.vec, mapping, grid, kernel.sym_name.data)
        emitter.stream_blocks, emitter.stream_tiles = stream_blocks, stream_tiles
        if t.prefetch == "on":
            emitter.prefetch_sides = self._prefetched_sides(c, t)
            emitter.prefetch_ahead = self.target.sms * t.minblocks
        emitter.interleave = t.interleave == "on"
        if stream_blocks:
            *_, workspace, flags = kernel.body.block.args
            emitter.stream_buffers = (mapping[workspace], mapping[flags])
        emitter.emit()
        replace_kernel(rewriter, kernel, new)


@dataclass
class _Staging:
    """How one operand side is copied into shared memory [BK][outer]: axis, width, chunks."""

    side: list[Operation]
    value: SSAValue
    outer_iv: SSAValue
    outer0: SSAValue
    outer_extent: int
    along_k: bool
    width: int
    chunks: int
    per_thread: int
    regs: SSAValue
    smem: SSAValue


class _ContractionEmitter:
    """Emits the tiled contraction for one block."""

    def __init__(
        self,
        em: Emitter,
        c: Contraction,
        t: Tiles,
        vec: int,
        mapping: Mapping,
        grid: tuple[int, int, int],
        name: str,
    ) -> None:
        self.em, self.c, self.t, self.vec, self.mapping = em, c, t, vec, mapping
        self.grid, self.name = grid, name
        self.batch, self.m, self.n, self.k = c.extents
        self.steps = -(-self.k // t.bk)
        """K steps per tile."""

    def emit(self) -> None:
        em, c, t = self.em, self.c, self.t
        mapping = self.mapping
        for op in c.prologue:
            em.op(op.clone(value_mapper=mapping))
        tid = em.value(tile.ThreadIdOp("x"))
        self.tx, self.ty = em.rem(tid, t.bn // t.tn), em.div(tid, t.bn // t.tn)
        self.tid = tid
        block_m, block_n = self._block_coordinates()
        self.m0, self.n0 = em.mul(block_m, t.bm), em.mul(block_n, t.bn)
        if len(c.nest.extents) == 3:
            mapping[c.nest.body.block.args[0]] = em.value(tile.BlockIdOp("z"))
        if t.copy == "cp_async":
            self._copied_pipeline()
            return
        if t.copy == "tma":
            self._tma_pipeline()
            return
        a = self._staging(c.a_side, c.a_value, c.m_iv, self.m0, self.m, t.bm)
        b = self.b = self._staging(c.b_side, c.b_value, c.n_iv, self.n0, self.n, t.bn)
        acc = self._accumulators()
        if self.stream_blocks:
            self._stream_k(a, b, acc)
            return
        if t.stages == 1:
            with em.for_loop(0, self.steps, 1) as (step, _, _):
                for s in (a, b):
                    self._load(s, step)
                    self._fill(s, em.index(0))
                em.op(tile.BarrierOp())
                self._accumulate(a.smem, b.smem, em.index(0), acc)
                em.op(tile.BarrierOp())
                em.op(scf.YieldOp())
        else:
            prefetch = self._prefetch_next_tile if self.prefetch_sides else None
            self._double_buffered(a, b, acc, 0, self.steps, prefetch=prefetch)
        self._epilogue(acc)

    interleave = False
    """Whether the double-buffered K loop copies A's and B's next slices in turn (`interleaves`)."""
    stream_blocks = 0
    """Blocks sharing the K steps (stream-K, `passes/tile/gemm/stream_k.py`), or 0."""
    stream_tiles = 0
    """The tiles those blocks share, the first in launch order; one block runs each other."""
    stream_buffers: tuple[SSAValue, SSAValue]
    """Stream-K's partial-sum workspace and flags."""
    prefetch_sides: Sequence[PrefetchedSide | None] = ()
    """A's and B's plain loads where the K loop prefetches the next tile (`prefetches`)."""
    prefetch_ahead = 0
    """How many blocks later in launch order the tile that takes this block's slot starts."""

    def _double_buffered(
        self,
        a: _Staging,
        b: _Staging,
        acc: SSAValue,
        first: SSAValue | int,
        stop: SSAValue | int,
        even: bool = False,
        rotation: SSAValue | None = None,
        prefetch: Callable[[], None] | None = None,
    ) -> None:
        """The K loop over steps first..stop with double-buffered shared memory: each step
        loads the next step's slices into registers while it computes from one buffer, then
        fills the other; one barrier per step. `even`: stop - first is known to be even.
        `rotation`: step s copies K step (s + rotation) mod steps (stream-K's order).
        `prefetch`: emitted first in the last iteration, two steps before the loop ends where
        the count allows (constant bounds only)."""
        em, t = self.em, self.t
        two = two_steps_per_iteration(t)

        def prefetch_if_last(step: SSAValue) -> None:
            if prefetch is None:
                return
            assert isinstance(first, int) and isinstance(stop, int)
            last = first + (stop - 1 - first) // 2 * 2 if two else max(stop - 2, first)
            with em.when([em.value(arith.CmpiOp(step, em.index(last), "eq"))]):
                prefetch()

        def k_step(step: SSAValue) -> SSAValue:
            return step if rotation is None else em.rem(em.add(step, rotation), self.steps)

        start = em.index(first) if isinstance(first, int) else first
        for s in (a, b):
            self._load(s, k_step(start))
            self._fill(s, em.index(0))
        em.op(tile.BarrierOp())
        if isinstance(stop, int):
            last = em.index(max(stop - 1, 0))
        else:
            last = em.value(arith.SubiOp(stop, em.index(1)))

        def one_step(step: SSAValue, current: SSAValue, other: SSAValue) -> None:
            # The last step loads its own K slice again (clamped: in range) and fills the
            # buffer nobody reads any more, so the step has no branch around the copy.
            following = k_step(em.value(arith.MinSIOp(em.add(step, 1), last)))
            # Which sides' next slices are copied around which of the step's K values: both
            # around all, or (`interleave`) each around half, in registers half a step only.
            half = t.bk // 2
            together = [((a, b), (0, t.bk))]
            copies = [((a,), (0, half)), ((b,), (half, t.bk))] if self.interleave else together
            for sides, k_range in copies:
                for s in sides:
                    self._load(s, following)
                self._accumulate(a.smem, b.smem, current, acc, k_range=k_range)
                for s in sides:
                    self._fill(s, other)
            em.op(tile.BarrierOp())

        if two:
            # Two steps per iteration, so each reads and fills its buffers at constant
            # offsets; with an odd count the last iteration's second step is skipped.
            with em.for_loop(first, stop, 2) as (step, _, _):
                prefetch_if_last(step)
                one_step(step, em.index(0), em.index(1))
                second = em.add(step, 1)
                if isinstance(stop, int) and isinstance(first, int):
                    odd = bool((stop - first) % 2)
                else:
                    odd = not even
                with em.when([em.less(second, stop)] if odd else []):
                    one_step(second, em.index(1), em.index(0))
                em.op(scf.YieldOp())
        else:
            with em.for_loop(first, stop, 1) as (step, _, _):
                prefetch_if_last(step)
                counted = (
                    step
                    if isinstance(first, int) and first == 0
                    else em.value(arith.SubiOp(step, start))
                )
                current = em.rem(counted, 2)
                one_step(step, current, em.value(arith.SubiOp(em.index(1), current)))
                em.op(scf.YieldOp())

    def _prefetch_next_tile(self) -> None:
        """Prefetches into L2 the first K steps of the tile launched `prefetch_ahead` blocks
        after this one, which will take this block's slot (`next_tile_prefetch.py`)."""
        em, t, c = self.em, self.t, self.c
        columns, rows, batches = self.grid
        per_batch = columns * rows
        bx, by = em.value(tile.BlockIdOp("x")), em.value(tile.BlockIdOp("y"))
        linear = em.add(em.mul(by, columns), bx)
        if batches > 1:
            linear = em.add(em.mul(em.value(tile.BlockIdOp("z")), per_batch), linear)
        following = em.add(linear, self.prefetch_ahead)
        with em.when([em.less(following, per_batch * batches)]):
            local, *origins = self._tile_origin(following, dict(self.mapping))
            k_iv = c.reduce.body.block.args[0]
            sides = [(s, o) for s, o in zip(self.prefetch_sides, origins) if s is not None]
            prefetch_tile(em, local, self.tid, t.threads, k_iv, self.k, t.bk, sides)

    def _stream_k(self, a: _Staging, b: _Staging, acc: SSAValue) -> None:
        """Runs this block's work (`passes/tile/gemm/stream_k.py`). Blocks below `stream_blocks`
        share the first `stream_tiles` tiles' K steps: steps begin..end of the sequence tile
        0's steps, tile 1's, …, `segments` tile pieces at most; a tile's K steps are rotated
        so that blocks running at once copy the same K slices. A piece that starts a tile runs
        the epilogue, after adding the partial sums of the blocks holding the rest of the
        tile; one that does not writes its own partial sums to the workspace and sets this
        block's flag. Each later block runs one of the remaining tiles whole."""
        em = self.em
        blocks = self.stream_blocks
        block = em.value(tile.BlockIdOp("x"))
        whole_tiles = self.batch * self.grid[0] * self.grid[1] - self.stream_tiles
        if whole_tiles:
            with em.when([em.value(arith.CmpiOp(block, em.index(blocks), "sge"))]):
                later = em.value(arith.SubiOp(block, em.index(blocks)))
                here_a, here_b = self._at_tile(a, b, em.add(later, self.stream_tiles))
                self._double_buffered(here_a, here_b, acc, 0, self.steps)
                self._epilogue(acc)
        with em.when([em.less(block, blocks)] if whole_tiles else []):
            self._shared_steps(a, b, acc, block)

    def _shared_steps(self, a: _Staging, b: _Staging, acc: SSAValue, block_id: SSAValue) -> None:
        """Runs stream-K block `block_id`'s share of the shared tiles' K steps (`_stream_k`)."""
        em, t = self.em, self.t
        blocks = self.stream_blocks
        steps = self.steps
        unit = stream_k_unit(t, self.k)
        units = self.stream_tiles * steps // unit
        workspace, flags = self.stream_buffers
        # Shares are numbered against the launch order, so a block that waits (for the shares
        # after its own) waits only on blocks launched before it: the handoffs cannot deadlock
        # even where a later block is not resident yet.
        block = em.value(arith.SubiOp(em.index(blocks - 1), block_id))

        def first_step_of(block: SSAValue) -> SSAValue:
            return em.mul(em.div(em.mul(block, units), blocks), unit)

        def share_holding(step: SSAValue) -> SSAValue:
            """The share whose steps include `step`: the last whose first step is ≤ it."""
            after = em.mul(em.add(em.div(step, unit), 1), blocks)
            return em.div(em.value(arith.SubiOp(after, em.index(1))), units)

        first_step = first_step_of(block)
        end = first_step_of(em.add(block, 1))
        first_tile = em.div(first_step, steps)
        most, least = -(-units // blocks) * unit, units // blocks * unit
        segments = -(-most // steps) + 1
        # Shares that may hold a piece of one tile after its first: each holds ≥ `least` steps.
        helpers = -(-(steps - 1) // least)
        first_thread = em.value(arith.CmpiOp(self.tid, em.index(0), "eq"))
        cells = [(i, j) for i in range(t.tm) for j in range(t.tn)]
        with em.for_loop(0, segments, 1) as (segment, _, _):
            tile_index = em.add(first_tile, segment)
            base = em.mul(tile_index, steps)
            start = em.value(arith.MaxSIOp(first_step, base))
            stop = em.value(arith.MinSIOp(end, em.add(base, steps)))
            with em.when([em.less(start, stop)]):
                # The block holding the tile's middle step copies K step τ mod steps at its
                # τ-th step, as every block does in its whole tiles: blocks running at once
                # read the same K slices of A and B, which stay in L2 (unrotated, each block
                # was at its own K offset and the L2 hit rate at 4096³ fell from 82% to 39%).
                behind = em.rem(first_step_of(share_holding(em.add(base, steps // 2))), steps)
                rotation = em.rem(em.value(arith.SubiOp(em.index(steps), behind)), steps)
                here_a, here_b = self._at_tile(a, b, tile_index)
                self._reset(acc)
                k_first = em.value(arith.SubiOp(start, base))
                k_stop = em.value(arith.SubiOp(stop, base))
                self._double_buffered(
                    here_a, here_b, acc, k_first, k_stop, even=unit == 2, rotation=rotation
                )
                starts_tile = em.value(arith.CmpiOp(k_first, em.index(0), "eq"))

                def add_partial_sums(helper: SSAValue) -> None:
                    with em.when([first_thread]):
                        em.op(tile.FlagWaitOp(flags, helper))
                    em.op(tile.BarrierOp())
                    for e, (i, j) in enumerate(cells):
                        index = [em.index(i), em.index(j)]
                        part = em.value(
                            memref.LoadOp.get(workspace, [helper, em.index(e), self.tid])
                        )
                        mine = em.value(memref.LoadOp.get(acc, index))
                        self._store(em.value(arith.AddfOp(mine, part)), acc, index)

                with em.when([starts_tile]):
                    if helpers > UNROLLED_HELPERS:
                        # The shares after this one up to the one holding the tile's last step.
                        last = share_holding(em.add(base, steps - 1))
                        with em.for_loop(em.add(block, 1), em.add(last, 1), 1) as (helper, _, _):
                            add_partial_sums(helper)
                            em.op(scf.YieldOp())
                    else:
                        with em.when([em.less(k_stop, steps)]):
                            for h in range(helpers):
                                helper = em.add(block, h + 1)
                                later = em.less(first_step_of(helper), em.add(base, steps))
                                with em.when([later]):
                                    add_partial_sums(helper)
                    self._epilogue(acc)
                with em.when([em.value(arith.CmpiOp(k_first, em.index(0), "ne"))]):
                    for e, (i, j) in enumerate(cells):
                        value = em.value(memref.LoadOp.get(acc, [em.index(i), em.index(j)]))
                        self._store(value, workspace, [block, em.index(e), self.tid])
                    em.op(tile.ThreadFenceOp())
                    em.op(tile.BarrierOp())
                    with em.when([first_thread]):
                        em.op(tile.FlagSetOp(flags, block))
            em.op(scf.YieldOp())

    def _at_tile(self, a: _Staging, b: _Staging, tile_index: SSAValue) -> tuple[_Staging, _Staging]:
        """Points the block at the `tile_index`-th tile in launch order (batches outermost):
        its batch, origin (m0, n0) and the two sides' staging there."""
        self.mapping, self.m0, self.n0 = self._tile_origin(tile_index, self.mapping)
        here_a, here_b = replace(a, outer0=self.m0), replace(b, outer0=self.n0)
        self.b = here_b
        return here_a, here_b

    def _tile_origin(
        self, tile_index: SSAValue, mapping: Mapping
    ) -> tuple[Mapping, SSAValue, SSAValue]:
        """Returns `mapping` with the batch of the `tile_index`-th tile in launch order
        (batches outermost), and that tile's origin (m0, n0)."""
        em, t, c = self.em, self.t, self.c
        per_batch = self.grid[0] * self.grid[1]
        if len(c.nest.extents) == 3:
            mapping[c.nest.body.block.args[0]] = em.div(tile_index, per_batch)
        row, column = self._tile_coordinates(em.rem(tile_index, per_batch))
        return mapping, em.mul(row, t.bm), em.mul(column, t.bn)

    def _accumulators(self) -> SSAValue:
        """Allocates the tm×tn register tile, set to the reduction's identity."""
        t = self.t
        acc = self.em.value(tile.AllocOp(tile.memref_in([t.tm, t.tn], f32, tile.REGISTERS)))
        self._reset(acc)
        return acc

    def _reset(self, acc: SSAValue) -> None:
        """Sets the register tile to the reduction's identity."""
        t, c = self.t, self.c
        init = self.mapping.get(c.reduce.init[0], c.reduce.init[0])
        self._each(t.tm, lambda i: self._each(t.tn, lambda j: self._store(init, acc, [i, j])))

    def _copied_pipeline(self) -> None:
        """The K loop with both sides copied global → shared by cp.async into a ring."""
        em, t, c = self.em, self.t, self.c
        k_iv = c.reduce.body.block.args[0]
        sides = []
        for which, side, value, iv, origin, extent, size in (
            ("A", c.a_side, c.a_value, c.m_iv, self.m0, self.m, t.bm),
            ("B", c.b_side, c.b_value, c.n_iv, self.n0, self.n, t.bn),
        ):
            load = plain_load(side, value, self.name, t.copy, which)
            assert not isinstance(load, str), "the plan checked it (copy_refusal)"
            copied = copied_side(
                load, k_iv, self.k, iv, origin, extent, size, t.bk, self.vec, self.name, t.copy
            )
            assert not isinstance(copied, str), "the plan checked it (copy_refusal)"
            sides.append(copied)
        shapes = [s.shape(t.stages, t.bk, t.pad) for s in sides]
        if t.swizzle:
            shapes = [swizzled_shape(shape) for shape in shapes]
        dynamic = sum(4 * math.prod(shape) for shape in shapes) > SHARED_LIMIT
        for s, shape in zip(sides, shapes, strict=True):
            s.smem = em.value(tile.AllocOp(tile.memref_in(shape, f32, tile.SHARED), dynamic))
        acc = self._accumulators()
        a, b = sides
        pipeline = CpAsyncPipeline(
            em, self.mapping, self.tid, t.threads, k_iv, self.k, t.bk, t.stages, t.swizzle
        )
        pipeline.emit(
            sides,
            lambda slot: self._accumulate(a.smem, b.smem, slot, acc, a.k_major, b.k_major),
        )
        self._epilogue(acc)

    def _tma_pipeline(self) -> None:
        """The K loop with both sides copied by TMA into an mbarrier ring (contraction_tma.py)."""
        em, t = self.em, self.t
        sides = tma_sides(self.c, t, self.name, self.m0, self.n0)
        assert not isinstance(sides, str), "the plan checked it (copy_refusal)"
        kernel = em.block.parent_op()
        assert kernel is not None
        maps = tensor_map_args(sides, t.bk, self.name)
        assert not isinstance(maps, str), "the plan checked it (copy_refusal)"
        tile.set_tensor_maps(kernel, maps)
        for s in sides:
            shape = s.shape(t.stages, t.bk)
            s.smem = em.value(tile.AllocOp(tile.memref_in(shape, f32, tile.SHARED), True))
        acc = self._accumulators()
        a, b = sides
        pipeline = TmaPipeline(
            em, self.mapping, list(em.block.args), self.tid, t.threads, self.k, t.bk, t.stages, t.ws
        )
        pipeline.emit(
            sides,
            lambda slot: self._accumulate(a.smem, b.smem, slot, acc, a.k_major, b.k_major),
            lambda: self._epilogue(acc),
        )

    def _block_coordinates(self) -> tuple[SSAValue, SSAValue]:
        """Returns (block row, block column), grouped by `group` block rows when asked."""
        em, t = self.em, self.t
        if self.stream_blocks:  # set per tile (`_stream_k`)
            return em.index(0), em.index(0)
        bx, by = em.value(tile.BlockIdOp("x")), em.value(tile.BlockIdOp("y"))
        columns, rows = self.grid[0], self.grid[1]
        if not t.group or t.group >= rows:
            return by, bx
        return self._tile_coordinates(em.add(em.mul(by, columns), bx))

    def _tile_coordinates(self, linear: SSAValue) -> tuple[SSAValue, SSAValue]:
        """Returns (row, column) of the `linear`-th tile of a batch in launch order: row-major,
        or with `group` down the rows of each group of `group` block rows first."""
        em, t = self.em, self.t
        columns, rows = self.grid[0], self.grid[1]
        if not t.group or t.group >= rows:
            return em.div(linear, columns), em.rem(linear, columns)
        per_group = t.group * columns
        first_row = em.mul(em.div(linear, per_group), t.group)
        height = em.value(
            arith.MinSIOp(em.value(arith.SubiOp(em.index(rows), first_row)), em.index(t.group))
        )
        within = em.rem(linear, per_group)
        row = em.add(first_row, em.value(arith.RemUIOp(within, height)))
        column = em.value(arith.DivUIOp(within, height))
        return row, column

    def _store(self, value: SSAValue, buffer: SSAValue, indices: Sequence[SSAValue]) -> None:
        self.em.op(memref.StoreOp.get(value, buffer, list(indices)))

    def _each(self, count: int, body) -> None:
        """Emits a fully unrolled loop `for i in 0..count` (register indices must be constant)."""
        em = self.em
        with em.for_loop(0, count, 1, unroll=True) as (i, _, _):
            body(i)
            em.op(scf.YieldOp())

    def _staging(
        self,
        side: list[Operation],
        value: SSAValue,
        outer_iv: SSAValue,
        outer0: SSAValue,
        outer_extent: int,
        tile_outer: int,
    ) -> _Staging:
        """Chooses how a side is staged: vectors along whichever axis its loads are contiguous."""
        em, t, c = self.em, self.t, self.c
        k_iv = c.reduce.body.block.args[0]
        along_k = vector_width(side, k_iv, t.bk, self.vec)
        along_k = along_k if self.k % along_k == 0 else 1
        along_outer = vector_width(side, outer_iv, tile_outer, self.vec)
        along_outer = along_outer if outer_extent % along_outer == 0 else 1
        width = max(along_k, along_outer)
        chunks = tile_outer * t.bk // width
        per_thread = -(-chunks // t.threads)
        regs = em.value(tile.AllocOp(tile.memref_in([per_thread, width], f32, tile.REGISTERS)))
        smem = em.value(
            tile.AllocOp(tile.memref_in([t.stages, t.bk, tile_outer + t.pad], f32, tile.SHARED))
        )
        return _Staging(
            side,
            value,
            outer_iv,
            outer0,
            outer_extent,
            along_outer <= along_k,
            width,
            chunks,
            per_thread,
            regs,
            smem,
        )

    def _chunk(self, s: _Staging, index: int) -> tuple[SSAValue, SSAValue, SSAValue]:
        """Returns (chunk number, k offset, outer offset) of this thread's `index`-th chunk."""
        em, t = self.em, self.t
        fast_extent = (t.bk if s.along_k else s.smem.type.get_shape()[2] - t.pad) // s.width
        e = em.add(self.tid, index * t.threads)
        if t.threads % fast_extent == 0:
            # Every chunk of this thread sits in the same column, `threads / fast_extent` rows
            # apart: the offsets are constants, so all chunks share one address register.
            fast = em.mul(em.rem(self.tid, fast_extent), s.width)
            slow = em.add(em.div(self.tid, fast_extent), index * (t.threads // fast_extent))
        else:
            fast = em.mul(em.rem(e, fast_extent), s.width)
            slow = em.div(e, fast_extent)
        return (e, fast, slow) if s.along_k else (e, slow, fast)

    def _load(self, s: _Staging, step: SSAValue) -> None:
        """Evaluates the side (prologue included) on this thread's chunks into registers."""
        em, t, c = self.em, self.t, self.c
        k_iv = c.reduce.body.block.args[0]
        k0 = em.mul(step, t.bk)
        for index in range(s.per_thread):
            e, kk, oo = self._chunk(s, index)
            k, o = em.add(k0, kk), em.add(s.outer0, oo)
            tile_outer = s.smem.type.get_shape()[2] - t.pad
            # Guards only where a tile can run past the data: none when the shape divides.
            checks = [
                *([em.less(k, self.k)] if self.k % t.bk else []),
                *([em.less(o, s.outer_extent)] if s.outer_extent % tile_outer else []),
                *([em.less(e, s.chunks)] if (index + 1) * t.threads > s.chunks else []),
            ]
            local = dict(self.mapping) | {k_iv: k, s.outer_iv: o}
            fast_iv, start = (k_iv, k) if s.along_k else (s.outer_iv, o)

            def side_lanes(local=local, fast_iv=fast_iv, start=start) -> list[SSAValue]:
                lanes = LaneEmitter(em, fast_iv, start, s.width).emit(
                    [*s.side, loop.YieldOp(s.value)], local
                )
                return [lane[0] for lane in lanes]

            if not checks:
                values = side_lanes()
            else:
                with em.if_(em.all_of(checks), [f32] * s.width) as (then_block, else_block, if_op):
                    with em.into(then_block):
                        em.op(scf.YieldOp(*side_lanes()))
                    assert else_block is not None
                    with em.into(else_block):
                        em.op(scf.YieldOp(*[em.f32(0.0)] * s.width))
                values = list(if_op.results)
            for lane, v in enumerate(values):
                self._store(v, s.regs, [em.index(index), em.index(lane)])

    def _fill(self, s: _Staging, buffer: SSAValue) -> None:
        """Writes this thread's loaded chunks from registers into shared buffer `buffer`."""
        em, t = self.em, self.t
        for index in range(s.per_thread):
            e, kk, oo = self._chunk(s, index)
            values = [
                em.value(memref.LoadOp.get(s.regs, [em.index(index), em.index(lane)]))
                for lane in range(s.width)
            ]
            partial = (index + 1) * t.threads > s.chunks
            swapped = self.t.pairswap and s is self.b
            with em.when([em.less(e, s.chunks)] if partial else []):
                if s.along_k or s.width == 1:
                    column = em.value(arith.XOrIOp(oo, em.index(1))) if swapped else oo
                    for lane, v in enumerate(values):
                        self._store(v, s.smem, [buffer, em.add(kk, lane), column])
                else:
                    if swapped:
                        values = [values[lane ^ 1] for lane in range(s.width)]
                    em.op(tile.VectorStoreOp(values, s.smem, [buffer, kk, oo]))

    def _shared(self, index: list[SSAValue], row_length: int) -> list[SSAValue]:
        """Returns where element `index` of a staged tile is (swizzled with `swizzle=1`)."""
        return swizzled(self.em, index, row_length) if self.t.swizzle else index

    def _fragment(
        self, smem: SSAValue, buffer: SSAValue, kk: SSAValue, start: SSAValue, count: int, half: int
    ) -> list[SSAValue]:
        """Reads a thread's `count` operand values at `start` (+ `half` for the split layout)."""
        em = self.em
        parts = self.t.split
        per_part = count // parts
        width = 4 if per_part % 4 == 0 else 1
        values: list[SSAValue] = []
        for part in range(parts):
            base = em.add(start, part * half)
            for offset in range(0, per_part, width):
                index = self._shared([buffer, kk, em.add(base, offset)], half * parts)
                if width == 1:
                    values.append(em.value(memref.LoadOp.get(smem, index)))
                else:
                    lanes = em.op(tile.VectorLoadOp(smem, index, width)).results
                    if self.t.pairswap and smem is self.b.smem:
                        lanes = [lanes[lane ^ 1] for lane in range(width)]
                    values.extend(lanes)
        return values

    def _rows(
        self, smem: SSAValue, buffer: SSAValue, k0: SSAValue, start: SSAValue, count: int, half: int
    ) -> list[list[SSAValue]]:
        """Reads a thread's `count` operand rows of a K-major tile `[outer][BK]` at K
        `k0..k0+3`, one 16-byte vector per row; returns the values by K, then by row."""
        em = self.em
        per_part = count // self.t.split
        rows = []
        for part in range(self.t.split):
            for offset in range(per_part):
                row = em.add(em.add(start, part * half), offset)
                index = self._shared([buffer, row, k0], self.t.bk)
                rows.append(em.op(tile.VectorLoadOp(smem, index, K_VECTOR)).results)
        return [[row[sub] for row in rows] for sub in range(K_VECTOR)]

    def _accumulate(
        self,
        a_smem: SSAValue,
        b_smem: SSAValue,
        buffer: SSAValue,
        acc: SSAValue,
        a_k_major: bool = False,
        b_k_major: bool = False,
        k_range: tuple[int, int] | None = None,
    ) -> None:
        """Accumulates one staged K step. A `[BK][outer]` side gives 16-byte vectors along its
        outer dimension per K; a K-major `[outer][BK]` side (copied as it lies in memory) gives
        them along K, so the loop then walks K in groups of 4 and reads those rows once."""
        em, t, c = self.em, self.t, self.c
        group = K_VECTOR if a_k_major or b_k_major else 1
        a_start, b_start = em.mul(self.ty, t.tm // t.split), em.mul(self.tx, t.tn // t.split)
        k_first, k_stop = k_range or (0, t.bk)
        with em.for_loop(k_first, k_stop, group, unroll=True) as (k0, _, _):
            a_rows = (
                self._rows(a_smem, buffer, k0, a_start, t.tm, t.bm // t.split)
                if a_k_major
                else None
            )
            b_rows = (
                self._rows(b_smem, buffer, k0, b_start, t.tn, t.bn // t.split)
                if b_k_major
                else None
            )
            for sub in range(group):
                kk = em.add(k0, sub)
                a = (
                    a_rows[sub]
                    if a_rows
                    else self._fragment(a_smem, buffer, kk, a_start, t.tm, t.bm // t.split)
                )
                b = (
                    b_rows[sub]
                    if b_rows
                    else self._fragment(b_smem, buffer, kk, b_start, t.tn, t.bn // t.split)
                )
                order = serpentine(t.tm, t.tn) if t.pairswap else row_major(t.tm, t.tn)
                for i, j in order:
                    where = [em.index(i), em.index(j)]
                    old = em.value(memref.LoadOp.get(acc, where))
                    product = em.value(
                        c.product.clone(value_mapper={c.a_value: a[i], c.b_value: b[j]})
                    )
                    (new,) = inline_region(em, c.reduce.combine, [old, product], self.mapping)
                    em.op(memref.StoreOp.get(new, acc, where))
            em.op(scf.YieldOp())

    def _row_of(self, i: int) -> SSAValue:
        """Returns the output row of register row `i` (the split layout puts halves apart)."""
        em, t = self.em, self.t
        per_part = t.tm // t.split
        part, offset = divmod(i, per_part)
        local = em.add(em.mul(self.ty, per_part), part * (t.bm // t.split) + offset)
        return em.add(self.m0, local)

    def _epilogue(self, acc: SSAValue) -> None:
        em, t, c = self.em, self.t, self.c
        per_part = t.tn // t.split
        width = vector_width(c.epilogue, c.n_iv, per_part, 4)
        width = width if self.n % width == 0 else 1
        result = c.reduce.res[0]
        for i in range(t.tm):
            m = self._row_of(i)
            for j0 in range(0, t.tn, width):
                part, offset = divmod(j0, per_part)
                local_n = em.add(em.mul(self.tx, per_part), part * (t.bn // t.split) + offset)
                n = em.add(self.n0, local_n)
                ragged = self.m % t.bm or self.n % t.bn
                with em.when([em.less(m, self.m), em.less(n, self.n)] if ragged else []):
                    values = [
                        em.value(memref.LoadOp.get(acc, [em.index(i), em.index(j0 + lane)]))
                        for lane in range(width)
                    ]
                    local = dict(self.mapping) | {c.m_iv: m}
                    LaneEmitter(em, c.n_iv, n, width).emit(
                        c.epilogue, local, [{result: v} for v in values]
                    )
