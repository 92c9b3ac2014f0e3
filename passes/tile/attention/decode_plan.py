"""How many chunks the decode schedule splits the keys into: the count whose grid of
(K/V group × split) blocks takes least time in waves over the SMs.

A block streams its chunk's K and V tiles (BN keys each) and has a fixed cost besides (the
first tile's latency, the partial state's store); a merge kernel follows any split. A batch of
one with 8 KV heads gives 8 groups, so the keys of each are cut into many chunks to fill 132
SMs; a batch of 64 gives 512 groups, cut so the last wave is not mostly empty. How many
blocks an SM holds comes from the block's shared memory: the tensor-core block's here, the
CUDA-core (f32) block's from its geometry (`decode_simt.py`).
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
"""The merge kernel's cost, in a block's key tiles: its launch and the partial states it reads."""


def warps_for(rows: int) -> int:
    """Warps of a decode block: one per 16 query rows of the group (one m16 tile each)."""
    return -(-rows // MMA_M)


def shared_bytes(rows: int, head_qk: int, head_v: int) -> int:
    """Shared memory of a tensor-core decode block: its Q rows and the two-slot K and V rings."""
    q = warps_for(rows) * MMA_M * (head_qk + PAD)
    return 2 * (q + SLOTS * BN * (head_qk + PAD + head_v + PAD))


def blocks_per_sm(block_shared: int) -> int:
    """Decode blocks one SM holds at once, each using `block_shared` bytes of shared memory."""
    return max(1, min(MAX_BLOCKS_PER_SM, SHARED_PER_SM // (block_shared + 1024)))


def auto_splits(groups: int, keys: int, block_shared: int, target: Target) -> int:
    """Returns the split count whose grid of blocks using `block_shared` bytes of shared memory
    each takes least time in waves (ties: fewer splits)."""
    slots = target.sms * blocks_per_sm(block_shared)
    best, best_cost = 1, float("inf")
    for asked in range(1, min(MAX_SPLITS, -(-keys // BN)) + 1):
        chunk, splits = key_chunk(keys, asked)
        if splits != asked:
            continue
        waves = -(-groups * splits // slots)
        cost = waves * (chunk / BN + BLOCK_COST_TILES) + (MERGE_COST_TILES if splits > 1 else 0)
        if cost < best_cost:
            best, best_cost = splits, cost
    return best
