"""The `tile` pass: schedules every `loop.kernel` as a `tile.kernel` by the first rule that fits."""

from __future__ import annotations

from dataclasses import dataclass, fields

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
from tinyopt.passes.tile.row_reduction import ScheduleRowReduction
from tinyopt.passes.tile.sequential import ScheduleSequentially


@dataclass(frozen=True)
class TilePass(ModulePass):
    """Maps loop kernels onto grid, blocks and threads; schedule choices are the knobs."""

    name = "tile"

    schedule: str = "auto"
    threads: int = 0
    vec: int = 0
    rows: int = 0
    cache: int = 1
    bm: int = 0
    bn: int = 0
    bk: int = 0
    tm: int = 0
    tn: int = 0
    pad: int = 4

    def knobs(self) -> Knobs:
        return Knobs(**{f.name: getattr(self, f.name) for f in fields(Knobs)})

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        knobs = self.knobs()
        try:
            check(knobs)
        except ValueError as e:
            raise DiagnosticException(str(e)) from None
        rules = [ScheduleSequentially(knobs)]
        if knobs.schedule == "auto":
            rules = [
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
