"""The GPU a schedule is planned for: the facts the rules decide by, the H200 by default."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """Facts about the GPU that plans depend on (`plan{sms=...}` and `tile{sms=...}` set the SM
    count; the rest are the H200's, sm_90a)."""

    sms: int = 132
    """Streaming multiprocessors: a wave of blocks is `sms` × blocks per SM."""
    static_shared: int = 48 * 1024
    """Shared memory a block may declare statically."""
    dynamic_shared: int = 227 * 1024
    """Shared memory a block may use, dynamic and opted in."""
    l2_bytes: int = 50 * 1024 * 1024
    """L2 cache size."""


H200 = Target()
