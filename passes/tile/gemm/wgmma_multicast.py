"""TMA multicast of B (or A) over a cluster of two or four blocks (`multicast`,
`WgmmaTiles.multicast`).

The blocks of two consecutive rows of tiles in one column read the same B tiles
(`multicast = "b"`). Launched as a thread-block cluster of two (`__cluster_dims__(1, 2, 1)`, or
`(2, 1, 1)` for a persistent grid, whose clusters walk pairs of tiles), each block's producer
copies its own A tile and half of the B tile's rows (K-major: bn/2 rows; N-major: half of its
64-column chunks, or where they are odd in number, a 192-wide block's three, half of each
chunk's 64 K rows: `k_halves`) with a multicast copy that lands in both blocks' ring slot and
completes its bytes on both blocks' `full` mbarrier: the L2 serves each B tile once for two
blocks, a third fewer bytes a 128×256 block's K step (16 KiB of A and 16 of B instead of 16
and 32). With `multicast = "a"` the pair is two consecutive columns of tiles in one row
(`(2, 1, 1)`), and each block copies half of the A tile's rows into both. `b4` and `a4` do the
same over four consecutive rows (columns) of tiles, `(1, 4, 1)` (`(4, 1, 1)`), each block
copying a quarter (K-major rows, N-major chunks, or 16 K rows of each chunk where the chunks
do not divide by four): the L2 serves a 128×256 block's K step 16 KiB of A and 8 of B.

A slot may be refilled only when every block's consumers are done with it, since any block's
copy writes into all of them: one thread of each consumer warpgroup arrives on each block's
`empty` mbarrier (`tile.mbarrier_arrive_cluster`, after `wgmma.wait_group` — the warpgroup's
wgmma reading the slot has completed once one of its threads waited for it), so `empty`
counts consumers × sharers arrivals. The mbarrier inits are fenced for the cluster and the
blocks pass a cluster barrier before any copies or arrives. The consumers arrive only for the
ring steps a producer refills a slot after, so a block never exits while another may still
arrive on its mbarriers (each such arrival is one its producer waits for) or copy into its
slots (each such copy one its consumers wait for). Where the rows (columns) of tiles are not a
whole number of clusters, the last cluster's blocks past M (N) copy zeros and store nothing.

A persistent grid launches as many clusters as run at once (`Target.cluster_slots`): 66 pairs
on 132 SMs, but 30 clusters of four (120 blocks), since a cluster runs within one GPC and
the GPCs' SM counts are not all multiples of four (cuOccupancyMaxActiveClusters on a 132-SM
H100, thirty-first session). A grid of a block a tile is held to the same 30 clusters at once
by the hardware.

Only the plain GEMM takes it: one product per block (no dual GEMM), the slot read by wgmma only
(no TF32 split), a producer warpgroup (`ws=1`), no split of K over a cluster and no stream-K.
"""

from __future__ import annotations

from dataclasses import replace

from tinyopt.passes.tile.gemm.wgmma_plan import (
    BK,
    Operands,
    WgmmaTiles,
    _fail,
    fitted_ring,
    tile_count,
)
from tinyopt.passes.tile.target import Target


