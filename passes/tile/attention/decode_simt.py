"""The CUDA-core (SIMT) tile of decode attention's partial kernel: the `attn=simt` block
schedule (simt_emit.py) with a row tile sized to one group's R query rows.

Taken where q, k and v are f32, or f16/bf16 at head dims the tensor cores refuse (not
multiples of 16). One block owns one (group, chunk of keys): its R rows (bm of them, R rounded
up to a power of two; rows past R are zero and not stored) read each K and V tile once, by
16-byte `cp.async` where k and v are plain f32 loads. The thread layout spends the lanes on the
keys and the head dim, not on empty rows:

    TY = min(bm, 16) rows of lanes, tm = bm / TY query rows per thread,
    TX = 16 lanes per row: bn = 4·TX = 64 keys per tile (the chunk granularity, so only the
         last chunk has a partial tile), O's columns spread over the same 16 lanes,

so a block has 16·TY threads (32 at R = 2, 64 at GQA 4 × one query, 256 from 16 rows, 4 rows
per thread at 64 rows). One row (R = 1) runs a whole warp on it: 32 lanes, 128-key tiles; where
those do not fit shared memory (D = 256), four rows of 16 lanes, three of them empty (64
threads: with 32, each would issue 128 copies per tile and ptxas spills at D = 256).
"""

from __future__ import annotations

from tinyopt.passes.tile.attention.simt_plan import (
    KEYS_PER_THREAD,
    WARP,
    Geometry,
    SimtAttentionPlan,
    refusal,
)
from tinyopt.passes.tile.target import Target

ROW_LANES = 16
"""Lanes across one query row's keys (TX): 64-key tiles."""
LANE_ROWS = 16
"""Most rows of lanes (TY); past 16 rows a thread holds several."""


def _row_tile(rows: int) -> int:
    """bm: the group's rows rounded up to a power of two."""
    return 1 << (rows - 1).bit_length()


def _candidates(rows: int) -> list[SimtAttentionPlan]:
    """Plans in order of preference for a group of `rows` query rows."""
    bm = _row_tile(rows)
    if bm == 1:
        one_row = SimtAttentionPlan(1, KEYS_PER_THREAD * WARP, WARP)
        four_rows = SimtAttentionPlan(4, KEYS_PER_THREAD * ROW_LANES, 4 * ROW_LANES)
        return [one_row, four_rows]
    lane_rows = min(bm, LANE_ROWS)
    return [SimtAttentionPlan(bm, KEYS_PER_THREAD * ROW_LANES, lane_rows * ROW_LANES)]


def decode_simt_geometry(rows: int, head_qk: int, head_v: int, target: Target) -> Geometry | str:
    """Returns the SIMT geometry of a decode block of `rows` query rows, or why none fits."""
    reasons = []
    for plan in _candidates(rows):
        geometry = Geometry(plan, head_qk, head_v)
        reason = refusal(geometry, target)
        if reason is None:
            return geometry
        reasons.append(reason)
    return (
        f"f32 decode: no CUDA-core tile of {rows} rows fits ({reasons[-1]}); "
        "the simt rule takes the unsplit kernel"
    )
