"""The GPU a schedule is planned for: the facts the rules decide by, the H200 by default."""

from __future__ import annotations

from dataclasses import dataclass

from tinyopt.dialects.tile import DYNAMIC_SHARED_BYTES

SHARED_PER_SM = 228 * 1024
"""Shared memory of one sm_90 SM; each resident block also takes 1 KiB of it."""
MAX_BLOCKS_PER_SM = 32


def blocks_per_sm(block_shared: int) -> int:
    """Blocks one SM holds at once by shared memory, each using `block_shared` bytes."""
    return max(1, min(MAX_BLOCKS_PER_SM, SHARED_PER_SM // (block_shared + 1024)))


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

    def cluster_slots(self, size: int, per_sm: int) -> int:
        """Thread-block clusters of `size` blocks that one wave holds at `per_sm` blocks an SM.
        A cluster runs within one GPC, so clusters of more than 2 blocks leave about one SM in
        11 idle: cuOccupancyMaxActiveClusters on a 132-SM H100 (2026-12-05, RESULTS.md,
        thirty-first session) gave 15 clusters of 8 and 30 of 4 at one block an SM (120 SMs),
        30 of 8 and 62 of 4 at two, 66 of 2 at one (every SM)."""
        sms = self.sms * 10 // 11 if size > 2 else self.sms
        return per_sm * sms // size


H200 = Target()
