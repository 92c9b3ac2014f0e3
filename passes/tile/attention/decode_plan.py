"""How the decode schedule's partial kernel is cut: how many chunks the keys are split into (the
count whose grid of (K/V group × split) blocks takes least time in waves over the SMs) and how
many key-parallel warps a tensor-core block runs (`akwarps`).

A block streams its chunk's K and V tiles (BN keys each) and has a fixed cost besides (the
first tile's latency, the partial state's store); a merge kernel follows any split, reading
every split's state per output element. A batch of one with 8 KV heads gives 8 groups, so the
keys of each are cut into many chunks to fill 132 SMs; a batch of 64 gives 512 groups, cut so
the last wave is not mostly empty. How many blocks an SM holds comes from the block's shared
memory (and, with key-parallel warps, its registers): the tensor-core block's here, the
CUDA-core (f32) block's from its geometry (`decode_simt.py`).

Key-parallel warps (`decode_warps.py`): W warps of one block share its group's rows and
split its chunk between them, each walking every W-th tile of WARP_KEYS keys through its own
WARP_SLOTS-slot ring and keeping its own (m, l, acc); the warps' states merge in shared memory
before the block stores its partial state. Smaller tiles per warp let a block hold many
warps: at GQA 4 × one query, D = 128, a block of 8 warps takes 146 KiB (one an SM) where one
warp with 64-key tiles took 74 (three an SM: 3 warps).
"""

from __future__ import annotations

from tinyopt.passes.tile.attention.decode_split import key_chunk
from tinyopt.passes.tile.attention.mma_sync import BN, PAD, SLOTS
from tinyopt.passes.tile.gemm.mma_sync import MMA_M
from tinyopt.passes.tile.target import Target

MAX_SPLITS = 256
"""Most chunks the keys are cut into (the `asplits` knob's bound)."""
SHARED_PER_SM = 228 * 1024
"""Shared memory of one sm_90 SM; each resident block also takes 1 KiB of it."""
MAX_BLOCKS_PER_SM = 32
BLOCK_COST_TILES = 2
"""A block's cost beyond its key tiles, in key tiles: the first tile's latency and the
epilogue (an estimate, to be measured: benchmarks/bench_decode_attention.py)."""
MERGE_COST_TILES = 3
"""The merge kernel's fixed cost, in a block's key tiles: its launch and first loads."""
MERGE_COST_PER_SPLIT = 1 / 8
"""The merge kernel's cost per split, in a tensor-core block's 64-key tiles: each thread
combines the splits' states one after the other (a load of each and two exponentials).
Measured on the H200 (benchmarks/RESULTS.md, 2026-12-03, one warp per block): at B1 L4096 16
splits ran 2.2 µs faster than 32 (blocks of 4 key tiles against 2), which the fixed cost
alone put the other way round. The CUDA-core (f32) blocks are not measured and keep the fixed
cost only."""

KEY_WARPS = (1, 2, 4, 8)
"""The `akwarps` values: warps of a tensor-core decode block that split its keys."""
WARP_KEYS = 16
"""Keys per K/V tile of one key-parallel warp: one k16 step of P·V, two n8 tiles of S."""
WARP_SLOTS = 2
"""Tiles in each key-parallel warp's ring (`aslots` = 0): the next one flies while one is
used, and both while the warp waits."""
WARP_RINGS = (2, 3, 4)
"""The `aslots` values: tiles in each key-parallel warp's ring, `aslots` - 1 in flight while
one is used."""
MAX_WARPS_HEAD_DIM = 128
"""Largest head dim of key-parallel warps: each keeps Q's fragments (head_qk / 4 registers)
and O (head_v / 2) in registers for the whole chunk."""
MERGE_ROW_PAD = 8
"""Floats after each row of O in the warps' merge buffer: the lane's partial l (4 lanes of a
row) and m (a copy per lane)."""
REGISTERS_PER_SM = 64 * 1024
MAX_WARPS_PER_SM = 64
KEY_WARP_BASE_REGISTERS = 72
"""Registers of a key-parallel warp's thread besides Q's fragments and O (scores, addresses,
the softmax): 168 at D = 128 (ptxas fits the kernel in them: tests/test_decode_attention_sass.py),
so three 128-thread blocks share the register file."""
DYNAMIC_ALIGN = 1024
"""Each dynamic shared buffer starts 1024-byte aligned, and the launch asks 1024 more
(backends/cuda/hopper.py, `dynamic_layout`)."""


