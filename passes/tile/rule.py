"""The schedule-rule interface: match a loop kernel, plan its knobs, emit its tile kernel.

docs/ir.md ("Schedule rules and plans") describes the three steps and shows how to add a rule.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from typing import Any, ClassVar, Generic, TypeVar

from xdsl.dialects.builtin import ModuleOp
from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.knobs import KNOB, Domain, Knobs
from tinyopt.passes.tile.target import H200, Target

M = TypeVar("M")
P = TypeVar("P")


class Rule(ABC, Generic[M, P]):
    """A schedule rule: `match` → `plan` → `emit`."""

    name: ClassVar[str]
    """The rule's name, as plans and docs/knobs.md spell it."""

    reads: ClassVar[str]
    """The knobs the plan reads, as the tuner searches them: `name` tries the knob's domain,
    `name=v1,v2` only those values."""

    plan_type: ClassVar[type]
    """The frozen dataclass `plan` returns; its fields are the knobs printed in `#tile.plan`."""

    selector: ClassVar[tuple[str, str] | None] = None
    """(knob, value) that asks for this rule by name, e.g. ("mma", "wgmma"); None: none does."""

    by_auto: ClassVar[bool] = True
    """Whether the selector knob's `auto` tries this rule."""

    takes_paired: ClassVar[bool] = False
    """Whether the rule runs a paired contraction (two K loops over one A) whole; no other
    rule sees one: the planner splits it in two first (`passes/tile/gemm/paired.py`)."""

    def __init__(self, target: Target = H200) -> None:
        self.target = target

    @classmethod
    def read_knobs(cls) -> tuple[tuple[str, tuple[int | str, ...]], ...]:
        """(knob, values the tuner tries) for each knob in `reads`."""
        read = []
        for word in cls.reads.split():
            name, _, listed = word.partition("=")
            values = KNOB[name].domain.values
            if listed:
                values = tuple(int(v) if v.lstrip("-").isdigit() else v for v in listed.split(","))
            read.append((name, values))
        return tuple(read)

    def considered(self, knobs: Knobs) -> bool:
        """Whether the knobs let this rule try a kernel (`schedule`, and the selector knob)."""
        if knobs.schedule != "auto":
            return self.selector == ("schedule", knobs.schedule)
        if self.selector is None:
            return True
        value = getattr(knobs, self.selector[0])
        return value == self.selector[1] or (value == "auto" and self.by_auto)

    def insists(self, knobs: Knobs) -> bool:
        """Whether a refusal of `plan` is the user's error (the knobs asked for this rule, or no
        knob names it) rather than a reason to try the next rule."""
        return self.selector is None or getattr(knobs, self.selector[0]) == self.selector[1]

    @abstractmethod
    def match(self, kernel: loop.KernelOp) -> M | str:
        """The parts of `kernel` the rule schedules, or why it is not of the rule's kind."""

    @abstractmethod
    def plan(self, kernel: loop.KernelOp, m: M, knobs: Knobs) -> P | str:
        """Every knob the rule reads, resolved; or why `knobs` cannot be met."""

    def check(self, kernel: loop.KernelOp, m: M, plan: P) -> str | None:
        """Why a plan read back from the IR cannot be emitted, or None (default: it can)."""
        return None

    def rewrite(
        self, module: ModuleOp, kernel: loop.KernelOp, m: M, plan: P
    ) -> list[loop.KernelOp]:
        """Puts other loop kernels in `kernel`'s place (the planner plans each in turn) and
        returns them; empty: the kernel stays and takes `plan` (the default)."""
        return []

    @abstractmethod
    def emit(self, kernel: loop.KernelOp, m: M, plan: P, rewriter: PatternRewriter) -> None:
        """Replaces `kernel` by its `tile.kernel`, built from `plan` alone."""


def plan_attr(rule: Rule, plan: Any) -> tile.PlanAttr:
    """Returns the `#tile.plan` of a rule's plan."""
    return tile.PlanAttr(rule.name, {f.name: getattr(plan, f.name) for f in fields(plan)})


def plan_from_attr(rule: Rule, attr: tile.PlanAttr) -> Any | str:
    """Returns the rule's plan a `#tile.plan` spells, or a sentence naming the knob that is
    unknown, missing, of the wrong type or outside its domain."""
    values = attr.values
    known = {f.name: f.type for f in fields(rule.plan_type)}
    for name in values:
        if name not in known:
            return f"rule {rule.name} has no knob {name} (its knobs: {', '.join(known)})"
    for name, kind in known.items():
        if name not in values:
            return f"knob {name} of rule {rule.name} is missing"
        value = values[name]
        if isinstance(value, int) != (kind == "int"):
            return f"knob {name} must be {'an integer' if kind == 'int' else 'a string'}"
        if value == "auto" or (value == 0 and name in KNOB and _zero_is_auto(KNOB[name].domain)):
            return f"knob {name} must be resolved in a plan, got {value!r} (auto)"
        domains = [KNOB[name].domain, *(d for _, _, d in KNOB[name].when)] if name in KNOB else []
        if domains and not any(d.admits(value) for d in domains):
            return f"knob {name} must be {domains[0].words}, got {value!r}"
    return rule.plan_type(**values)


def _zero_is_auto(domain: Domain) -> bool:
    """Whether 0 stands for "chosen by the heuristic" in an integer knob's domain (its words
    say so, and "auto" is not a value of its own, as `persistent`'s is)."""
    return "auto" in domain.words and "auto" not in domain.values


@dataclass(frozen=True)
class Choice:
    """The rule that takes a kernel, its match and its plan."""

    rule: Rule
    match: Any
    plan: Any
