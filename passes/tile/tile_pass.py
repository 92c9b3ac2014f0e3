"""The `plan` and `tile` passes: plan every `loop.kernel`, then emit each from its plan."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.dialects import loop, tile
from tinyopt.passes.pass_order import refuse_graph_ops
from tinyopt.passes.tile.cse import cse
from tinyopt.passes.tile.dce import dce
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.limits import fit_launch
from tinyopt.passes.tile.planner import plan_module
from tinyopt.passes.tile.registry import emittable
from tinyopt.passes.tile.target import Target


@dataclass(frozen=True)
class PlanPass(Knobs, ModulePass):
    """Attaches to each `loop.kernel` its `#tile.plan`: the rule that schedules it and every
    knob that rule reads, resolved from the options (and the kernel's tuned knobs, where
    `apply-tuned` wrote them). Kernels that already have a plan keep it."""

    name = "plan"

    sms: int = Target.sms
    """The target's SM count (the H200's 132 by default)."""
    why: int = 0
    """1: each kernel also shows why each rule before its own refused it (`refusals`)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.why not in (0, 1):
            raise DiagnosticException(f"plan: why must be 0 or 1, got {self.why}")
        refuse_graph_ops(op, "plan")
        plan_module(op, self, _target(self.sms, "plan"), bool(self.why))


@dataclass(frozen=True)
class TilePass(Knobs, ModulePass):
    """Maps loop kernels onto grid, blocks and threads: each is emitted by the rule its plan
    names, from the plan's knobs; a kernel without a plan is planned first, with the options."""

    name = "tile"

    sms: int = Target.sms
    """The target's SM count (the H200's 132 by default)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        refuse_graph_ops(op, "tile")
        target = _target(self.sms, "tile")
        plan_module(op, self, target)
        for kernel in list(loop.kernels(op)):
            _emit(kernel, target)
        for kernel in op.ops:
            if isinstance(kernel, tile.KernelOp):
                fit_launch(kernel)
        # The rules emit index arithmetic per lane and per use; clean it up so the printed
        # CUDA stays readable (the CUDA compiler would fold it anyway).
        cse(op)
        dce(op)


MAX_SMS = 1024
"""The most SMs `sms` may name (a GPU has a few hundred at most)."""


def _target(sms: int, pass_name: str) -> Target:
    """The target of an `sms` option, checked."""
    if not 1 <= sms <= MAX_SMS:
        raise DiagnosticException(f"{pass_name}: sms must be in [1, {MAX_SMS}], got {sms}")
    return Target(sms=sms)


def _emit(kernel: loop.KernelOp, target: Target) -> None:
    """Replaces a planned loop kernel by the tile kernel its plan's rule emits."""
    found = emittable(kernel, target)
    if isinstance(found, str):
        raise DiagnosticException(found)
    rule, m, plan = found
    rule.emit(kernel, m, plan, PatternRewriter(kernel))