def warps_for(rows: int) -> int:
    """Warps of a one-warp-per-16-rows decode block (akwarps = 1): one per 16 query rows of
    the group (one m16 tile each)."""
    return -(-rows // MMA_M)


def _aligned(sizes: list[int]) -> int:
    """The dynamic shared memory a launch asks for buffers of `sizes` bytes, in order."""
    end = 0
    for size in sizes:
        end = -(-end // DYNAMIC_ALIGN) * DYNAMIC_ALIGN + size
    return end + DYNAMIC_ALIGN


def shared_bytes(
    rows: int, head_qk: int, head_v: int, warps: int = 1, slots: int = WARP_SLOTS
) -> int:
    """Dynamic shared memory a tensor-core decode block asks for: with one warp per 16 rows
    (`warps` = 1), its Q rows and the two-slot K and V rings of 64-key tiles; with `warps`
    key-parallel warps, each warp's ring of `slots` WARP_KEYS-key tiles and the buffer the
    warps merge through (half of them write their state in each round)."""
    if warps == 1:
        q = warps_for(rows) * MMA_M * (head_qk + PAD) * 2
        return _aligned([q, *(SLOTS * BN * (h + PAD) * 2 for h in (head_qk, head_v))])
    rings = [warps * slots * WARP_KEYS * (h + PAD) * 2 for h in (head_qk, head_v)]
    merge = warps // 2 * rows * (head_v + MERGE_ROW_PAD) * 4
    return _aligned([*rings, merge])


def blocks_per_sm(block_shared: int) -> int:
    """Decode blocks one SM holds at once, each using `block_shared` bytes of shared memory."""
    return max(1, min(MAX_BLOCKS_PER_SM, SHARED_PER_SM // (block_shared + 1024)))


def key_warps_refusal(
    warps: int, rows: int, head_qk: int, head_v: int, slots: int = WARP_SLOTS
) -> str | None:
    """Why a tensor-core decode block cannot run `warps` key-parallel warps with rings of
    `slots` tiles, or None."""
    if warps not in KEY_WARPS:
        return f"akwarps must be one of {KEY_WARPS}, got {warps}"
    if slots not in WARP_RINGS:
        return f"aslots must be one of {WARP_RINGS}, got {slots}"
    if warps == 1:
        return None
    if (need := shared_bytes(rows, head_qk, head_v, warps, slots) + 1024) > SHARED_PER_SM:
        return (
            f"akwarps={warps} with aslots={slots} needs {need} bytes of shared memory, more "
            f"than an SM's {SHARED_PER_SM}"
        )
    if rows > MMA_M:
        return (
            f"akwarps={warps} needs at most {MMA_M} query rows per K/V group (one m16 tile a "
            f"warp), got {rows}"
        )
    if max(head_qk, head_v) > MAX_WARPS_HEAD_DIM:
        return (
            f"akwarps={warps} needs head dims of at most {MAX_WARPS_HEAD_DIM} (Q and O in "
            f"registers), got {head_qk} and {head_v}"
        )
    return None


def key_warp_registers(head_qk: int, head_v: int) -> int:
    """Registers a key-parallel warp's thread is planned to take."""
    return -(-(KEY_WARP_BASE_REGISTERS + head_qk // 4 + head_v // 2) // 8) * 8


def resident_blocks(
    rows: int, head_qk: int, head_v: int, warps: int, slots: int = WARP_SLOTS
) -> int:
    """Tensor-core decode blocks of `warps` key-parallel warps (rings of `slots` tiles) one SM
    holds (shared memory and, for several warps, registers: the kernel's `__launch_bounds__`
    asks for this many)."""
    by_shared = blocks_per_sm(shared_bytes(rows, head_qk, head_v, warps, slots))
    if warps == 1:
        return by_shared
    threads = warps * 32
    by_registers = REGISTERS_PER_SM // (key_warp_registers(head_qk, head_v) * threads)
    return max(1, min(by_shared, by_registers, MAX_WARPS_PER_SM // warps))


def auto_key_warps(
    rows: int, head_qk: int, head_v: int, chunk: int, slots: int = WARP_SLOTS
) -> int:
    """`akwarps` = 0: the most key-parallel warps a block may have (`KEY_WARPS`, refusals,
    shared memory for rings of `slots` tiles among them, aside), no more than the chunk's
    WARP_KEYS-key tiles. Measured on the H200 (2026-12-03,
    RESULTS.md, seventh session run 2; GQA 32/8, D 128, bf16): 8 warps a block, one block an
    SM, ran 1.04/0.94/0.95/0.94x cuDNN at B1 L4096, B1 L32768, B8 L32768, B64 L4096, against
    0.89/0.84/0.92/0.90 for 4 (three blocks, 12 warps an SM) and 0.85-0.91 for 1 and 2: a block
    whose warps stream more tiles of one chunk at once needs fewer splits and merges."""
    best = 1
    for warps in KEY_WARPS[1:]:
        if key_warps_refusal(warps, rows, head_qk, head_v, slots) is None:
            best = warps
    tiles = -(-chunk // WARP_KEYS)
    return min(best, 1 << (tiles.bit_length() - 1))


def auto_splits(
    groups: int,
    keys: int,
    resident: int,
    target: Target,
    warps: int = 1,
    per_split: float = MERGE_COST_PER_SPLIT,
) -> int:
    """Returns the split count whose grid of blocks, `resident` of them per SM, takes least
    time in waves plus the merge's (`per_split` tiles a split; ties: fewer splits). A block of
    `warps` > 1 key-parallel warps walks its chunk warps / 2 times as fast as one warp with
    64-key tiles: it keeps warps · 2 tiles of 16 keys in flight where that warp keeps one of 64
    (an estimate, to be measured)."""
    slots = target.sms * resident
    speed = 1 if warps == 1 else warps / 2
    best, best_cost = 1, float("inf")
    for asked in range(1, min(MAX_SPLITS, -(-keys // BN)) + 1):
        chunk, splits = key_chunk(keys, asked)
        if splits != asked:
            continue
        waves = -(-groups * splits // slots)
        cost = waves * (chunk / BN / speed + BLOCK_COST_TILES)
        if splits > 1:
            cost += MERGE_COST_TILES + splits * per_split
        if cost < best_cost:
            best, best_cost = splits, cost
    return best


def runtime_splits(
    groups: int,
    keys: int,
    resident: int,
    target: Target,
    warps: int,
    per_split: float,
    planned: int,
) -> list[tuple[int, int]]:
    """Steps (up to this many seen keys, splits) of the split count a kernel bounded by a
    runtime number of keys uses: at each power of two times BN keys (and at `keys`), the
    count `auto_splits` picks there, at most `planned` (the grid's; the blocks of the splits
    past a step's count have no keys). Doubling steps keep the chain of selects the kernel
    evaluates short (log2 of the capacity in tiles) while every step's chunks stay within
    2x of the ones its own plan would cut."""
    steps: list[tuple[int, int]] = []
    seen = BN
    while True:
        seen = min(seen, keys)
        splits = min(planned, auto_splits(groups, seen, resident, target, warps, per_split))
        if steps and steps[-1][1] == splits:
            steps[-1] = (seen, splits)
        else:
            steps.append((seen, splits))
        if seen == keys:
            return steps
        seen *= 2
