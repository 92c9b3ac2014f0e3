"""The ops a capture has no handler for, replaced by torch's own decompositions of them.

`torch.export` keeps many composite ops whole (`tile`, `tensordot`, `mse_loss`, `rot90`,
`linalg.multi_dot`, …). Each has a decomposition in `torch.export.default_decompositions()`
into ops the frontend does take, written by torch as the op's reference. Only the ops without
a handler are decomposed, so what is captured today keeps its exact form (a softmax stays a
softmax, never its exps and sums), and a program that has none pays nothing.

A decomposition is used only where every op it leads to (after at most `ROUNDS` rounds) has a
handler; otherwise the capture keeps that op and its error names the op the user wrote
(`cannot capture aten.pdist`), not an op of torch's decomposition of it. The other ops are
decomposed all the same, so the error is about the op that cannot be taken (`grid_sample` of
an `affine_grid`: the grid is taken, the sampling is named).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch.export import ExportedProgram

ROUNDS = 4
"""Decomposition rounds: an op's decomposition may use composite ops of its own
(`cross_entropy_loss` → `nll_loss_nd` → `nll_loss` → `nll_loss_forward`)."""


def unsupported_ops(program: ExportedProgram, supported: Callable[[object], bool]) -> set[object]:
    """The call targets of `program` that `supported` refuses."""
    return {
        node.target
        for node in program.graph.nodes
        if node.op == "call_function" and not supported(node.target)
    }


def decompose_unsupported(
    program: ExportedProgram, supported: Callable[[object], bool]
) -> tuple[ExportedProgram, list[object]]:
    """Return `program` with its unsupported ops replaced by torch's decompositions, and the
    ops decomposed. An op whose decomposition leads to an op without a handler is kept (the
    capture's error then names it, not an op of its decomposition); the others are
    decomposed all the same, so the error names the op that cannot be taken (`grid_sample`),
    not one beside it that could (`affine_grid`)."""
    missing = unsupported_ops(program, supported)
    if not missing:
        return program, []
    found = _decomposed(program, missing, supported, set())
    if found is not None:
        return found
    takeable = {op for op in missing if _decomposed(program, {op}, supported, missing - {op})}
    if not takeable:
        return program, []
    found = _decomposed(program, takeable, supported, missing - takeable)
    return found if found is not None else (program, [])


def _decomposed(
    program: ExportedProgram,
    ops: set[object],
    supported: Callable[[object], bool],
    kept: set[object],
) -> tuple[ExportedProgram, list[object]] | None:
    """`program` with `ops` replaced by torch's decompositions (after at most `ROUNDS`
    rounds, the decompositions' own composite ops too) and the ops decomposed, or None where
    an op without a handler other than those `kept` remains."""
    import torch

    table = torch.export.default_decompositions()
    table[torch.ops.aten.cross_entropy_loss.default] = _cross_entropy_loss(
        table[torch.ops.aten.cross_entropy_loss.default]
    )
    decomposed: list[object] = []
    candidate, pending = program, set(ops)
    for _ in range(ROUNDS):
        usable = {
            op: table[op] for op in pending if isinstance(op, torch._ops.OpOverload) and op in table
        }
        if not usable:
            return None
        try:
            with warnings.catch_warnings():  # torch's own use of a deprecated pytree API
                warnings.simplefilter("ignore")
                candidate = candidate.run_decompositions(usable)  # pyright: ignore[reportArgumentType]
        except Exception:  # torch raises many exception types; the original's error is clearer
            return None
        decomposed += [op for op in usable if op not in decomposed]
        pending = unsupported_ops(candidate, supported) - kept
        if not pending:
            return candidate, decomposed
    return None


def _cross_entropy_loss(default: Callable[..., object]) -> Callable[..., object]:
    """torch's decomposition of `cross_entropy_loss`, but for class weights with label
    smoothing and the mean reduction: there torch's (for traced tensors) divides the smoothing
    term by the target classes' weights gathered at `target.masked_fill(target ==
    ignore_index, 0)`, an integer `masked_fill` of an input, which the capture refuses (integers
    in f32 past 2^24). Here those weights are summed over a match of each target with the class
    index instead (a comparison with an `arange`, exact), the rest as torch's."""
    import torch

    aten = torch.ops.aten

    def decompose(
        x: torch.Tensor,
        target: torch.Tensor,
        weight: torch.Tensor | None = None,
        reduction: int = 1,
        ignore_index: int = -100,
        label_smoothing: float = 0.0,
    ) -> object:
        if (
            weight is None
            or label_smoothing <= 0.0
            or reduction != 1  # Reduction::Mean
            or target.is_floating_point()  # class probabilities: no gather
        ):
            return default(x, target, weight, reduction, ignore_index, label_smoothing)
        class_dim = 0 if x.dim() == 1 else 1
        classes = x.shape[class_dim]
        logp = aten._log_softmax(x, class_dim, False)
        nll = aten.nll_loss_nd(logp, target, weight, reduction, ignore_index)
        spread = [1] * x.dim()
        spread[class_dim] = classes
        weights = weight.view(spread)
        ignored = target == ignore_index
        smooth = -(logp * weights).sum(class_dim)
        smooth = smooth.masked_fill(ignored, 0.0)
        named = target.unsqueeze(class_dim) == torch.arange(classes, device=x.device).view(spread)
        picked = torch.where(named, weights, torch.zeros((), dtype=weights.dtype)).sum(class_dim)
        total = picked.masked_fill(ignored, 0.0).sum()
        return (1 - label_smoothing) * nll + smooth.sum() / total * (label_smoothing / classes)

    return decompose
