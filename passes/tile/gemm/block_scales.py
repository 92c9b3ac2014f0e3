"""FP8 block scales on a contraction's operand sides: `cast(x[row, k]) · s[row or row/128, k/128]`.

DeepSeek-V3-style FP8 GEMMs (torch's `_scaled_mm` with `BlockWise1x128` / `BlockWise128x128`
scales) dequantize each operand by one f32 scale per 128 elements of K, and per row (1×128) or
per 128 rows (128×128). `fuse` keeps such a scale inside the contraction
(`fuse_kernel._block_scale_point`); the wgmma rule then sums each 128-element K step's products
on the tensor cores and multiplies the step's sum by the two scales before adding it to the
f32 accumulators (`wgmma.py`, `_promoted_k_loop`), which is exact in the scales' blocks.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IntegerAttr, f32
from xdsl.ir import Operation, SSAValue

from tinyopt.dialects.graph import FP8_SCALE_BLOCK
from tinyopt.passes.tile.gemm.contraction_match import Contraction, needed_ops


@dataclass(frozen=True)
class BlockScale:
    """An operand side's f32 block scales: the buffer `load` reads, one index of each kind in
    `kinds`: "k" (K / 128), "row" (the side's row or column: 1×128), "block" (that / 128:
    128×128) or "zero" (0: what `fuse` leaves of a division where the extent is at most 128).
    Unit dims may have been dropped (`collapse_dims`): a scale constant along K, or over all
    rows, has no index for it."""

    load: memref.LoadOp
    kinds: tuple[str, ...]


def split_block_scale(
    side: list[Operation], value: SSAValue, outer: SSAValue, k: SSAValue
) -> tuple[list[Operation], SSAValue, BlockScale] | None:
    """Returns (the side's ops without the scale, the unscaled operand value, the scale) when
    the side computes `operand · scale` with an f32 block scale indexed by `outer` (m or n) and
    `k` (`BlockScale`), else None."""
    product = value.owner
    if not isinstance(product, arith.MulfOp) or product not in side:
        return None
    for main, scale in ((product.lhs, product.rhs), (product.rhs, product.lhs)):
        load = scale.owner
        if not isinstance(load, memref.LoadOp) or load not in side:
            continue
        if load.memref.type.element_type != f32:  # type: ignore[attr-defined]
            continue
        kinds = tuple(_index_kind(i, outer, k) for i in load.indices)
        rows = sum(kind in ("row", "block") for kind in kinds)
        if None in kinds or kinds.count("k") > 1 or rows > 1:
            continue
        return needed_ops(side, main), main, BlockScale(load, kinds)  # type: ignore[arg-type]
    return None


def block_scale_loads(c: Contraction) -> set[Operation]:
    """The block-scale loads of a contraction's two operand sides (`split_block_scale`)."""
    k = c.reduce.body.block.args[0]
    sides = ((c.a_side, c.a_value, c.m_iv), (c.b_side, c.b_value, c.n_iv))
    splits = [split_block_scale(side, value, outer, k) for side, value, outer in sides]
    return {split[2].load for split in splits if split}


def _index_kind(index: SSAValue, outer: SSAValue, k: SSAValue) -> str | None:
    """ "row" for `outer`, "block" for `outer / 128`, "k" for `k / 128`, "zero" for 0 (what
    `fuse` leaves of either division where the extent is at most 128), else None."""
    if index is outer:
        return "row"
    if _is_constant(index, 0):
        return "zero"
    div = index.owner
    if not isinstance(div, arith.DivUIOp) or not _is_constant(div.rhs, FP8_SCALE_BLOCK):
        return None
    return {outer: "block", k: "k"}.get(div.lhs)


def _is_constant(value: SSAValue, number: int) -> bool:
    const = value.owner
    return (
        isinstance(const, arith.ConstantOp)
        and isinstance(const.value, IntegerAttr)
        and const.value.value.data == number
    )
