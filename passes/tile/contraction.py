"""Schedule rule for contractions (matmul): written next."""

from xdsl.pattern_rewriter import PatternRewriter, RewritePattern

from tinyopt.passes.tile.knobs import Knobs


class ScheduleContraction(RewritePattern):
    """Tiles a contraction kernel over blocks, shared memory and per-thread registers."""

    def __init__(self, knobs: Knobs) -> None:
        self.knobs = knobs

    def match_and_rewrite(self, op, rewriter: PatternRewriter, /) -> None:
        return
