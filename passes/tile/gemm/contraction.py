"""Schedule rule for contractions (matmul, batched matmul) on CUDA cores, with fused prologue
and epilogue: match, plan (`contraction_plan.py`), emit (`contraction_emit.py`, and
`stream_k.py` where the plan shares K steps)."""

from __future__ import annotations

from dataclasses import replace

from xdsl.dialects import memref
from xdsl.dialects.builtin import IntegerAttr, ModuleOp, i64
from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop
from tinyopt.passes.tile.gemm.contraction_tma import tensor_map_args
from tinyopt.passes.tile.gemm.next_tile_prefetch import PrefetchedSide, prefetched_side, prefetches
from tinyopt.passes.tile.kernel import new_kernel, replace_kernel
from tinyopt.passes.tile.gemm.contraction_match import Contraction, match_contraction, operand_types
from tinyopt.passes.tile.gemm.contraction_plan import (
    TENSOR_CORE_ONLY,
    Tiles,
    blocks_per_sm,
    choose_tiles,
    interleaves,
    row_block,
    resolve_copy,
    stream_k_blocks,
    tile_refusal,
)
from tinyopt.passes.tile.gemm.contraction_emit import ContractionEmitter, copied_sides
from tinyopt.passes.tile.gemm.stream_k import (
    STREAM_K_MODES,
    StreamKEmitter,
    stream_k_kernels,
    stream_k_mode,
    stream_k_share,
)
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.rule import Rule


def b_k_major(c: Contraction) -> bool:
    """Whether B is read along K in memory (`w[n, k]`, a torch linear's weight)."""
    (k,) = c.reduce.body.block.args
    loads = [op for op in c.b_side if isinstance(op, memref.LoadOp)]
    return bool(loads) and loads[-1].indices[-1] is k


def copy_refusal(c: Contraction, t: Tiles, name: str) -> str | None:
    """Why the copy engine `t.copy` cannot copy the contraction's operands, or None."""
    if t.copy == "ld":
        return None
    sides = copied_sides(c, t, name, None, None)
    if isinstance(sides, str):
        return sides
    maps = tensor_map_args(sides, t.bk, name) if t.copy == "tma" else []  # type: ignore[arg-type]
    return maps if isinstance(maps, str) else None


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
        resolved = resolve_copy(knobs, batch, m, n, self.target.sms, b_k_major(c))
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
        batch, m, n, k = c.extents
        rows = row_block(knobs, batch, m, n, k, self.target)
        if rows is not None:
            plan = self._plan_tiles(kernel, c, knobs, copy, rows)
            if not isinstance(plan, str) and plan.streamk != "off":
                return plan
        strict = choose_tiles(knobs, batch, m, n, self.target)
        shared = choose_tiles(knobs, batch, m, n, self.target, k)
        if isinstance(shared, str) or shared == strict:
            return self._plan_tiles(kernel, c, knobs, copy, strict)
        # A larger tile counting on stream-K to fill the SMs: only where stream-K takes it.
        plan = self._plan_tiles(kernel, c, knobs, copy, shared)
        if isinstance(plan, str) or plan.streamk == "off":
            return self._plan_tiles(kernel, c, knobs, copy, strict)
        return plan

    def _plan_tiles(
        self, kernel: loop.KernelOp, c: Contraction, knobs: Knobs, copy: str, t: Tiles | str
    ) -> Tiles | str:
        """The plan for a block tiling (or why there is none)."""
        batch, m, n, _ = c.extents
        name = kernel.sym_name.data
        if isinstance(t, str):
            return t
        t = replace(t, vec=knobs.vec or 4)
        if refusal := copy_refusal(c, t, name):
            return refusal
        grid = (-(-n // t.bn), -(-m // t.bm), batch)
        t = replace(t, minblocks=blocks_per_sm(knobs, t))
        streamk = stream_k_mode(kernel, c, knobs, copy, t, self.target.sms)
        if isinstance(streamk, str) and streamk not in STREAM_K_MODES:
            return streamk
        sides = self._prefetched_sides(c, t)
        prefetch = prefetches(
            knobs.prefetch, t, streamk != "off", sides, grid, self.target.sms, name
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
        return tile_refusal(plan, self.target) or copy_refusal(c, plan, kernel.sym_name.data)

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
        emitter_type = StreamKEmitter if stream_blocks else ContractionEmitter
        emitter = emitter_type(em, c, t, mapping, grid, kernel.sym_name.data)
        emitter.stream_blocks, emitter.stream_tiles = stream_blocks, stream_tiles
        emitter.static_shared = self.target.static_shared
        if t.prefetch == "on":
            emitter.prefetch_sides = self._prefetched_sides(c, t)
            emitter.prefetch_ahead = self.target.sms * t.minblocks
        emitter.interleave = t.interleave == "on"
        if stream_blocks:
            *_, workspace, flags = kernel.body.block.args
            emitter.stream_buffers = (mapping[workspace], mapping[flags])
        emitter.emit()
        replace_kernel(rewriter, kernel, new)
