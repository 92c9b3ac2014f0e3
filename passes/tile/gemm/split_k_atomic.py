"""Atomic split-K (`splitk_mode=atomic`): the partial sums of each K chunk are added into the
output with `red.global.add`, after a zeroing kernel cleared it.

This is only the sum when the contraction stores its sum unchanged: a plain f32 sum of
products with init 0 whose epilogue is one store of the sum at the point (b?, m, n)
(`atomic_refusal`); `split_k.py` falls back to two passes under `auto`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, MemRefType, f32, i64
from xdsl.ir import BlockArgument, SSAValue

from tinyopt.dialects import loop
from tinyopt.passes.tile.gemm.contraction_match import Contraction
from tinyopt.passes.tile.emit import Emitter, Mapping

if TYPE_CHECKING:
    from tinyopt.passes.tile.gemm.split_k import PartialStore

ATOMIC_ADDF = 0
"""`memref.atomic_rmw` kind `addf` (MLIR's `arith::AtomicRMWKind` numbering)."""


def atomic_refusal(c: Contraction) -> str | None:
    """Returns why partial sums of `c` cannot be added atomically into its output, or None."""
    combine = [type(op) for op in c.reduce.combine.block.ops]
    init = c.reduce.init[0].owner
    if combine != [arith.AddfOp, loop.YieldOp]:
        return "its reduction does not combine by addition"
    if not (isinstance(init, arith.ConstantOp) and init.value == FloatAttr(0.0, f32)):
        return "its reduction does not start from 0"
    if len(c.epilogue) != 1 or not isinstance(store := c.epilogue[0], memref.StoreOp):
        ops = ", ".join(op.name for op in c.epilogue if not isinstance(op, memref.StoreOp))
        return f"its epilogue computes ({ops})"
    if store.value != c.reduce.res[0] or store.value.type != f32:
        return "it does not store the f32 sum itself"
    if list(store.indices) != list(c.nest.body.block.args):
        return "it does not store each sum at its own point (b?, m, n)"
    return None


def _output(c: Contraction) -> tuple[memref.StoreOp, int]:
    store = c.epilogue[0]
    assert isinstance(store, memref.StoreOp) and isinstance(store.memref, BlockArgument)
    return store, store.memref.index


def zero_kernel(kernel: loop.KernelOp, c: Contraction) -> tuple[loop.KernelOp, int]:
    """Returns a kernel `parallel(b?, m, n) { out[b?, m, n] = 0 }` of the contraction's output
    buffer (its only argument), and the position of that buffer among `kernel`'s arguments."""
    store, position = _output(c)
    output_type = store.memref.type
    assert isinstance(output_type, MemRefType)
    new = loop.KernelOp(f"{kernel.sym_name.data}_zero", [output_type])
    em = Emitter(new.body.block)
    nest = loop.ParallelOp(c.nest.extents)
    em.op(nest)
    with em.into(nest.body.block):
        zero = em.f32(0.0)
        em.op(memref.StoreOp.get(zero, new.body.block.args[0], list(nest.body.block.args)))
    return new, position


def atomic_store(c: Contraction, splits: int) -> PartialStore:
    """Returns the partial-kernel store (`split_k.PartialStore`) that adds each partial sum
    into the output at (b, m, n), b = (b·S + s) / S."""
    _, position = _output(c)
    batched = len(c.nest.extents) == 3

    def add_into_output(
        em: Emitter, mapping: Mapping, new: loop.KernelOp, value: SSAValue, point: list[SSAValue]
    ) -> None:
        bs, i, j = point
        indices = [em.div(bs, splits), i, j] if batched else [i, j]
        em.op(
            memref.AtomicRMWOp.create(
                operands=[value, new.body.block.args[position], *indices],
                result_types=[f32],
                properties={"kind": IntegerAttr(ATOMIC_ADDF, i64)},
            )
        )

    return add_into_output
