"""A progress bar on stderr for long builds and tuning runs: drawn only where stderr is a
terminal, and only once the work has run longer than a second (short builds print nothing)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

WIDTH = 24
"""Characters of the bar."""


class Progress:
    """`label [#####-----] done/total detail`, redrawn in place on each `advance`."""

    def __init__(
        self, label: str, total: int, after: float = 1.0, stream: TextIO | None = None
    ) -> None:
        self.label = label
        self.total = total
        self.done = 0
        self.stream = stream or sys.stderr
        self.shown = False
        self.quiet = not self.stream.isatty()
        self.start = time.perf_counter()
        self.after = after

    def advance(self, detail: str = "", steps: int = 1) -> None:
        """Count `steps` more done and redraw, once past the delay, with `detail` after it."""
        self.done += steps
        if self.quiet or time.perf_counter() - self.start < self.after:
            return
        filled = WIDTH * self.done // max(self.total, 1)
        bar = "#" * filled + "-" * (WIDTH - filled)
        line = f"{self.label} [{bar}] {self.done}/{self.total} {detail}".rstrip()
        self.stream.write(f"\r\033[K{line}")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        """Erase the bar, if it was drawn."""
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
