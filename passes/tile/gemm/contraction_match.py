"""The contraction matcher every GEMM rule starts from: loops, operand sides, epilogue."""

from __future__ import annotations


from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, memref
from xdsl.ir import Operation, SSAValue

from tinyopt.dialects import loop
from tinyopt.passes.tile.emit import depends_on


@dataclass
class Contraction:
    """The parts of a contraction kernel: loops, the two operand sides, and the epilogue."""

    nest: loop.ParallelOp
    reduce: loop.ReduceOp
    a_side: list[Operation]
    a_value: SSAValue
    b_side: list[Operation]
    b_value: SSAValue
    product: Operation
    m_iv: SSAValue
    n_iv: SSAValue
    prologue: list[Operation]
    epilogue: list[Operation]

    @property
    def extents(self) -> tuple[int, int, int, int]:
        *batch, m, n = self.nest.extents
        return (batch[0] if batch else 1, m, n, self.reduce.extents[0])


def needed_ops(ops: Sequence[Operation], value: SSAValue) -> list[Operation]:
    """Returns the ops among `ops` that `value` needs, in order."""
    needed = {value}
    picked: list[Operation] = []
    for op in reversed(ops):
        if any(r in needed for r in op.results):
            picked.append(op)
            needed.update(op.operands)
    return picked[::-1]


def match_contraction(op: loop.KernelOp) -> Contraction | None:
    """Recognizes `parallel(b?, m, n) { reduce(k) { A(m,k) * B(k,n) }; epilogue; store }`."""
    found = contraction_reduces(op)
    if found is None or len(found[1]) != 1:
        return None
    return contraction_parts(*found)


def contraction_reduces(op: loop.KernelOp) -> tuple[loop.ParallelOp, list[loop.ReduceOp]] | None:
    """Returns the (b?, m, n) nest of a kernel and its K loops (`tinyopt.contraction` reduces),
    or None when the kernel is not one parallel nest whose only inner loops are those."""
    ops = list(op.body.block.ops)
    if len(ops) != 1 or not isinstance(nest := ops[0], loop.ParallelOp):
        return None
    if len(nest.extents) not in (2, 3):
        return None
    body_ops = list(nest.body.block.ops)
    reduces = [o for o in body_ops if isinstance(o, loop.ReduceOp)]
    if not reduces or any("tinyopt.contraction" not in r.attributes for r in reduces):
        return None
    if any(isinstance(o, loop.ParallelOp) for o in body_ops):
        return None
    return nest, reduces


def contraction_parts(nest: loop.ParallelOp, reduces: list[loop.ReduceOp]) -> Contraction | None:
    """Splits a contraction nest at its first K loop: prologue (what comes before it, none of
    it per point), the operand sides, and the epilogue after the last K loop."""
    parts = [operand_sides(nest, r) for r in reduces]
    if None in parts:
        return None
    body_ops = list(nest.body.block.ops)
    last = body_ops.index(reduces[-1])
    prologue = [o for o in body_ops[:last] if not isinstance(o, loop.ReduceOp)]
    computed = {r for o in prologue for r in o.results}
    per_point = [*nest.body.block.args, *(r for o in reduces for r in o.res)]
    if depends_on(body_ops[:last], per_point) & computed:
        return None
    *_, m_iv, n_iv = nest.body.block.args
    sides = parts[0]  # (A side, A value, B side, B value, product)
    assert sides is not None
    return Contraction(nest, reduces[0], *sides, m_iv, n_iv, prologue, body_ops[last + 1 :])


def operand_sides(
    nest: loop.ParallelOp, reduce: loop.ReduceOp
) -> tuple[list[Operation], SSAValue, list[Operation], SSAValue, Operation] | None:
    """Returns (A side, A value, B side, B value, product) of a K loop `yield a * b` whose A
    side does not vary with n nor its B side with m, else None."""
    if len(reduce.extents) != 1 or len(reduce.res) != 1:
        return None
    inner = list(reduce.body.block.ops)
    yield_op = inner[-1]
    if len(inner) < 2 or not isinstance(product := inner[-2], arith.MulfOp):
        return None
    if not isinstance(yield_op, loop.YieldOp) or list(yield_op.arguments) != [product.result]:
        return None
    *_, m_iv, n_iv = nest.body.block.args
    lhs, rhs = product.lhs, product.rhs
    if lhs in depends_on(inner, [n_iv]):
        lhs, rhs = rhs, lhs
    body = inner[:-2]
    if lhs in depends_on(body, [n_iv]) or rhs in depends_on(body, [m_iv]):
        return None
    return needed_ops(body, lhs), lhs, needed_ops(body, rhs), rhs, product


def operand_types(c: Contraction) -> list[str]:
    """Returns the element types the contraction's operand sides load, sorted."""
    loads = [o for op in (*c.a_side, *c.b_side) for o in op.walk() if isinstance(o, memref.LoadOp)]
    return sorted({str(load.memref.type.element_type) for load in loads})  # type: ignore[attr-defined]
