"""XOR swizzle of a shared-memory operand tile (`swizzle=1`), the alternative to `pad`.

A tile `[rows][C]` (C a power of two, no padding) is stored flat, as `[rows·C]`, in 16-byte
chunks: chunk q of a 128-byte line is stored at chunk q XOR (G mod 8), G the index of the
line's group of 4 rows (or of the line itself when 4 rows are shorter than one). Elements keep
their place inside a chunk, so 16-, 8- and 4-byte accesses stay aligned.

Why: the fragment reads of a K-major tile (`[outer][BK]`) take one 16-byte vector per row from
rows 4 apart; with BK = 8 those start 128 bytes apart, in the same banks, a 4-way conflict
that no padding removes. Swizzled, the 8 rows are in 8 groups, so their chunks land on 8
different chunk positions: one wavefront, for any BK.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith
from xdsl.ir import SSAValue

from tinyopt.passes.tile.emit import Emitter

CHUNK = 4
"""f32 elements in a 16-byte chunk."""

LINE_CHUNKS = 8
"""16-byte chunks in a 128-byte line (32 four-byte banks)."""

GROUP_ROWS = 4
"""Rows that share a swizzle key: a thread's rows in each half of the split register tile."""


def swizzled_shape(shape: Sequence[int]) -> list[int]:
    """Returns the shape of a ring `[stages][rows][C]` stored swizzled: `[stages][rows·C]`."""
    *outer, rows, row_length = shape
    return [*outer, rows * row_length]


def swizzled(em: Emitter, indices: Sequence[SSAValue], row_length: int) -> list[SSAValue]:
    """Returns where element `[..., row, column]` of a tile whose rows are `row_length`
    elements (a power of two, at least one chunk) is in the swizzled layout: `[..., flat]`."""
    *outer, row, column = indices
    # The key depends on the row alone, so a row's accesses share it.
    rows_per_key = max(GROUP_ROWS, CHUNK * LINE_CHUNKS // row_length)
    key = em.mul(em.rem(em.div(row, rows_per_key), LINE_CHUNKS), CHUNK)
    flat = em.add(em.mul(row, row_length), column)
    return [*outer, em.value(arith.XOrIOp(flat, key))]
