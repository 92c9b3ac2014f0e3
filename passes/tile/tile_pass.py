"""The `tile` pass: schedules every `loop.kernel` as a `tile.kernel` by the first rule that fits."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    RewritePattern,
)
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.transforms.dead_code_elimination import dce
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.dialects import loop
from tinyopt.passes.autotune import cache as tuning
from tinyopt.passes.tile.attention.mma_sync import ScheduleAttention
from tinyopt.passes.tile.attention.wgmma import ScheduleAttentionWgmma
from tinyopt.passes.tile.gemm.contraction import ScheduleContraction
from tinyopt.passes.tile.elementwise import ScheduleElementwise
from tinyopt.passes.tile.knobs import Knobs, check
from tinyopt.passes.tile.gemm.mma_sync import ScheduleMmaSync
from tinyopt.passes.tile.gemm.paired import match_paired_contraction, unpair
from tinyopt.passes.tile.row_reduction import ScheduleRowReduction
from tinyopt.passes.tile.sequential import ScheduleSequentially
from tinyopt.passes.tile.gemm.split_k import split_kernel
from tinyopt.passes.tile.gemm.stream_k import stream_k_kernels
from tinyopt.passes.tile.gemm.tf32 import ScheduleTf32
from tinyopt.passes.tile.gemm.wgmma import ScheduleWgmma, dual_refusal


@dataclass(frozen=True)
class TilePass(Knobs, ModulePass):
    """Maps loop kernels onto grid, blocks and threads; schedule choices are the knobs.

    A kernel with an entry in the tuning cache for this GPU (docs/tuning.md) takes the tuned
    knobs, except those the pass options set.
    """

    name = "tile"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        _check(self)
        tile_kernels(ctx, op, lambda kernel: self._knobs_for(ctx, kernel))

    def _knobs_for(self, ctx: Context, kernel: loop.KernelOp) -> Knobs:
        knobs, tuned = tuning.tuned_knobs(kernel, self)
        if tuned and lowering_error(ctx, kernel, knobs) is not None:
            tuning.forget(kernel)  # stale: the rules changed since it was tuned
            return self
        return knobs


def _check(knobs: Knobs) -> None:
    try:
        check(knobs)
    except ValueError as e:
        raise DiagnosticException(str(e)) from None


def _rules(knobs: Knobs) -> GreedyRewritePatternApplier:
    rules: list[RewritePattern] = [ScheduleSequentially(knobs)]
    if knobs.schedule == "auto":
        rules = [
            ScheduleAttentionWgmma(knobs),
            ScheduleAttention(knobs),
            ScheduleWgmma(knobs),
            ScheduleMmaSync(knobs),
            ScheduleTf32(knobs),
            ScheduleContraction(knobs),
            ScheduleRowReduction(knobs),
            ScheduleElementwise(knobs),
            *rules,
        ]
    return GreedyRewritePatternApplier(rules)


def _dual_or_unpaired(
    module: ModuleOp, kernel: loop.KernelOp, knobs: Knobs
) -> tuple[loop.KernelOp, ...]:
    """Keeps a paired contraction whole where the wgmma rule runs it as a dual GEMM (the `dual`
    knob), else splits it in two (`paired.unpair`); other kernels pass through."""
    if (c := match_paired_contraction(kernel)) is None:
        return (kernel,)
    refusal = "dual=off" if knobs.dual == "off" else dual_refusal(knobs, c)
    if refusal is None:
        return (kernel,)
    if knobs.dual == "on":
        raise DiagnosticException(
            f"tile: dual=on cannot run kernel @{kernel.sym_name.data} as one dual GEMM: {refusal}"
        )
    return unpair(module, kernel, c)


def lowering_error(ctx: Context, kernel: loop.KernelOp, knobs: Knobs) -> str | None:
    """Returns the diagnostic the rules give when scheduling a copy of `kernel` with `knobs`,
    or None when they schedule it."""
    try:
        tile_kernels(ctx, ModuleOp([kernel.clone()]), lambda _: knobs)
    except DiagnosticException as e:
        return str(e)
    return None


def tile_kernels(ctx: Context, op: ModuleOp, knobs_for: Callable[[loop.KernelOp], Knobs]) -> None:
    """Schedules every loop kernel of the module with the knobs `knobs_for` gives it."""
    for kernel in list(loop.kernels(op)):
        knobs = knobs_for(kernel)
        _check(knobs)
        for whole in _dual_or_unpaired(op, kernel, knobs):
            split = (
                split_kernel(op, whole, knobs.splitk, knobs.splitk_mode)
                if knobs.splitk > 1
                else (whole,)
            )
            for part in [p for piece in split for p in stream_k_kernels(op, piece, knobs)]:
                _rules(knobs).match_and_rewrite(part, PatternRewriter(part))
    # The rules emit index arithmetic per lane and per use; clean it up so the printed
    # CUDA stays readable (the CUDA compiler would fold it anyway).
    CommonSubexpressionElimination().apply(ctx, op)
    dce(op)
