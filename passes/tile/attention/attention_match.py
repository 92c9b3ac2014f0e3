"""The flash-attention kernel matcher both attention rules start from: its loops, q, k, v, the
scale and the causal mask."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import BFloat16Type, FloatAttr, Float16Type
from xdsl.ir import Attribute, Operation, SSAValue

from tinyopt.dialects import loop
from tinyopt.passes.loop_rewrites.flash_attention import (
    FLASH_ATTR,
    MAX_HEAD_DIM,
    backward_slice,
    causal_floor,
)
from tinyopt.passes.tile.gemm.mma_sync import MMA_K
from tinyopt.passes.tile.emit import depends_on


@dataclass
class Attention:
    """The parts of a flash-attention loop kernel the schedule needs."""

    nest: loop.ParallelOp
    reduce: loop.ReduceOp
    qk: loop.ReduceOp
    program: list[Operation]
    """The nest's ops before the reduce, the reduce body's ops and the dot product's body ops,
    in an order where every op follows what it uses (the slices below are taken from it)."""
    q_value: SSAValue
    k_value: SSAValue
    element: Attribute
    causal_mask: tuple[arith.AddfOp, SSAValue] | None
    """The add of a causal mask `j > i ? c : 0` (c ≤ −1e30) to the score and its other
    operand (the unmasked score), if there is one."""

    @property
    def causal(self) -> bool:
        return self.causal_mask is not None

    @property
    def batch(self) -> Sequence[SSAValue]:
        return self.nest.body.block.args[:-2]

    @property
    def i(self) -> SSAValue:
        return self.nest.body.block.args[-2]

    @property
    def d(self) -> SSAValue:
        return self.nest.body.block.args[-1]

    @property
    def j(self) -> SSAValue:
        return self.reduce.body.block.args[0]

    @property
    def e(self) -> SSAValue:
        return self.qk.body.block.args[0]

    @property
    def yielded(self) -> Sequence[SSAValue]:
        end = self.reduce.body.block.last_op
        assert isinstance(end, loop.YieldOp)
        return end.arguments

    def ops_of(self, value: SSAValue, given: Sequence[SSAValue] = ()) -> list[Operation]:
        """The ops of `program` that compute `value`, stopping at `given` values."""
        return backward_slice([value], self.program, given)


def _loaded_types(ops: Sequence[Operation]) -> set[Attribute]:
    return {
        o.memref.type.element_type  # type: ignore[attr-defined]
        for op in ops
        for o in op.walk()
        if isinstance(o, memref.LoadOp)
    }


TENSOR_CORE_ELEMENTS = (Float16Type, BFloat16Type)
"""The element types of q, k and v the tensor-core attention rules take."""


def is_flash_attention(kernel: loop.KernelOp) -> bool:
    """Whether the kernel is one the flash-attention rewrite made (its nest holds the marked
    reduction), whatever its element type, head dims or rows."""
    ops = list(kernel.body.block.ops)
    return (
        len(ops) == 1
        and isinstance(nest := ops[0], loop.ParallelOp)
        and any(FLASH_ATTR in op.attributes for op in nest.body.block.ops)
    )


def match_attention(
    kernel: loop.KernelOp, elements: tuple[type, ...] = TENSOR_CORE_ELEMENTS
) -> Attention | None:
    """Returns the parts of a flash-attention kernel whose q, k and v are read as one element
    type of `elements` (f16/bf16 by default), else None."""
    ops = list(kernel.body.block.ops)
    if len(ops) != 1 or not isinstance(nest := ops[0], loop.ParallelOp):
        return None
    reduces = [op for op in nest.body.block.ops if FLASH_ATTR in op.attributes]
    if len(reduces) != 1 or not isinstance(reduce := reduces[0], loop.ReduceOp):
        return None
    inner = [op for op in reduce.body.block.ops if isinstance(op, loop.ReduceOp)]
    if len(inner) != 1 or len(inner[0].extents) != 1:
        return None
    qk = inner[0]
    product = qk.body.block.last_op.operands[0].owner  # type: ignore[union-attr]
    if not isinstance(product, arith.MulfOp):
        return None
    nest_ops = list(nest.body.block.ops)
    body_ops = [op for op in reduce.body.block.ops if not isinstance(op, loop.YieldOp)]
    split = body_ops.index(qk)
    qk_ops = [op for op in qk.body.block.ops if not isinstance(op, loop.YieldOp)]
    program = [
        *nest_ops[: nest_ops.index(reduce)],
        *body_ops[:split],
        *qk_ops,
        qk,
        *body_ops[split + 1 :],
    ]
    i, d = nest.body.block.args[-2:]
    j, e = reduce.body.block.args[0], qk.body.block.args[0]
    for q_value, k_value in ((product.lhs, product.rhs), (product.rhs, product.lhs)):
        q_ops = backward_slice([q_value], program)
        k_ops = backward_slice([k_value], program)
        if not depends_on(q_ops, [j, d]).isdisjoint({q_value}):
            continue
        if not depends_on(k_ops, [i, d]).isdisjoint({k_value}):
            continue
        break
    else:
        return None
    end = reduce.body.block.last_op
    assert isinstance(end, loop.YieldOp)
    score, _, value = end.arguments
    score_ops = backward_slice([score], program, [qk.res[0]])
    value_ops = backward_slice([value], program)
    if score in depends_on(score_ops, [d]) or value in depends_on(value_ops, [i, e]):
        return None
    if any(
        isinstance(o, loop.ReduceOp | loop.ParallelOp | memref.StoreOp)
        for op in score_ops
        for o in op.walk()
    ):
        return None
    types = _loaded_types([*q_ops, *k_ops, *value_ops])
    if len(types) != 1 or not isinstance(element := types.pop(), elements):
        return None
    causal = _causal(score_ops, i, j, causal_floor(element))
    return Attention(nest, reduce, qk, program, q_value, k_value, element, causal)


def _causal(
    score_ops: Sequence[Operation], i: SSAValue, j: SSAValue, floor: float
) -> tuple[arith.AddfOp, SSAValue] | None:
    """Returns the op adding `j > i ? c : 0` with c ≤ floor (a causal mask, see
    `causal_floor`) to the score, and the add's other operand."""
    for op in score_ops:
        if not isinstance(op, arith.SelectOp) or not isinstance(op.cond.owner, arith.CmpiOp):
            continue
        compare = op.cond.owner
        masked, kept = op.lhs.owner, op.rhs.owner
        if not isinstance(masked, arith.ConstantOp) or not isinstance(kept, arith.ConstantOp):
            continue
        above = (compare.predicate.value.data, compare.lhs, compare.rhs) in (
            (8, j, i),  # ugt
            (6, i, j),  # ult
        )
        values = (masked.value, kept.value)
        if above and all(isinstance(v, FloatAttr) for v in values):
            if values[0].value.data <= floor and values[1].value.data == 0.0:  # type: ignore[union-attr]
                adds = [u.operation for u in op.result.uses]
                if len(adds) == 1 and isinstance(add := adds[0], arith.AddfOp):
                    return add, add.rhs if add.lhs is op.result else add.lhs
    return None


def match_flash_attention(kernel: loop.KernelOp) -> Attention | str:
    """The flash-attention kernel's parts where its head dims suit the tensor cores."""
    if (a := match_attention(kernel)) is None:
        return "not a flash-attention kernel (the flash-attention rewrite's form)"
    if not all(h % MMA_K == 0 and h <= MAX_HEAD_DIM for h in (a.qk.extents[0], a.nest.extents[-1])):
        return f"head dims must be multiples of {MMA_K} up to {MAX_HEAD_DIM}"
    return a
