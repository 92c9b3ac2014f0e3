"""The f16/bf16 wgmma GEMM with its sides exchanged (`swap=on`): Yᵀ = B·Aᵀ.

wgmma's M is 64 rows a consumer warpgroup, its N any multiple of 8 up to 256. The plain plan
puts A's M on wgmma's M, so a block takes 64, 128 or 192 rows of the output and only its
width over N is free; an N-major B's tile is copied in whole 64-column chunks, so a width
off them copies columns it does not use (`WgmmaTiles.b_columns`). Swapped, a block's
consumer rows are bm of B's N and its wgmma N is bn of A's M, A's rows being K-major
whatever B's orientation: the block's width over M is free in steps of 16 and costs no
copied byte. cuBLAS runs such blocks on shapes whose waves round badly (3×1000³ on 128×200,
5000³ on 256×152: benchmarks/RESULTS.md, forty-sixth session call 4).

The ring's A tile holds B's rows: K-major for a `[N, K]` B, else 64-column chunks of an
N-major `[K, N]` B, which wgmma reads M-major (trans-a); its B tile holds bn of A's rows.
The accumulators hold the output tile transposed: the epilogue stores each one where it lies
(`store=direct`, `wgmma_swapped.swapped_epilogue`) or stages them transposed in shared memory
and stores 16 bytes a thread (`store=smem` or `auto`, `swapped_staged_epilogue`: ahead of
the direct stores at all seven shapes timed both ways, H100, benchmarks/RESULTS.md fifty-first
session). The plan runs one block per tile (or, with `persistent=1` set by hand, one an SM
walking tiles), each with a producer warpgroup: `swap=on` with another setting is refused by
name. A small grid splits K in two passes as the plain plan's does (`planner._auto_splits`,
the grid of bn of M by bm of N), the partial kernels swapped too; not over a cluster.
`swap=auto` is `off` for these operands: timed on an H100 (benchmarks/RESULTS.md, fifty-first
session) the swapped plan ran 0.888× the plain plan's speed over issue 23's sweep, 3% faster
or more at 4 of 63 shapes and slower at 3×1000³ and 5000³, the shapes it was built for; with
the widths of `width_efficiency` and the staged epilogue 0.895× (fifty-second session), 3%
faster or more at 7 random shapes and 0.97× and 1.01× at 3×1000³ and 5000³.
"""

from __future__ import annotations

from tinyopt.passes.tile.gemm.contraction_match import Contraction
from tinyopt.passes.tile.gemm.wgmma_plan import (
    BLOCK_EFFICIENCY,
    GROUP,
    MAX_STAGES,
    TALL,
    WgmmaTiles,
    _fail,
    approximate_math,
    fitted_ring,
    l2_promotion,
    wgmma_tile_refusal,
)
from tinyopt.passes.tile.gemm.wgmma_multicast import MULTICASTS
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.target import Target

SWAP_ROWS = (128, TALL)
"""The rows of B's N a swapped block takes where `bm` is left to the plan."""

WIDTH_STEP = 16
"""The widths over A's M a swapped block may take: multiples of this (`wgmma_tile_refusal`)."""


NARROWEST = 128
"""The narrowest width `swap_width` takes where M is wider: a narrower block's wgmma reads
more shared memory a product (A's 64 rows for fewer columns)."""


WIDTH_EFFICIENCY = {bn: e for (bm, bn), e in BLOCK_EFFICIENCY.items() if bm == 128}
"""`BLOCK_EFFICIENCY`'s 128-row blocks by width."""


