"""Split-K over a thread-block cluster (`splitk_mode=cluster`, `WgmmaTiles.cluster`).

A GEMM on a small grid runs faster with K cut into chunks, more blocks each walking a shorter
K loop (`split_k_plan.py`); split as a loop-level rewrite (`split_k.py`) the chunks' partial
sums go through a global workspace to a second kernel, the fold, whose launch and pass over
the workspace cost a few microseconds on a kernel of ten. Here the `s` blocks of one output
tile form a cluster (`__cluster_dims__(1, 1, s)`, sm_90): blocks z = b·s + r, rank r running
chunk r of K (TMA's zeros past K, as in the partial kernel). Each block stages its f32 tile in
its own shared memory; after a cluster barrier, rank r reads its 1/s of the tile's elements
from all `s` blocks' shared memory (`tile.cluster_vload`, 16 bytes each), adds them in rank
order (the fold's order) and runs the epilogue on them; a second barrier keeps every block's
shared memory alive until the others have read it. One kernel, no workspace.

`splitk_mode=cluster` asks for it; `splitk_mode=auto` (the default) takes it for a small grid
where every cluster runs in one wave and its estimate beats two passes'
(`split_k_plan.cluster_split_estimate`; H100, RESULTS.md thirty-sixth session: the k/v linear at
64 rows 13.2 → 12.5 µs on 16 clusters of 4). On an H100 (thirty-first session run 1) its
programs matched float64, but it ran 0.68-1.06x cuBLAS on 14 small-grid bf16 shapes where two
passes ran 0.92-1.07x: a cluster runs within one GPC, so a wave of one block an SM holds 15
clusters of 8, not 132/8, and the k/v linear's 16 clusters ran in two waves (ncu: 14.5 µs
against 7.9 + 3.8). Two blocks an SM hold 30: a ring cut for two, with launch bounds for two,
hung on an H100 (run 3) with the consumers' `setmaxnreg` at 232 (registers the other block
held); at 216 (commit 172fbea) it ran correctly (thirty-second session run 1) and faster (k/v
15.9 → 13.7 µs), but slower than two passes on 10 of 14 shapes (k/v 13.7 against 13.0 µs), so
kernels here run one block an SM. Only the plain f16/bf16 GEMM takes it (blocks launched per
tile, no dual GEMM, no stream-K; 8-bit floats are not split, as in `split_k.py`), at most 8
blocks a cluster (the portable limit).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from xdsl.dialects import arith
from xdsl.ir import SSAValue

from tinyopt.dialects import tile
from tinyopt.passes.tile.emit import LaneEmitter, vector_width
from tinyopt.passes.tile.gemm.contraction_match import Contraction
from tinyopt.passes.tile.gemm.split_k import chunk_elements, row_elements
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.target import Target
from tinyopt.passes.tile.gemm.wgmma_plan import (
    fitted_ring,
    BK,
    CLUSTER_SPLITS,
    STAGE_COLUMNS,
    WARPGROUP,
    WgmmaTiles,
    _fail,
)

if TYPE_CHECKING:
    from tinyopt.passes.tile.gemm.wgmma import _WgmmaEmitter

GROUP_COLUMNS = 8
"""Columns of the tile a thread reduces at once: two 16-byte loads from each block."""


def cluster_chunk(c: Contraction, splits: int) -> int:
    """The K elements of each block's chunk: whole 64-element TMA boxes (the last chunk may
    reach past K), or all of K unsplit."""
    k = c.extents[3]
    return chunk_elements(k, splits, row_elements(c)) if splits > 1 else k


def clustered_tiles(
    t: WgmmaTiles, c: Contraction, knobs: Knobs, fp8: bool, target: Target
) -> WgmmaTiles | str:
    """`t` with K split over clusters of `knobs.splitk` blocks, or why it cannot be: each block
    stages its whole f32 tile, so the ring gets what shared memory is left (fewer slots unless
    `stages` is set, and under an automatic block a narrower one where the slots do not fit)."""
    splits = knobs.splitk
    set_by_hand = [
        f"{name}={value}"
        for name, value, clash in (
            ("persistent", knobs.persistent, knobs.persistent == 1),
            ("store", knobs.store, knobs.store in ("direct", "tma")),
            ("streamk", knobs.streamk, knobs.streamk == "tail"),
        )
        if clash
    ]
    if set_by_hand:
        return _fail(
            f"splits K over a cluster (splitk_mode=cluster) in blocks launched per tile that "
            f"stage their sums in shared memory, not with {' '.join(set_by_hand)}"
        )
    why = cluster_refusal(c, splits, fp8)
    if why is not None:
        return why
    widths = [t.bn] + ([w for w in (128, 64) if w < t.bn] if not knobs.bn else [])
    for bn in widths:
        fitted = replace(t, bn=bn, cluster=splits, store="smem", persistent=0, streamk="off")
        if not knobs.stages:
            fitted = fitted_ring(fitted, target)
        if fitted.shared_bytes <= target.dynamic_shared:
            return fitted
    return _fail(
        f"splits K over a cluster (splitk_mode=cluster) with each block's f32 tile in shared "
        f"memory: bm={t.bm} bn={t.bn} with {fitted.stages} ring slots needs "
        f"{fitted.shared_bytes} bytes, more than the {target.dynamic_shared} a block may use"
    )


def cluster_refusal(c: Contraction, splits: int, fp8: bool, partial: bool = False) -> str | None:
    """Why contraction `c` cannot split K over clusters of `splits` blocks, or None: 8-bit
    float operands are not split (as `split_k.py` does not), nor is a split's partial kernel
    (`partial`) again, and every chunk must be whole 64-element TMA boxes."""
    if fp8:
        return _fail("does not split K of 8-bit float operands")
    if partial:
        return _fail(
            "splits K over a cluster in a kernel that holds all of K, not in a split's partial "
            "kernel"
        )
    if splits not in CLUSTER_SPLITS:
        return _fail(
            f"splits K over clusters of 2, 4 or 8 blocks (splitk_mode=cluster), got splitk={splits}"
        )
    chunk = cluster_chunk(c, splits)
    if chunk % BK:
        return _fail(
            f"splits K over a cluster in chunks of whole {BK}-element boxes; K={c.extents[3]} "
            f"in {splits} chunks leaves chunks of {chunk}"
        )
    return None


def cluster_epilogue(g: _WgmmaEmitter, acc: SSAValue, group: SSAValue) -> None:
    """Consumer warpgroup `group`'s rows of the block's partial sums staged in its own f32
    tile (`g.staging`, [consumers, bn/64, 64, 64], 16-byte chunks swizzled as the staged
    epilogue's), the cluster's barrier, then the rank's share of those rows summed over the
    cluster's blocks and put through the epilogue, and the barrier again."""
    em, t = g.em, g.t
    local = em.rem(g.tid, WARPGROUP)
    warp, lane = em.div(local, 32), em.rem(local, 32)
    # The wgmma D fragment: rows 16·warp + lane/4 (+8), columns 8j + 2(lane%4) (+1).
    fragment_row = em.add(em.mul(warp, 16), em.div(lane, 4))
    fragment = (fragment_row, em.mul(em.rem(lane, 4), 2), g._swizzle(fragment_row))
    for chunk in range(t.tile_n // STAGE_COLUMNS):
        g._stage_chunk(acc, chunk, [group, em.index(chunk)], fragment)
    em.op(tile.ClusterSyncOp())
    _reduce_share(g, group)
    em.op(tile.ClusterSyncOp())


def _reduce_share(g: _WgmmaEmitter, group: SSAValue) -> None:
    """Rank r of s sums groups r·G .. (r+1)·G - 1 of the warpgroup's GROUP_COLUMNS-column
    groups (G of them: 64 rows × bn/8, over s), row by row, consecutive threads taking
    consecutive groups of a row (coalesced stores), and applies the epilogue to each column."""
    em, t, c = g.em, g.t, g.c
    share = tile.WGMMA_M * (t.tile_n // GROUP_COLUMNS) // t.cluster
    rank = em.rem(em.value(tile.BlockIdOp("z")), t.cluster)
    local = em.rem(g.tid, WARPGROUP)
    row0 = em.add(g.m0, em.mul(group, tile.WGMMA_M))
    width = vector_width(c.epilogue, c.n_iv, g.n, GROUP_COLUMNS)
    for turn in range(-(-share // WARPGROUP)):
        mine = em.add(local, turn * WARPGROUP)
        with em.when([em.less(mine, share)] if share % WARPGROUP else []):
            _reduce_group(g, group, em.add(em.mul(rank, share), mine), row0, width)


def _reduce_group(
    g: _WgmmaEmitter, group: SSAValue, index: SSAValue, row0: SSAValue, width: int
) -> None:
    """Sums column group `index` of the warpgroup's staged rows over the cluster's blocks, in
    rank order, and applies the epilogue to its columns inside the output."""
    em, t, c = g.em, g.t, g.c
    per_row = t.tile_n // GROUP_COLUMNS
    row, column_group = em.div(index, per_row), em.rem(index, per_row)
    groups_a_chunk = STAGE_COLUMNS // GROUP_COLUMNS
    chunk = em.div(column_group, groups_a_chunk)
    column = em.mul(em.rem(column_group, groups_a_chunk), GROUP_COLUMNS)
    swizzle = g._swizzle(row)
    sums: list[SSAValue] = []
    for source in range(t.cluster):
        values: list[SSAValue] = []
        for h in range(2):
            at = g._staged_column(swizzle, em.add(column, 4 * h))
            load = tile.ClusterVectorLoadOp(g.staging, [group, chunk, row, at], em.index(source))
            values += em.op(load).results
        if sums:
            values = [em.value(arith.AddfOp(a, b)) for a, b in zip(sums, values, strict=True)]
        sums = values
    m = em.add(row0, row)
    n0 = em.add(g.n0, em.add(em.mul(chunk, STAGE_COLUMNS), column))
    for j0 in range(0, GROUP_COLUMNS, width):
        n = em.add(n0, j0)
        with em.when([em.less(m, g.m), em.less(n, g.n)]):
            local_map = dict(g.mapping) | {c.m_iv: m}
            lanes = [{g.results[0]: value} for value in sums[j0 : j0 + width]]
            LaneEmitter(em, c.n_iv, n, width).emit(c.epilogue, local_map, lanes)
