"""The search space of one loop kernel: the knobs of the rule that schedules it.

The tree branches only on knobs the kernel's rule reads (`RULE_KNOBS` in passes/tile/knobs.py),
with the values the knob table gives; for a contraction the first decision is `mma`, which
picks the rule. Values come in prior order, the knob's default first, so the first leaf of the
tree is the heuristic's own schedule.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tinyopt.compiler import context
from tinyopt.dialects import loop
from tinyopt.passes.autotune.search import Config, Value
from tinyopt.passes.tile.attention.mma_sync import match_attention
from tinyopt.passes.tile.gemm.contraction import match_contraction
from tinyopt.passes.tile.elementwise import elementwise_nest
from tinyopt.passes.tile.knobs import KNOB, KNOBS, MMA_RULES, Knobs, rule_knobs
from tinyopt.passes.tile.gemm.paired import match_paired_contraction
from tinyopt.passes.tile.row_reduction import row_nest
from tinyopt.passes.tile.gemm.split_k import SEQUENTIAL
from tinyopt.passes.tile.tile_pass import lowering_error

RULES: tuple[tuple[str, Callable[[loop.KernelOp], object]], ...] = (
    ("attention", match_attention),
    (
        "contraction",
        lambda k: (
            SEQUENTIAL not in k.attributes and (match_contraction(k) or match_paired_contraction(k))
        ),
    ),
    ("row_reduction", row_nest),
    ("elementwise", elementwise_nest),
)
"""Which rule schedules a kernel: the first whose matcher accepts it (else `sequential`), in
the tile pass's order; a contraction's rule (a paired one's too: `dual` splits it for the rules
that do not take it whole) is then chosen by `mma`."""

PRECISION_OPT_IN = ("tf32",)
"""`mma` values that round the operands (TF32): the tuner leaves them to the user, who alone can
accept the precision (the f32 correctness gate would reject them anyway)."""

_DEPENDED_ON = {other for knob in KNOBS for other, _, _ in knob.when}
"""Knobs whose value changes another knob's domain: they are decided first."""


def rule_of(kernel: loop.KernelOp) -> str:
    """Returns the name of the rule family that schedules `kernel`."""
    return next((name for name, matches in RULES if matches(kernel)), "sequential")


class KernelSpace:
    """The tree of knob decisions for one kernel."""

    def __init__(self, kernel: loop.KernelOp) -> None:
        self.rule = rule_of(kernel)
        self.mmas: tuple[Value, ...] = ()
        """The `mma` values tried on a contraction: those whose rule schedules the kernel (with
        the other knobs at their defaults), less `PRECISION_OPT_IN`; `auto`, the heuristic's
        own choice, is a leaf."""
        if self.rule == "contraction":
            self.mmas = tuple(
                m
                for m in KNOB["mma"].domain.values
                if m not in PRECISION_OPT_IN
                and lowering_error(context(), kernel, Knobs(mma=str(m))) is None
            )

    def rule_for(self, config: Config) -> str | None:
        """Returns the rule that schedules the kernel under (partial) `config`; None for a
        contraction left at `mma=auto`, which is the heuristic's whole schedule (a leaf)."""
        return MMA_RULES.get(str(config["mma"])) if self.rule == "contraction" else self.rule

    def next(self, partial: Config) -> tuple[str, Sequence[Value]] | None:
        """Returns the next knob to decide and its values, the default first."""
        if self.rule == "contraction" and "mma" not in partial:
            return "mma", _prior(KNOB["mma"].default, self.mmas)
        if (rule := self.rule_for(partial)) is None:
            return None
        read = sorted(rule_knobs(rule), key=lambda r: r[0] not in _DEPENDED_ON)
        for name, listed in read:
            if name not in partial:
                values = KNOB[name].domain_in(Knobs(**partial)).values
                if listed != KNOB[name].domain.values:  # the rule reads a subset
                    values = tuple(v for v in listed if v in values) or values
                return name, _prior(KNOB[name].default, values)
        return None


def _prior(default: Value, values: Sequence[Value]) -> tuple[Value, ...]:
    """Orders values with the default first."""
    return tuple(sorted(values, key=lambda v: v != default))
