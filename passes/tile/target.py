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

    def cluster_slots(self, size: int) -> int:
        """Thread-block clusters of `size` blocks that one wave holds at one block an SM. A
        cluster runs within one GPC, so clusters of more than 2 blocks leave about one SM in
        11 idle: cuOccupancyMaxActiveClusters on a 132-SM H100 (2026-12-05, RESULTS.md,
        thirty-first session) gave 15 clusters of 8 and 30 of 4 (120 SMs), 66 of 2 (every
        SM)."""
        sms = self.sms * 10 // 11 if size > 2 else self.sms
        return sms // size


H200 = Target()
