"""Stream-K: a contraction's K steps shared evenly by one wave of blocks.

A grid of output tiles rarely divides into whole waves of blocks; the last, part-idle wave
costs its idle slots (measured 2026-12-01: benchmarks/RESULTS.md, "2026-12-01: stream-K for
the FP32 contraction (issue 3)"). With stream-K (Osama et al., PPoPP 2023) the kernel launches
one block per slot and gives each the same number of K steps of the sequence "tile 0's steps,
tile 1's, …". A block's share covers whole tiles, for which it runs the epilogue, plus at most
two pieces: the tail of a tile, at its start, whose partial sums it writes to a workspace before
setting its flag (a release store); and the head of a tile, at its end, for which it waits for
the flags of the blocks holding the rest (acquire loads), adds their partial sums and runs the
epilogue. Each tile's steps run rotated so that blocks running at once copy the same K slices
(`_shared_steps`). `streamk=tail` shares only the tiles past the last whole wave, launched
first; one block runs each other tile.

Shares are numbered against the launch order (the first block launched holds the last share),
so a block waits only for blocks launched before it and the handoffs cannot deadlock as long
as blocks start in index order (tests/test_stream_k_on_cpu.py runs them one after another). A
zeroing kernel clears the flags before each launch. This file decides where stream-K applies,
rewrites the loop kernel (two more buffers, the zeroing kernel) and emits the shared K steps
(`StreamKEmitter`).
"""

from __future__ import annotations

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import DenseArrayBase, MemRefType, ModuleOp, f32, i32, i64
from xdsl.ir import Operation, SSAValue

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.gemm.contraction_emit import ContractionEmitter, Staging
from tinyopt.passes.tile.gemm.contraction_match import Contraction
from tinyopt.passes.tile.gemm.contraction_plan import (
    STREAM_K_ATTR,
    TILE_KNOBS,
    UNROLLED_HELPERS,
    Tiles,
    stream_k_blocks,
    stream_k_unit,
)
from tinyopt.passes.tile.emit import Emitter
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.gemm.mma_sync import tensor_core_type
from tinyopt.passes.tile.gemm.split_k import derived_kernel, replace_kernels

AUTO_WAVES = 3
AUTO_LOSS = 0.10
AUTO_STEPS = 32
"""`streamk=auto` takes stream-K where the tiles make fewer than `AUTO_WAVES` waves of blocks,
whole-tile waves would leave more than `AUTO_LOSS` of the block slots idle, and each tile has
at least `AUTO_STEPS` K steps; never where a pass option set a tile knob or `minblocks`
(measured 2026-12-01: benchmarks/RESULTS.md, "Why stream-K lost past a few waves …"; at 48
steps, K = 768, stream-K over four blocks per SM ran 1.03–1.27× faster than whole tiles in
three shapes, 2026-12-02: "Run 3", the skinny table)."""

INDEX_LIMIT = 2**31
"""The block's first step is block × steps / blocks in 32-bit index arithmetic."""

STREAM_K_MODES = ("off", "on", "tail")


