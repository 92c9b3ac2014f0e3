"""Tuning a program: search each kernel's knobs, measure through a `Measurer`, cache the best.

Kernels are tuned in order, the earlier ones at their best knobs (docs/tuning.md); trial 1 of
every kernel is its default schedule, the baseline of the "vs default" ratio.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tinyopt.dialects import loop
from tinyopt.passes.autotune.cache import Entry, TuningCache, kernel_key
from tinyopt.passes.autotune.measure import REFUSAL, Candidate, Measurer, Outcome, Program
from tinyopt.passes.autotune.search import (
    REFUSED,
    SEARCHES,
    Budget,
    Config,
    Refused,
    SearchResult,
    key,
)
from tinyopt.passes.autotune.space import KernelSpace


@dataclass
class KernelResult:
    """The outcome of tuning one kernel."""

    name: str
    key: str
    rule: str
    search: SearchResult
    reasons: dict[tuple, str] = field(default_factory=dict)

    @property
    def default_ms(self) -> float | None:
        """The time of the default schedule (trial 1), None when it failed."""
        return self.search.history[0][1] if self.search.history else None

    @property
    def best(self) -> tuple[Config, float] | None:
        """The best configuration that passed the correctness gate, with its time."""
        return self.search.best

    @property
    def failures(self) -> list[tuple[Config, str]]:
        """Every measured configuration that failed, with the reason."""
        return [
            (c, self.reasons.get(key(c), "failed")) for c, ms in self.search.history if ms is None
        ]

    @property
    def refusals(self) -> list[tuple[Config, str]]:
        """Every configuration the rules refused, with their diagnostic."""
        return [(c, self.reasons.get(key(c), "refused")) for c in self.search.refused]


@dataclass(frozen=True)
class Progress:
    """A snapshot for the progress line."""

    kernel: str
    trials: int
    budget: Budget
    best_ms: float | None
    default_ms: float | None
    elapsed: float


def tune(
    program: Program,
    measurer: Measurer,
    method: str = "mcts",
    budget: Budget | None = None,
    cache: TuningCache | None = None,
    gpu: str | None = None,
    progress: Callable[[Progress], None] | None = None,
    batch: int | None = None,
) -> list[KernelResult]:
    """Tunes every distinct kernel of the program; stores each best in `cache` under `gpu`."""
    budget = budget or Budget()
    search = SEARCHES[method]
    chosen: dict[str, Config] = {}
    results: list[KernelResult] = []
    for kernel in loop.kernels(program.loop_module()):
        kkey = kernel_key(kernel)
        if kkey in chosen:
            continue
        space = KernelSpace(kernel)
        result = KernelResult(kernel.sym_name.data, kkey, space.rule, SearchResult())
        start, times = time.monotonic(), []

        def measure(configs: list[Config], result=result, kkey=kkey, start=start, times=times):
            candidates = [Candidate.of({**chosen, kkey: c}) for c in configs]
            outcomes: list[Outcome] = measurer.measure(program, candidates)
            for config, outcome in zip(configs, outcomes, strict=True):
                if outcome.reason is not None:
                    result.reasons[key(config)] = outcome.reason
            answers = [REFUSED if (o.reason or "").startswith(REFUSAL) else o.ms for o in outcomes]
            times.extend(ms for ms in answers if not isinstance(ms, Refused))
            if progress is not None:
                best = min((t for t in times if t is not None), default=None)
                elapsed = time.monotonic() - start
                default = times[0] if times else None
                progress(Progress(result.name, len(times), budget, best, default, elapsed))
            return answers

        result.search = search(space, measure, budget, batch=batch or measurer.parallelism)
        results.append(result)
        if (best := result.best) is not None:
            chosen[kkey] = best[0]
            if cache is not None and gpu is not None:
                entry = Entry(
                    best[0], best[1], result.default_ms, len(result.search.history), method
                )
                cache.store(kkey, gpu, entry)
    return results
