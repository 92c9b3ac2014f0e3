"""The search space of one loop kernel: the knobs of the rule that schedules it.

How the rules' `reads` and `selector` shape the tree is in docs/tuning.md ("The search space").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from xdsl.dialects.builtin import ModuleOp

from tinyopt.dialects import loop
from tinyopt.passes.autotune.search import Config, Value
from tinyopt.passes.tile.gemm.paired import match_paired_contraction, unpair
from tinyopt.passes.tile.knobs import KNOB, KNOBS, Knobs
from tinyopt.passes.tile.registry import RULE_TYPES, refusals, rule_named
from tinyopt.passes.tile.rule import Choice, Rule

PRECISION_OPT_IN = ("tf32",)
"""Selector values that round the operands (`mma=tf32`): the tuner leaves them to the user, who
alone can accept the precision (the f32 correctness gate would reject them anyway)."""

SELECTORS = frozenset(
    knob
    for knob, rules in Counter(r.selector[0] for r in RULE_TYPES if r.selector).items()
    if rules > 1
)
"""Knobs that choose among several rules (`mma`, `attn`; not `schedule`, whose one value names
the sequential rule): a kernel that one of their rules takes is searched over all of them."""

SELECTED: dict[tuple[str, str], type[Rule]] = {r.selector: r for r in RULE_TYPES if r.selector}
"""The rule each (knob, value) asks for by name."""

_DEPENDED_ON = {other for knob in KNOBS for other, _, _ in knob.when}
"""Knobs whose value changes another knob's domain: they are decided first."""


READS = {r.name: r.read_knobs() for r in RULE_TYPES}
"""(knob, values to try) for each knob each rule reads, by rule name."""


def ruled(kernel: loop.KernelOp, knobs: Knobs) -> tuple[Choice | None, list[tuple[str, str]]]:
    """`refusals` as the planner asks it: a paired contraction whole where a rule takes it (and
    `dual` is not `off`), else the first of its two halves, which the rules take alike."""
    if match_paired_contraction(kernel) is None:
        return refusals(kernel, knobs)
    if knobs.dual != "off":
        whole, why = refusals(kernel, knobs, paired=True)
        if whole is not None:
            return whole, why
    clone = kernel.clone()
    halves = match_paired_contraction(clone)
    assert halves is not None
    _, reading = unpair(ModuleOp([clone]), clone, halves)
    return refusals(reading, knobs)


class KernelSpace:
    """The tree of knob decisions for one kernel."""

    def __init__(self, kernel: loop.KernelOp) -> None:
        choice, why = ruled(kernel, Knobs())
        rule = choice.rule if choice is not None else rule_named(why[-1][0])
        assert rule is not None
        self.rule = rule.name
        """The rule that schedules the kernel with every knob at its default."""
        knob = rule.selector[0] if rule.selector is not None else None
        self.selector = knob if knob in SELECTORS else None
        """The knob decided first, choosing the rule (`mma`, `attn`); None: the rule is fixed."""
        self.choices: tuple[Value, ...] = ()
        """The selector's values tried: those under which a rule takes the kernel (with the
        other knobs at their defaults), less `PRECISION_OPT_IN`."""
        if self.selector is not None:
            self.choices = tuple(
                v
                for v in KNOB[self.selector].domain.values
                if v not in PRECISION_OPT_IN and self._selects(kernel, v)
            )

    def _selects(self, kernel: loop.KernelOp, value: Value) -> bool:
        """Whether the selector at `value` has a rule take the kernel: one of the rules it
        names, or for `auto` and `none` any rule (the planner refuses a value whose own rules
        all refuse the kernel, e.g. `attn=decode` on a prefill)."""
        assert self.selector is not None
        choice, _ = ruled(kernel, Knobs(**{self.selector: value}))
        if choice is None:
            return False
        selector = choice.rule.selector
        return value in ("auto", "none") or (selector is not None and selector[0] == self.selector)

    def rule_for(self, config: Config) -> str | None:
        """Returns the rule whose knobs are searched under (partial) `config`; None where the
        selector is `auto` (the heuristic's whole schedule, a leaf) or names no rule."""
        if self.selector is None:
            return self.rule
        rule = SELECTED.get((self.selector, str(config[self.selector])))
        return rule.name if rule is not None else None

    def next(self, partial: Config) -> tuple[str, Sequence[Value]] | None:
        """Returns the next knob to decide and its values, the default first."""
        if self.selector is not None and self.selector not in partial:
            return self.selector, _prior(KNOB[self.selector].default, self.choices)
        if (rule := self.rule_for(partial)) is None:
            return None
        read = sorted(READS[rule], key=lambda r: r[0] not in _DEPENDED_ON)
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
