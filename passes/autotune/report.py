"""Text the tuner prints: the progress line and the summary table per kernel."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from tinyopt.passes.autotune.tuner import KernelResult, Progress
from tinyopt.passes.tile.knobs import Knobs


def _ms(value: float | None) -> str:
    return "failed" if value is None else f"{value:.4f}"


def progress_line(p: Progress) -> str:
    """Returns `kernel  trials/budget  best  ratio to default  ETA`."""
    ratio = f"{p.default_ms / p.best_ms:.2f}x default" if p.best_ms and p.default_ms else "-"
    estimates = []
    if p.trials:
        estimates.append(p.elapsed / p.trials * max(0, p.budget.trials - p.trials))
    if p.budget.seconds is not None:
        estimates.append(max(0.0, p.budget.seconds - p.elapsed))
    eta = f"ETA {min(estimates):.0f}s" if estimates else ""
    best = f"{p.best_ms:.4f} ms" if p.best_ms is not None else "-"
    return f"{p.kernel}: {p.trials}/{p.budget.trials} trials  best {best}  {ratio}  {eta}"


def summary_table(results: Sequence[KernelResult]) -> str:
    """Returns a markdown table: one row per kernel with its default and best schedule."""
    rows = [
        "| kernel | rule | trials | failed | refused | default ms | best ms | speedup | knobs |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        best = r.best
        speedup = f"{r.default_ms / best[1]:.2f}x" if best and r.default_ms else "-"
        knobs = Knobs(**best[0]).describe() or "(defaults)" if best else "-"
        rows.append(
            f"| {r.name} | {r.rule} | {len(r.search.history)} | {len(r.failures)} | "
            f"{len(r.refusals)} | "
            f"{_ms(r.default_ms)} | {_ms(best[1] if best else None)} | {speedup} | {knobs} |"
        )
    return "\n".join(rows)


def failure_summary(results: Sequence[KernelResult], limit: int = 3) -> str:
    """Returns the most common failure reasons per kernel, with their counts."""
    lines = []
    for r in results:
        counts = Counter(reason for _, reason in r.failures + r.refusals)
        for reason, count in counts.most_common(limit):
            lines.append(f"{r.name}: {count} x {reason}")
    return "\n".join(lines)
