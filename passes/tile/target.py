"""The GPU a schedule is planned for: the facts the rules decide by, the H200 by default."""

from __future__ import annotations

from dataclasses import dataclass

from tinyopt.dialects.tile import DYNAMIC_SHARED_BYTES


@dataclass(frozen=True)
class Target:
    """Facts about the GPU that plans depend on (`plan{sms=...}` and `tile{sms=...}` set the SM
    count; the shared-memory limits are sm_90's)."""

    sms: int = 132
    """Streaming multiprocessors: a wave of blocks is `sms` × blocks per SM."""
    static_shared: int = 48 * 1024
    """Shared memory a block may declare statically."""
    dynamic_shared: int = DYNAMIC_SHARED_BYTES
    """Shared memory a block may use, dynamic and opted in."""


H200 = Target()