def multicast_refusal(
    t: WgmmaTiles, operands: Operands, m: int, n: int, element_bits: int = 16
) -> str | None:
    """Why blocks of `t` cannot share the tiles of the operand its `multicast` names (B for
    "b", A for "a") by multicast, or None."""
    operand = t.multicast[0].upper()
    why = []
    if t.dual == "on":
        why.append("a dual GEMM")
    if not t.ws:
        why.append("ws=0")
    if t.cluster > 1:
        why.append("a split of K over a cluster")
    if t.streamk == "tail":
        why.append("streamk=tail")
    if element_bits == 32:
        why.append("f32 operands split into TF32")
    sharers, b = t.sharers, t.multicast.startswith("b")
    rows, columns = -(-m // t.bm), -(-n // t.tile_n)
    if b and rows < sharers:
        why.append(f"{_count(rows, 'row')} of tiles (M={m}, bm={t.bm})")
    if not b and columns < sharers:
        why.append(f"{_count(columns, 'column')} of tiles (N={n}, bn={t.tile_n})")
    share = (t.tile_n if b else t.bm) // sharers
    if share % SWIZZLE_ROWS and not (b and operands.b_mn_major):
        why.append(f"a share of {share} rows of each {operand} tile")
    if not why:
        return None
    between, count = "rows" if b else "columns", "two" if sharers == 2 else "four"
    shares = "" if sharers == 2 else f", shares of whole {SWIZZLE_ROWS}-row swizzle atoms"
    return _fail(
        f"multicasts {operand} (multicast={t.multicast}) to {count} blocks' plain GEMMs (one "
        "product, the ring read by wgmma only, a producer warpgroup, no cluster split or "
        f"stream-K, {count} {between} of tiles{shares}); not with {', '.join(why)}"
    )


def _count(count: int, noun: str) -> str:
    return f"one {noun}" if count == 1 else f"{count} {noun}s"


SWIZZLE_ROWS = 8
"""Rows of a 128-byte swizzle atom: a block's share of a K-major tile starts on one, so that its
copy lands swizzled as the whole tile's would."""


MULTICASTS = ("a", "b", "a4", "b4")
"""The `multicast` values that share an operand: A or B, over two or four blocks."""


AUTO_MIN_STEPS = 24
"""`multicast=auto` takes K loops of at least this many steps: the pair starts behind a
cluster barrier and each slot waits for both blocks' consumers, which short loops do not earn
back (H100, thirty-fifth session: B on sectors, 5-41 steps 0.94-0.99x as fast, run 4; B off
sectors, 27 and 33 steps 1.10-1.20x, runs 8-9, and 13 steps 0.96x, run 4)."""

AUTO_MAX_WAVES = 2
"""`multicast=auto` takes grids of at most this many waves of blocks (one block an SM): there
a column's blocks stream the same B tiles at the same time; on grids of 3-9 waves (4096³,
8192³, random shapes) multicast ran 0.97-1.07x as fast."""

N_MAJOR_MIN_STEPS = 8
"""`multicast=auto` takes an N-major B (`[K, N]`: a matmul's or bmm's weight) off sectors for
K loops of at least this many steps, on grids of any number of waves (H100, thirty-seventh
session, 55 random [K, N] matmuls and bmms with B's rows off sectors and even rows of tiles:
loops of 4-7 steps 0.87-1.05x as fast, geometric mean 0.98; of 8-109 steps 0.95-1.28x, mean
1.07, at 0.5-12 waves)."""

K_HALVES_MAX_WAVES = 5
"""`multicast=auto` takes the pair's `k_halves` copies (an N-major B off sectors in 192-wide
blocks) on grids of at most this many waves, from `K_HALVES_MIN_STEPS` K steps (H100,
thirty-eighth session run 1, 30 random [K, N] matmuls and bmms of 192-wide blocks, B off
sectors, even rows of tiles, `multicast=b` against `off`: at 0.55-4.97 waves 0.975-1.33x as
fast, geometric mean 1.07 over 22, loops of 4-7 steps included; at 5.45-21.4 waves 0.973-1.08x,
mean 1.00 over 8)."""

K_HALVES_MIN_STEPS = 4
"""The shortest K loop `multicast=auto` takes `k_halves` copies for: the shortest measured."""


def k_halves(t: WgmmaTiles, b_mn_major: bool) -> bool:
    """Whether each block of a cluster sharing an N-major B copies its share of every 64-column
    chunk's K rows (32 of 64 in a pair, 16 of 64 among four, into every block's slot) rather
    than its share of the chunks: where the chunks do not divide among the blocks (192-wide
    blocks; 144-wide ones, whose third chunk is copied whole; 128-wide ones among four). The
    128-byte swizzle repeats every 8 rows, so each share lands at its rows of the chunk as a
    whole box would."""
    return t.cluster_rows > 1 and b_mn_major and t.b_columns // BK % t.cluster_rows != 0


def multicast_tiles(
    t: WgmmaTiles,
    knob: str,
    operands: Operands,
    extents: tuple[int, int, int, int],
    element_bits: int,
    b_off_sectors: bool,
    target: Target,
    stages_set: bool = False,
) -> WgmmaTiles | str:
    """`t` with the `multicast` knob resolved (for a GEMM of `extents` on operands of
    `element_bits`, B's rows off 32-byte sectors or not): `a` or `b` pairs the blocks (a ring
    slot fewer where the mbarriers' places in dynamic shared memory leave too little) or says
    why it cannot, `a4` or `b4` clusters four; `auto` pairs them by B where `multicast_pays`;
    `off` keeps each block's own loads. A ring depth set by hand (`stages_set`) is kept: where
    the cluster's mbarriers leave no room for it, `auto` keeps the blocks unpaired and the
    others are refused."""
    batch, m, n, k = extents
    pays = multicast_pays(
        t, batch, m, n, k, element_bits, b_off_sectors, operands.b_mn_major, target
    )
    if knob == "off" or (knob == "auto" and not pays):
        return t
    paired = replace(t, multicast="b" if knob == "auto" else knob)
    if why := multicast_refusal(paired, operands, m, n, element_bits):
        return t if knob == "auto" else why
    if not stages_set:
        paired = fitted_ring(paired, target)
    if paired.shared_bytes <= target.dynamic_shared:
        return paired
    if knob == "auto":
        return t
    group = "pair" if paired.sharers == 2 else "cluster"
    return _fail(
        f"multicasts {paired.multicast[0].upper()} (multicast={knob}) with stages={paired.stages}: "
        f"the {group}'s ring and mbarriers need {paired.shared_bytes} bytes of shared memory, "
        f"more than the {target.dynamic_shared} a block may use"
    )


def multicast_pays(
    t: WgmmaTiles,
    batch: int,
    m: int,
    n: int,
    k: int,
    element_bits: int,
    b_off_sectors: bool,
    b_mn_major: bool,
    target: Target,
) -> bool:
    """Whether sharing B tiles by multicast is expected to pay (`multicast=auto`): an f16/bf16
    B whose rows start off 32-byte sectors (`wgmma_staged.off_sectors`: each row of a box reads
    a sector more, and the L2 serves half as many boxes), blocks at least 128 columns wide (a
    B tile of 16 KiB a step or more to share), an even number of rows of tiles (an odd one adds
    a block of zeros, which cost up to a wave), and for a K-major B (`[N, K]`, as torch's
    linear holds it) a grid of at most `AUTO_MAX_WAVES` waves and a K loop of at least
    `AUTO_MIN_STEPS` steps, for an N-major B (`[K, N]`) a K loop of at least
    `N_MAJOR_MIN_STEPS` steps where a block's 64-column chunks are even in number, and at most
    `K_HALVES_MAX_WAVES` waves and `K_HALVES_MIN_STEPS` steps where they are odd (192-wide
    blocks: the pair's `k_halves` copies).

    Measured on an H100 (RESULTS.md, thirty-fifth session runs 3-9; 188 random bf16 linears,
    squares and the Llama shapes, `multicast=b` against `off`): where all of that holds,
    1.04-1.41x as fast on 23 shapes (1442×2320×4376 0.68 → 0.96x cuBLAS, 997×6112×5064 0.78
    → 1.00x, 957×7432×6856 0.67 → 0.87x); with B on sectors 0.95-1.12x (the Llama-3 linears
    at 1000 and 2048 rows 0.95-0.99x); odd rows of tiles 0.56-1.12x, short K loops 0.94-0.99x,
    grids of many waves 0.97-1.07x; 8-bit floats 0.97-1.00x (run 7). N-major B:
    `N_MAJOR_MIN_STEPS`, `K_HALVES_MAX_WAVES`."""
    rows = -(-m // t.bm)
    waves = tile_count(t, batch, m, n) / target.sms
    steps = -(-k * element_bits // (8 * 128))  # 128-byte K steps
    if b_mn_major and k_halves(replace(t, multicast="b"), True):
        loop_pays = waves <= K_HALVES_MAX_WAVES and steps >= K_HALVES_MIN_STEPS
    elif b_mn_major:
        loop_pays = steps >= N_MAJOR_MIN_STEPS
    else:
        loop_pays = waves <= AUTO_MAX_WAVES and steps >= AUTO_MIN_STEPS
    return element_bits == 16 and b_off_sectors and t.tile_n >= 128 and rows % 2 == 0 and loop_pays


def cluster_dims(t: WgmmaTiles) -> tuple[int, int, int] | None:
    """The launch's cluster: the pair along y (the grid's rows of tiles) where B is shared,
    along x (its columns) where A is, or for a persistent grid; None without multicast."""
    if t.multicast == "off":
        return None
    return (1, t.sharers, 1) if t.cluster_rows > 1 and not t.persistent else (t.sharers, 1, 1)
