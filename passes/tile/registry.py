"""The schedule rules in the order they are tried, and the walk that picks one per kernel.

Adding a rule: a `Rule` subclass in its own file and one line in `RULE_TYPES` (docs/ir.md).
"""

from __future__ import annotations

from typing import Any

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.attention.decode import AttentionDecode
from tinyopt.passes.tile.attention.mma_sync import AttentionSync
from tinyopt.passes.tile.attention.simt import AttentionSimt
from tinyopt.passes.tile.attention.wgmma import AttentionWgmma
from tinyopt.passes.tile.elementwise import Elementwise
from tinyopt.passes.tile.gemm.contraction import ContractionRule
from tinyopt.passes.tile.gemm.mma_sync import MmaSyncRule
from tinyopt.passes.tile.gemm.skinny import SkinnyRule
from tinyopt.passes.tile.gemm.skinny_mma import SkinnyMmaRule
from tinyopt.passes.tile.gemm.tf32 import Tf32Rule
from tinyopt.passes.tile.gemm.wgmma import WgmmaRule
from tinyopt.passes.tile.gemm.wgmma_3xtf32 import Wgmma3xTf32Rule
from tinyopt.passes.tile.gemm.wgmma_staged import WgmmaStagedRule
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.row_reduction import RowReduction
from tinyopt.passes.tile.rule import Choice, Rule, plan_from_attr
from tinyopt.passes.tile.sequential import Sequential
from tinyopt.passes.tile.target import H200, Target

RULE_TYPES: tuple[type[Rule], ...] = (
    AttentionDecode,
    AttentionWgmma,
    AttentionSync,
    AttentionSimt,
    SkinnyMmaRule,
    SkinnyRule,
    WgmmaRule,
    WgmmaStagedRule,
    Wgmma3xTf32Rule,
    MmaSyncRule,
    Tf32Rule,
    ContractionRule,
    RowReduction,
    Elementwise,
    Sequential,
)
"""Every schedule rule, most specific first; `Sequential` takes any kernel."""


def rules(target: Target = H200) -> tuple[Rule, ...]:
    """The rules, planning for `target`."""
    return tuple(rule(target) for rule in RULE_TYPES)


def rule_named(name: str, target: Target = H200) -> Rule | None:
    """The rule a plan names, or None."""
    return next((r for r in rules(target) if r.name == name), None)


def emittable(kernel: loop.KernelOp, target: Target = H200) -> tuple[Rule, Any, Any] | str:
    """The rule, match and plan of the `#tile.plan` on a planned kernel, or the diagnostic that
    says why `tile` cannot emit it: the rule it names is unknown, does not match the kernel, a
    knob is outside its domain, or the rule's check refuses the plan. `tile` asks it of every
    kernel it emits, and `plan` of every plan it attaches, so a printed plan is one `tile`
    takes."""
    name = kernel.sym_name.data
    attr = kernel.attributes[tile.PLAN]
    assert isinstance(attr, tile.PlanAttr)
    rule = rule_named(attr.rule.data, target)
    if rule is None:
        known = ", ".join(r.name for r in RULE_TYPES)
        return f"tile: kernel @{name}: its plan names no rule {attr.rule.data} (rules: {known})"
    m = rule.match(kernel)
    if isinstance(m, str):
        return f"tile: kernel @{name}: rule {rule.name} of its plan: {m}"
    plan = plan_from_attr(rule, attr)
    refusal = plan if isinstance(plan, str) else rule.check(kernel, m, plan)
    if refusal is not None:
        return f"tile: plan of kernel @{name}: {refusal}"
    return rule, m, plan


def refusals(
    kernel: loop.KernelOp, knobs: Knobs, target: Target = H200, paired: bool = False
) -> tuple[Choice | None, list[tuple[str, str]]]:
    """Walks the rules in order: the first that matches and plans `kernel` under `knobs`, and
    (rule, reason) for each rule before it. A refusal by a rule the knobs insist on ends the walk
    with no choice; with `paired`, only rules that run a paired contraction whole are asked."""
    why: list[tuple[str, str]] = []
    for rule in rules(target):
        if paired and not rule.takes_paired:
            why.append((rule.name, "it does not run a paired contraction whole"))
            continue
        if not rule.considered(knobs):
            selector = ", ".join(f"{k}={getattr(knobs, k)}" for k in ("schedule", "mma", "attn"))
            why.append((rule.name, f"the knobs select other rules ({selector})"))
            continue
        m = rule.match(kernel)
        if isinstance(m, str):
            why.append((rule.name, m))
            continue
        plan = rule.plan(kernel, m, knobs)
        if isinstance(plan, str):
            why.append((rule.name, plan))
            if rule.insists(knobs):
                return None, why
            continue
        return Choice(rule, m, plan), why
    return None, why
