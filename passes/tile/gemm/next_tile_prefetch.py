"""Prefetching into L2 the first K steps of the tile that takes a block's slot next.

In a batched GEMM each batch's operands are read by one wave only, so the next wave's first
copies miss L2 and every block waits one DRAM latency before its first FMA. Blocks are launched
in order as slots free up, so the tile that takes this block's slot is, near enough, the one
`resident` (SMs × blocks per SM) places later in launch order. At the start of the K loop's
last iteration each thread asks L2 (`tile.prefetch_l2`) for its share of the 128-byte lines
holding that tile's first two K steps of each operand that is a plain load. The variants that
lost (prefetching inside the loop, or a whole tile's panels at its start) are in
benchmarks/RESULTS.md, "Where the batched 64 × 512³ lost to the unbatched kernel (runs 1–2)"
and "`tile{prefetch}` and `interleave` together (runs 8–12)" (measured 2026-12-02).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import memref
from xdsl.ir import Operation, SSAValue

from tinyopt.dialects import tile
from tinyopt.passes.tile.gemm.contraction_cp_async import single_load
from tinyopt.passes.tile.gemm.contraction_plan import Tiles
from tinyopt.passes.tile.emit import Emitter, Mapping

LINE_BYTES = 128
"""What one `prefetch.global.L2` brings in: an L2 cache line."""

DEPTH_STEPS = 2
"""K steps of the next tile prefetched: the K loop's iteration that issues them runs two."""


@dataclass(frozen=True)
class PrefetchedSide:
    """One operand's plain load: its M (A) or N (B) loop variable, that axis's extent and tile,
    and whether the operand's rows run along K in memory (else along M or N)."""

    load: memref.LoadOp
    outer_iv: SSAValue
    outer_extent: int
    tile_outer: int
    along_k: bool


def prefetched_side(
    side: Sequence[Operation],
    value: SSAValue,
    k_iv: SSAValue,
    outer_iv: SSAValue,
    outer_extent: int,
    tile_outer: int,
) -> PrefetchedSide | None:
    """Returns how to prefetch a side, or None where it is not one load (a fused prologue
    reads other buffers) or its rows run along neither K nor M/N."""
    if (load := single_load(side, value)) is None:
        return None
    last = load.indices[-1] if load.indices else None
    if last is not k_iv and last is not outer_iv:
        return None
    return PrefetchedSide(load, outer_iv, outer_extent, tile_outer, last is k_iv)


def prefetches(
    prefetch: str,
    t: Tiles,
    stream_k: bool,
    sides: Sequence[PrefetchedSide | None],
    grid: tuple[int, int, int],
    sms: int,
    kernel: str,
) -> bool | str:
    """Returns whether the K loop of tiling `t` prefetches the next tile (`prefetch`), or why
    `prefetch=on` cannot apply. The next tile is looked for SMs × `minblocks` blocks later,
    exact only for 256-thread blocks (smaller ones fit more per SM than their launch bounds
    promise), so `auto` takes only those, in batches of more than one wave."""
    copy, stages = t.copy, t.stages
    register_staged = copy == "ld" and stages == 2 and not stream_k
    plain = any(side is not None for side in sides)
    if prefetch == "on" and not register_staged:
        return (
            "prefetch=on needs the register-staged double-buffered K loop with one block "
            f"per tile (copy=ld, stages=2, no stream-K); kernel @{kernel} has copy={copy}, "
            f"stages={stages}{', stream-K' if stream_k else ''}"
        )
    if prefetch == "on" and not plain:
        return (
            f"prefetch=on needs an operand that is one plain load; kernel @{kernel} "
            "computes both A and B in a fused prologue (use prefetch=off)"
        )
    if prefetch != "auto":
        return prefetch == "on"
    more_than_a_wave = grid[0] * grid[1] * grid[2] > sms * t.minblocks
    return register_staged and plain and grid[2] > 1 and more_than_a_wave and t.block_threads == 256


def prefetch_tile(
    em: Emitter,
    local: Mapping,
    tid: SSAValue,
    threads: int,
    k_iv: SSAValue,
    k: int,
    bk: int,
    sides: Sequence[tuple[PrefetchedSide, SSAValue]],
) -> None:
    """Emits this thread's prefetches of the lines holding K steps 0..DEPTH_STEPS of each
    (side, outer origin): `local` maps the batch of the tile prefetched. The sides' lines are
    numbered one after the other across the threads, so a side begins where the last ended."""
    depth = min(DEPTH_STEPS * bk, k)
    first = 0
    for side, outer0 in sides:
        element_bytes = side.load.res.type.bitwidth // 8
        per_line = LINE_BYTES // element_bytes
        rows, along = (side.tile_outer, depth) if side.along_k else (depth, side.tile_outer)
        per_row = -(-along // per_line)
        lines = rows * per_row
        shift = first % threads
        lane = em.rem(em.add(tid, threads - shift), threads) if shift else tid
        first += lines
        for index in range(-(-lines // threads)):
            line = em.add(lane, index * threads)
            row = em.div(line, per_row)
            chunk = em.mul(em.rem(line, per_row), per_line) if per_row > 1 else em.index(0)
            kk, oo = (chunk, row) if side.along_k else (row, chunk)
            o = em.add(outer0, oo)
            checks = [
                *([em.less(line, lines)] if (index + 1) * threads > lines else []),
                *([em.less(o, side.outer_extent)] if side.outer_extent % side.tile_outer else []),
            ]
            with em.when(checks):
                at = dict(local) | {k_iv: kk, side.outer_iv: o}
                indices = [at.get(i, i) for i in side.load.indices]
                buffer = local.get(side.load.memref, side.load.memref)
                em.op(tile.PrefetchL2Op(buffer, indices))
