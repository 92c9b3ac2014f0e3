"""The lines `fuse{debug=true}` prints to stderr: one per fusion decision, naming each graph
value as the printer does (`%x3`, `%linear_2` for the third value named `linear`, `%12` for
the thirteenth unnamed one), with the op that defines it."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.ir import Operation, SSAValue

from tinyopt.dialects import graph
from tinyopt.passes.graph_to_loop.fuse_cost import Recompute, recomputations
from tinyopt.passes.graph_to_loop.fuse_kernel import KernelBuilder, shape_of


class FuseLog:
    """Writes each decision once (the planner rebuilds its kernels until nothing changes)."""

    def __init__(self, function: func.FuncOp, enabled: bool):
        self.enabled = enabled
        self._written: set[str] = set()
        self._names: dict[SSAValue, str] = {}
        values = [*function.args, *(r for op in function.body.block.ops for r in op.results)]
        unnamed = 0
        hints: dict[str, int] = {}
        for value in values:
            if value.name_hint is None:
                self._names[value] = f"%{unnamed}"
                unnamed += 1
            else:
                seen = hints.get(value.name_hint, 0)
                hints[value.name_hint] = seen + 1
                self._names[value] = f"%{value.name_hint}" + (f"_{seen}" if seen else "")

    def write(self, line: str) -> None:
        """Print `fuse: line` to stderr, unless disabled or already printed."""
        if self.enabled and line not in self._written:
            self._written.add(line)
            print(f"fuse: {line}", file=sys.stderr)

    def describe(self, value: SSAValue) -> str:
        """Return `%name (op)` for a graph value."""
        owner = value.owner
        op = owner.name if isinstance(owner, Operation) else "argument"
        return f"{self._names.get(value, '%?')} ({op})"

    def buffer(self, value: SSAValue, reason: str) -> None:
        """Record that `value` gets a buffer of its own, and why."""
        self.write(f"{self.describe(value)} gets a buffer: {reason}")

    def recompute(self, recompute: Recompute, root: SSAValue) -> None:
        """Record that recomputing a value costs more than storing it."""
        self.buffer(
            recompute.value,
            f"the kernel of {self.describe(root)} would evaluate it {_costs(recompute, 'over')}",
        )

    def kernels(self, builders: Sequence[KernelBuilder]) -> None:
        """Record what each final kernel computes, fuses and recomputes."""
        for builder in builders:
            name = f"@{builder.kernel.sym_name.data}"
            root = builder.root
            fused = [self.describe(v) for v in builder.fused if v is not root]
            inlined = [
                v
                for v in builder.inlined_scalars()
                if v is not root
                and v not in builder.fused
                and not isinstance(v.owner, graph.ConstantOp)
            ]
            parts = [f"fusing {', '.join(fused)}"] if fused else []
            if inlined:
                parts.append(f"inlining {_plural(len(inlined), 'elementwise or index op')}")
            self.write(", ".join([f"{name} computes {self.describe(root)}", *parts]))
            if builder.store_shape != shape_of(builder.root):
                shape = "x".join(map(str, builder.store_shape))
                self.write(
                    f"{name} stores {self.describe(builder.root)} through a {shape} view: "
                    "the reshape is folded into the store"
                )
            for recompute in recomputations(builder):
                self.write(
                    f"{name} evaluates {self.describe(recompute.value)} "
                    f"{_costs(recompute, 'within')}"
                )


def _costs(recompute: Recompute, relation: str) -> str:
    extra = _plural(recompute.extra_ops, "operation")
    return (
        f"{recompute.evaluations} times per element: {extra} more, {relation} the "
        f"{recompute.budget} of a round trip of {recompute.round_trip_bytes} bytes"
    )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"