def swap_width(batch: int, m: int, n: int, bm: int, target: Target) -> int:
    """The width over M (`NARROWEST`, or M rounded up to 16 where that is less, to 256, or 192
    beside three consumer warpgroups) whose grid of `bm`-row blocks over N costs least by
    `waves_work`, the fewest blocks on a tie."""
    widest = TALL if bm == TALL else 256
    narrowest = max(64, min(NARROWEST, -(-m // WIDTH_STEP) * WIDTH_STEP))
    widths = range(narrowest, widest + 1, WIDTH_STEP)
    return min(widths, key=lambda width: waves_work(batch, m, n, bm, width, target))


def waves_work(
    batch: int, m: int, n: int, bm: int, width: int, target: Target
) -> tuple[float, int]:
    """The time of a swapped grid of `bm` rows of B's N by `width` of A's M in waves of one
    block an SM, each costing bm × width at `width_efficiency`, and its blocks."""
    tiles = batch * -(-n // bm) * -(-m // width)
    return -(-tiles // target.sms) * bm * width / width_efficiency(width), tiles


def width_efficiency(width: int) -> float:
    """A block's throughput per product at this wgmma N against 256 columns: the plain plan's
    measured `BLOCK_EFFICIENCY` of the table's width at or below it (128 columns 0.65, 192 and
    256 1.0), 128's below 128. Counting rounds alone took 144 or 160 columns on grids of many
    waves: on an H100 (benchmarks/RESULTS.md fifty-first session) those ran 0.79-0.84× the
    plain plan's speed (geometric means over issue 23's shapes, 0.62 at worst) where 256
    columns ran 0.945×. The table's efficiencies are the plain kernel's; with them the sweep
    ran 0.895× the plain plan's speed (fifty-second session), against 0.888× before."""
    narrower = [bn for bn in WIDTH_EFFICIENCY if bn <= width]
    return WIDTH_EFFICIENCY[max(narrower, default=min(WIDTH_EFFICIENCY))]


def swapped_tiles(
    c: Contraction, knobs: Knobs, dual: bool, fp8: bool, target: Target
) -> WgmmaTiles | str:
    """The swapped plan `swap=on` asks for (`bm` and `bn` as set, else by `swap_width` over
    `SWAP_ROWS`: the one of least work that can run), the deepest ring that fits (up to
    `MAX_STAGES`), or why it cannot run."""
    clashes = [
        setting
        for setting, clash in (
            ("8-bit float operands", fp8),
            ("a dual GEMM", dual),
            ("ws=0", knobs.ws == 0),
            ("store=tma", knobs.store == "tma"),
            (f"multicast={knobs.multicast}", knobs.multicast in MULTICASTS),
            (f"streamk={knobs.streamk}", knobs.streamk in ("on", "tail")),
            ("promote=on", knobs.promote == "on"),
            ("poverlap=on", knobs.poverlap == "on"),
            ("pturns=on", knobs.pturns == "on"),
            ("pscales=pair", knobs.pscales == "pair"),
            ("splitk_mode=cluster", knobs.splitk_mode == "cluster" and knobs.splitk > 1),
        )
        if clash
    ]
    if clashes:
        return _fail(
            "swap=on runs f16/bf16 operands on blocks with a producer warpgroup that "
            f"store direct or staged; not with {', '.join(clashes)}"
        )
    batch, m, n, _ = c.extents
    rows = (knobs.bm,) if knobs.bm else SWAP_ROWS
    plans = []
    for bm in rows:
        bn = knobs.bn or swap_width(batch, m, n, bm, target)
        t = WgmmaTiles(
            bm,
            bn,
            knobs.stages or MAX_STAGES,
            1,
            group=knobs.group or GROUP,
            fastmath="on" if approximate_math(knobs.fastmath, c) else "off",
            evict=knobs.evict if knobs.evict in ("a", "b", "ab") else "off",
            l2promo=l2_promotion(knobs.l2promo),
            store="direct" if knobs.store == "direct" else "smem",
            persistent=1 if knobs.persistent == 1 else 0,
            swap="on",
        )
        plans.append(t if knobs.stages else fitted_ring(t, target))

    refusals = [wgmma_tile_refusal(t, target) for t in plans]
    runnable = [t for t, why in zip(plans, refusals, strict=True) if why is None]
    if not runnable:
        return refusals[0]  # type: ignore[return-value]
    return min(runnable, key=lambda t: waves_work(batch, m, n, t.bm, t.bn, target))
