"""The `tile` pass: schedules every `loop.kernel` as a `tile.kernel` by the first rule that fits."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import GreedyRewritePatternApplier, PatternRewriteWalker
from xdsl.transforms.common_subexpression_elimination import CommonSubexpressionElimination
from xdsl.transforms.dead_code_elimination import dce
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.passes.tile.contraction import ScheduleContraction
from tinyopt.passes.tile.elementwise import ScheduleElementwise
from tinyopt.passes.tile.knobs import Knobs, check
from tinyopt.passes.tile.mma_sync import ScheduleMmaSync
from tinyopt.passes.tile.row_reduction import ScheduleRowReduction
from tinyopt.passes.tile.sequential import ScheduleSequentially
from tinyopt.passes.tile.split_k import split_k
from tinyopt.passes.tile.wgmma import ScheduleWgmma


@dataclass(frozen=True)
class TilePass(Knobs, ModulePass):
    """Maps loop kernels onto grid, blocks and threads; schedule choices are the knobs."""

    name = "tile"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        knobs: Knobs = self
        try:
            check(knobs)
        except ValueError as e:
            raise DiagnosticException(str(e)) from None
        if knobs.splitk > 1:
            split_k(op, knobs.splitk)
        rules = [ScheduleSequentially(knobs)]
        if knobs.schedule == "auto":
            rules = [
                ScheduleMmaSync(knobs),
                ScheduleWgmma(knobs),
                ScheduleContraction(knobs),
                ScheduleRowReduction(knobs),
                ScheduleElementwise(knobs),
                *rules,
            ]
        PatternRewriteWalker(
            GreedyRewritePatternApplier(rules), apply_recursively=False
        ).rewrite_module(op)
        # The rules emit index arithmetic per lane and per use; clean it up so the printed
        # CUDA stays readable (the CUDA compiler would fold it anyway).
        CommonSubexpressionElimination().apply(ctx, op)
        dce(op)
