"""Where compile time goes: the wall time of each phase of a build (capture, each pass, each
rewrite pattern inside a pass, NVRTC, load), printed as one table on stderr.

`tinyopt FILE --time-passes`, `lower(..., time_passes=True)`, `CompiledModel(...,
time_passes=True)` or the environment variable `TINYOPT_TIME_PASSES=1` turn it on (README.md,
"Compile time"). Phases are recorded into the timer that `timing` made active; with none
active, `phase` costs one global lookup.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from xdsl.ir import Operation, Region
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

ENV = "TINYOPT_TIME_PASSES"
"""Set to 1 to print the table after every `lower`, `apply_pipeline` and `CompiledModel`."""


def requested(explicit: bool = False) -> bool:
    """Return whether timing is asked for: `explicit`, or `$TINYOPT_TIME_PASSES` set (not 0)."""
    return explicit or os.environ.get(ENV, "0") not in ("", "0")


@dataclass
class PatternTime:
    """The time one rewrite pattern took inside one pass, over every op it was tried on."""

    seconds: float = 0.0
    tries: int = 0
    rewrites: int = 0


@dataclass
class CompileTimer:
    """Seconds per phase, in the order phases first ran (a phase run twice adds up), and per
    (pass, pattern)."""

    phases: dict[str, float] = field(default_factory=dict)
    patterns: dict[tuple[str, str], PatternTime] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)
    current_pass: str = ""

    def add(self, name: str, seconds: float) -> None:
        """Add `seconds` to the phase `name`."""
        self.phases[name] = self.phases.get(name, 0.0) + seconds

    def note(self, name: str, text: str) -> None:
        """Attach a remark to the phase `name` (e.g. how many kernels NVRTC compiled)."""
        self.notes[name] = text

    def report(self) -> str:
        """Return the table: each phase, its patterns indented under it, and the total."""
        rows = []
        for name, seconds in self.phases.items():
            rows.append((name, seconds, self.notes.get(name, "")))
            pass_name = name.removeprefix("pass ")
            timed = [(p, t) for (owner, p), t in self.patterns.items() if owner == pass_name]
            for pattern, t in sorted(timed, key=lambda item: -item[1].seconds):
                note = f"{t.rewrites} rewrites in {t.tries} tries"
                rows.append((f"  {pattern}", t.seconds, note))
        rows.append(("total", sum(self.phases.values()), ""))
        width = max(len(name) for name, _, _ in rows)
        lines = ["tinyopt compile time (wall clock):"]
        lines += [f"  {n:<{width}}  {s:9.4f} s  {note}".rstrip() for n, s, note in rows]
        return "\n".join(lines)


_ACTIVE: CompileTimer | None = None


def active() -> CompileTimer | None:
    """Return the timer phases are recorded into now, if any."""
    return _ACTIVE


@contextlib.contextmanager
def phase(name: str) -> Iterator[None]:
    """Record the time the block takes as phase `name` of the active timer (if any)."""
    timer = _ACTIVE
    if timer is None:
        yield
        return
    start = time.perf_counter()
    try:
        yield
    finally:
        timer.add(name, time.perf_counter() - start)


@contextlib.contextmanager
def timing(enabled: bool, report: bool = True) -> Iterator[CompileTimer | None]:
    """Make a fresh timer active for the block (and rewrite patterns timed) when `enabled`;
    print its table on stderr at the end when `report`. Nested inside an active timer, the
    block records into that one and prints nothing."""
    global _ACTIVE
    if not enabled or _ACTIVE is not None:
        yield _ACTIVE
        return
    timer = _ACTIVE = CompileTimer()
    original = PatternRewriteWalker.rewrite_region
    timed = _timed_rewrite_region(original, timer)
    PatternRewriteWalker.rewrite_region = timed  # type: ignore[method-assign]
    try:
        yield timer
    finally:
        PatternRewriteWalker.rewrite_region = original  # type: ignore[method-assign]
        _ACTIVE = None
        if report:
            print(timer.report(), file=sys.stderr, flush=True)


@contextlib.contextmanager
def timed_pass(name: str) -> Iterator[None]:
    """Record a pass as phase `pass NAME`, its rewrite patterns under it."""
    timer = _ACTIVE
    if timer is None:
        yield
        return
    timer.current_pass = name
    try:
        with phase(f"pass {name}"):
            yield
    finally:
        timer.current_pass = ""


class _TimedPattern(RewritePattern):
    """A rewrite pattern whose every try is timed into a `PatternTime`."""

    def __init__(self, pattern: RewritePattern, record: PatternTime) -> None:
        self.pattern = pattern
        self.record = record

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        start = time.perf_counter()
        try:
            self.pattern.match_and_rewrite(op, rewriter)
        finally:
            self.record.seconds += time.perf_counter() - start
            self.record.tries += 1
            self.record.rewrites += rewriter.has_done_action


def _timed_rewrite_region(original, timer: CompileTimer):  # type: ignore[no-untyped-def]
    """Return `PatternRewriteWalker.rewrite_region` that times each pattern the walk applies
    (each of a `GreedyRewritePatternApplier`'s, or the walker's one pattern)."""

    def wrap(pattern: RewritePattern) -> _TimedPattern:
        key = (timer.current_pass, type(pattern).__name__)
        return _TimedPattern(pattern, timer.patterns.setdefault(key, PatternTime()))

    def rewrite_region(walker: PatternRewriteWalker, region: Region) -> bool:
        pattern = walker.pattern
        if isinstance(pattern, GreedyRewritePatternApplier):
            inner = pattern.rewrite_patterns
            pattern.rewrite_patterns = [wrap(p) for p in inner]
            try:
                return original(walker, region)
            finally:
                pattern.rewrite_patterns = inner
        walker.pattern = wrap(pattern)
        try:
            return original(walker, region)
        finally:
            walker.pattern = pattern

    return rewrite_region