def stream_k_mode(
    kernel: loop.KernelOp, c: Contraction, knobs: Knobs, copy: str, t: Tiles, sms: int
) -> str:
    """Returns how the contraction's K steps are shared (`STREAM_K_MODES`: `off`, one block
    per tile), or why `streamk=on` or `tail` cannot apply. `copy` is the copy engine the
    knobs resolve to and `t` the tiling with its `minblocks`; a kernel stream-K already
    rewrote keeps its mode."""
    blocks, shared = stream_k_blocks(kernel)
    if blocks:
        return "on" if shared == _tiles(c, t) else "tail"
    if knobs.streamk == "off":
        return "off"
    on_cuda_cores = knobs.mma == "none" or (knobs.mma == "auto" and tensor_core_type(c) is None)
    tiles, steps = _tiles(c, t), -(-c.extents[3] // t.bk)
    blocks, _ = stream_k_share(c, t, "on" if knobs.streamk == "auto" else knobs.streamk, sms)
    if not on_cuda_cores or knobs.schedule != "auto":
        reason = "it runs on the CUDA cores' contraction rule only (mma=none, or auto for f32)"
    elif knobs.splitk > 1:
        reason = f"it shares K steps itself (splitk={knobs.splitk})"
    elif copy != "ld":
        reason = f"it stages K steps through registers only (copy=ld; here copy={copy})"
    elif t.stages != 2:
        reason = f"it needs the double-buffered K loop (stages=2; here stages={t.stages})"
    elif (blocks + 1) * tiles * steps >= INDEX_LIMIT:
        reason = "the step numbers would overflow 32-bit indices"
    elif knobs.streamk == "auto":
        if any(getattr(knobs, name) for name in (*TILE_KNOBS, "minblocks")):
            return "off"  # a tile the user chose runs as chosen
        if knobs.prefetch == "on":
            return "off"  # the next tile's prefetch needs one block per tile
        waves = tiles / blocks
        idle = 1 - waves / -(-tiles // blocks)
        few = waves < AUTO_WAVES and idle > AUTO_LOSS and steps >= AUTO_STEPS
        return "on" if few else "off"
    else:
        return knobs.streamk if blocks else "off"  # whole waves leave `tail` nothing to share
    if knobs.streamk in ("on", "tail"):
        return f"streamk={knobs.streamk} does not apply: {reason}"
    return "off"


def _tiles(c: Contraction, t: Tiles) -> int:
    batch, m, n, _ = c.extents
    return -(-n // t.bn) * -(-m // t.bm) * batch


def stream_k_share(c: Contraction, t: Tiles, mode: str, sms: int) -> tuple[int, int]:
    """Returns the blocks (one wave at most) sharing K steps under `mode` (`on` or `tail`),
    and the tiles they share, the first in launch order."""
    tiles, k = _tiles(c, t), c.extents[3]
    steps = -(-k // t.bk)
    slots = sms * t.minblocks
    shared = tiles % slots if mode == "tail" else tiles
    # One wave of blocks, fewer where there are fewer units of K steps in all.
    return min(slots, shared * steps // stream_k_unit(t, k)), shared


def stream_k_kernels(
    module: ModuleOp, kernel: loop.KernelOp, c: Contraction, t: Tiles, blocks: int, tiles: int
) -> tuple[loop.KernelOp, loop.KernelOp]:
    """Puts in `kernel`'s place the flag-zeroing kernel and the kernel with the workspace and
    flags as its last two buffers (`STREAM_K_ATTR` set), launched in that order after the host
    allocates both; returns them."""
    return shared_k_kernels(module, kernel, c, [t.tm * t.tn, t.threads], blocks, tiles)


def shared_k_kernels(
    module: ModuleOp,
    kernel: loop.KernelOp,
    c: Contraction,
    per_block: list[int],
    blocks: int,
    tiles: int,
) -> tuple[loop.KernelOp, loop.KernelOp]:
    """`stream_k_kernels` with a workspace of `per_block` f32 a block (any rule's layout of a
    tile's partial sums)."""
    workspace_type = MemRefType(f32, [blocks, *per_block])
    flags_type = MemRefType(i32, [blocks])
    name = kernel.sym_name.data
    streamed, em, mapping = derived_kernel(kernel, name, [workspace_type, flags_type])
    streamed.attributes[STREAM_K_ATTR] = DenseArrayBase.from_list(i64, [blocks, tiles])
    em.op(c.nest.clone(value_mapper=mapping))
    zero = loop.KernelOp(f"{name}_flags", [flags_type])
    nest = loop.ParallelOp([blocks])
    Emitter(zero.body.block).op(nest)
    nothing = arith.ConstantOp.from_int_and_width(0, 32)
    nest.body.block.add_ops(
        [nothing, memref.StoreOp.get(nothing, zero.body.block.args[0], nest.body.block.args)]
    )

    def with_buffers(args: list[SSAValue]) -> tuple[list[Operation], list[list[SSAValue]]]:
        workspace = memref.AllocOp([], [], workspace_type)
        flags = memref.AllocOp([], [], flags_type)
        return [workspace, flags], [[flags.memref], [*args, workspace.memref, flags.memref]]

    replace_kernels(module, kernel, [zero, streamed], with_buffers)
    return zero, streamed


class StreamKEmitter(ContractionEmitter):
    """The contraction emitter whose blocks share the first tiles' K steps."""

    def _tiles(self, a: Staging, b: Staging, acc: SSAValue) -> None:
        """Blocks below `stream_blocks` share the first `stream_tiles` tiles' K steps
        (`_shared_steps`); each later block runs one of the remaining tiles whole."""
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

    def _shared_steps(self, a: Staging, b: Staging, acc: SSAValue, block_id: SSAValue) -> None:
        """Runs stream-K block `block_id`'s share, steps begin..end of the sequence tile 0's
        steps, tile 1's, …, `segments` tile pieces at most. A piece that starts a tile adds
        the partial sums of the blocks holding the rest and runs the epilogue; one that does
        not writes its partial sums to the workspace and sets this block's flag."""
        em, t = self.em, self.t
        blocks = self.stream_blocks
        steps = self.steps
        unit = stream_k_unit(t, self.k)
        units = self.stream_tiles * steps // unit
        workspace, flags = self.stream_buffers
        # Shares are numbered against the launch order (module docstring).
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
                # τ-th step, as in whole tiles, so blocks running at once read the same K
                # slices, which stay in L2 (2026-12-01: benchmarks/RESULTS.md, "Why stream-K
                # lost past a few waves …").
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
