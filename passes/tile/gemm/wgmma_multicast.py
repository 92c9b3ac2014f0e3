"""TMA multicast of B over pairs of blocks (`multicast=on`, `WgmmaTiles.multicast`).

The blocks of two consecutive rows of tiles in one column read the same B tiles. Launched as a
thread-block cluster of two (`__cluster_dims__(1, 2, 1)`, or `(2, 1, 1)` for a persistent grid,
whose clusters walk pairs of tiles), each block's producer copies its own A tile and half of the
B tile's rows (K-major: bn/2 rows; N-major: half of its 64-column chunks) with a multicast copy
that lands in both blocks' ring slot and completes its bytes on both blocks' `full` mbarrier:
the L2 serves each B tile once for two blocks, a third fewer bytes a 128×256 block's K step
(16 KiB of A and 16 of B instead of 16 and 32).

A slot may be refilled only when both blocks' consumers are done with it, since either block's
copy writes into both: one thread of each consumer warpgroup arrives on each block's `empty`
mbarrier (`tile.mbarrier_arrive_cluster`, after `wgmma.wait_group` — the warpgroup's wgmma
reading the slot has completed once one of its threads waited for it), so `empty` counts
consumers × 2 arrivals. The mbarrier inits are fenced for the cluster and both blocks pass a
cluster barrier before either copies or arrives; both pass another before exiting, so no
arrival lands in a block that has gone. With an odd number of rows of tiles the last pair's
second block copies zeros past M (TMA fills them) and stores nothing.

Only the plain GEMM takes it: one product per block (no dual GEMM), the slot read by wgmma only
(no promoted FP8 steps, block scales or TF32 split), a producer warpgroup (`ws=1`), no split of
K over a cluster and no stream-K.
"""

from __future__ import annotations

from dataclasses import replace

from tinyopt.passes.tile.gemm.wgmma_plan import BK, Operands, WgmmaTiles, _fail
from tinyopt.passes.tile.target import Target


def multicast_refusal(
    t: WgmmaTiles, operands: Operands, m: int, element_bits: int = 16
) -> str | None:
    """Why blocks of `t` cannot share B tiles by multicast, or None."""
    why = []
    if t.dual == "on":
        why.append("a dual GEMM")
    if t.promote == "on" or operands.a_scale or operands.b_scale:
        why.append("promoted FP8 steps or block scales")
    if not t.ws:
        why.append("ws=0")
    if t.cluster > 1:
        why.append("a split of K over a cluster")
    if t.streamk == "tail":
        why.append("streamk=tail")
    if element_bits == 32:
        why.append("f32 operands split into TF32")
    chunks = t.tile_n // BK
    if operands.b_mn_major and chunks % 2:
        why.append(f"an N-major B of {chunks} 64-column chunks a block (an odd number)")
    if -(-m // t.bm) < 2:
        why.append(f"one row of tiles (M={m}, bm={t.bm})")
    if not why:
        return None
    return _fail(
        "multicasts B (multicast=on) to two blocks' plain GEMMs (one product, the ring read by "
        "wgmma only, a producer warpgroup, no cluster split or stream-K, two rows of tiles); "
        f"not with {', '.join(why)}"
    )


def multicast_tiles(
    t: WgmmaTiles, knob: str, operands: Operands, m: int, element_bits: int, target: Target
) -> WgmmaTiles | str:
    """`t` with the `multicast` knob resolved: `on` pairs the blocks (a ring slot fewer where
    the mbarriers' places in dynamic shared memory leave too little) or says why it cannot;
    `auto` and `off` keep each block's own B loads."""
    if knob != "on":
        return t
    if why := multicast_refusal(t, operands, m, element_bits):
        return why
    paired = replace(t, multicast="on")
    while paired.shared_bytes > target.dynamic_shared and paired.stages > 2:
        paired = replace(paired, stages=paired.stages - 1)
    return paired


def cluster_dims(t: WgmmaTiles) -> tuple[int, int, int] | None:
    """The launch's cluster: the pair along y (the grid's rows of tiles), or along x for a
    persistent grid; None without multicast."""
    if t.multicast == "off":
        return None
    return (t.sharers, 1, 1) if t.persistent else (1, t.sharers, 1)
