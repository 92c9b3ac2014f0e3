"""XOR swizzle of a shared-memory operand tile (`swizzle=1`), the alternative to `pad`.

A tile `[rows][C]` (C a power of two, no padding) is stored flat, as `[rows·C]` (so a ring is
`[stages][rows·C]`), in 16-byte chunks: chunk q of a 128-byte line (the 32 banks once) is
stored at chunk q XOR (G mod 8) of the same line, G the index of the line's group of 4 rows
(or of the line itself when 4 rows are shorter than one). Elements keep their place inside a
chunk, so 16-, 8- and 4-byte accesses stay aligned. Flat, an access costs a shift, an and and
a xor on top of the unswizzled address (no division back into rows and columns).

Why: the fragment reads of a K-major tile (`[outer][BK]`, e.g. torch-layout weights `[N, K]`
copied by cp.async) take one 16-byte vector per row, and the rows a quarter-warp reads are 4
apart (a thread's 4 rows per half of the split register tile). With BK = 8 those rows start
128 bytes apart, in the same banks: padding rows to 12 floats still leaves a 4-way conflict
(16 floats: also 4-way). Swizzled, the 8 rows are in 8 different groups of 4 rows, so their
chunks land on 8 different chunk positions: one wavefront, for any BK. Row-major `[BK][outer]`
tiles, read and written along the row, stay conflict-free (a line's chunks are permuted).
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
    # The key depends on the row alone (a group of rows spans whole lines), which lets the
    # compiler share it between a row's accesses.
    rows_per_key = max(GROUP_ROWS, CHUNK * LINE_CHUNKS // row_length)
    key = em.mul(em.rem(em.div(row, rows_per_key), LINE_CHUNKS), CHUNK)
    flat = em.add(em.mul(row, row_length), column)
    return [*outer, em.value(arith.XOrIOp(flat, key))]
