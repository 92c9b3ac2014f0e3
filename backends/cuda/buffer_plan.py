"""Plan where a host function's intermediate buffers live in one arena.

Two intermediates may share bytes when their lifetimes (from the launch that first uses one to
the launch that last uses it) do not overlap. The plan places the largest buffers first, each at
the lowest aligned offset that does not collide with a placed buffer it is live together with.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass

ALIGNMENT = 256
"""Byte alignment of every buffer in the arena (what cudaMalloc guarantees)."""


@dataclass(frozen=True)
class Lifetime:
    """A buffer of `nbytes` first used at step `first` and last used at step `last`."""

    key: Hashable
    nbytes: int
    first: int
    last: int

    def overlaps(self, other: Lifetime) -> bool:
        """Return whether the two buffers are live at the same step."""
        return self.first <= other.last and other.first <= self.last


def _aligned(n: int) -> int:
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def plan(lifetimes: Sequence[Lifetime], share: bool = True) -> tuple[dict[Hashable, int], int]:
    """Return each buffer's byte offset in the arena, and the arena size.

    With `share` false every buffer gets bytes of its own (the offsets simply follow each other).
    """
    offsets: dict[Hashable, int] = {}
    if not share:
        size = 0
        for lifetime in lifetimes:
            offsets[lifetime.key] = size
            size += _aligned(lifetime.nbytes)
        return offsets, size
    placed: list[tuple[int, Lifetime]] = []
    for lifetime in sorted(lifetimes, key=lambda t: (-t.nbytes, t.first)):
        busy = sorted(
            (offset, offset + _aligned(other.nbytes))
            for offset, other in placed
            if other.overlaps(lifetime)
        )
        offset = 0
        for start, end in busy:
            if offset + _aligned(lifetime.nbytes) <= start:
                break
            offset = max(offset, end)
        offsets[lifetime.key] = offset
        placed.append((offset, lifetime))
    size = max((offset + _aligned(t.nbytes) for offset, t in placed), default=0)
    return offsets, size
