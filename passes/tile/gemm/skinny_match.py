"""The matcher of the skinny-GEMM rule: a contraction `parallel(b?, m?, n) { reduce(k) { A·B };
epilogue }` with few output rows M, including the forms `collapse_dims` leaves when M = 1 (no m
loop: `parallel(n)` or `parallel(b, n)`), which the other GEMM rules do not match."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import FloatAttr, f32
from xdsl.ir import Operation, SSAValue

from tinyopt.dialects import loop
from tinyopt.passes.tile.emit import depends_on
from tinyopt.passes.tile.gemm.contraction_match import needed_ops
from tinyopt.passes.tile.gemm.split_k import SEQUENTIAL

MAX_ROWS = 64
"""The most output rows M (per batch entry) the rule takes."""


@dataclass
class SkinnyContraction:
    """A contraction whose B operand (the weights) is read once per output column: its loops,
    operand sides, epilogue, and the batch and row loop variables where the nest has them."""

    nest: loop.ParallelOp
    reduce: loop.ReduceOp
    a_side: list[Operation]
    a_value: SSAValue
    b_side: list[Operation]
    b_value: SSAValue
    product: Operation
    prologue: list[Operation]
    epilogue: list[Operation]
    batch_iv: SSAValue | None
    m_iv: SSAValue | None
    n_iv: SSAValue
    k_contiguous: bool
    """Whether B's loads run along K in memory (a torch linear's `[N, K]` weight); else along N
    (`x @ w` with w `[K, N]`)."""

    @property
    def k_iv(self) -> SSAValue:
        return self.reduce.body.block.args[0]

    @property
    def extents(self) -> tuple[int, int, int, int]:
        """(batch, M, N, K), 1 for a loop the nest does not have."""
        sizes = dict(zip(self.nest.body.block.args, self.nest.extents, strict=True))
        batch = sizes[self.batch_iv] if self.batch_iv is not None else 1
        m = sizes[self.m_iv] if self.m_iv is not None else 1
        return batch, m, sizes[self.n_iv], self.reduce.extents[0]

    @property
    def weight_type(self) -> str:
        """The element type B's loads read (the bytes the kernel streams)."""
        types = {
            str(o.memref.type.element_type)  # type: ignore[attr-defined]
            for op in self.b_side
            for o in op.walk()
            if isinstance(o, memref.LoadOp)
        }
        return types.pop() if len(types) == 1 else "f32"


def match_skinny(kernel: loop.KernelOp) -> SkinnyContraction | str:
    """Returns the skinny contraction of `kernel`, or why it is not one."""
    ops = list(kernel.body.block.ops)
    if len(ops) != 1 or not isinstance(nest := ops[0], loop.ParallelOp):
        return "not one parallel loop nest"
    if SEQUENTIAL in kernel.attributes:
        return "a split-K fold (one thread per point)"
    body = list(nest.body.block.ops)
    reduces = [o for o in body if isinstance(o, loop.ReduceOp)]
    if len(reduces) != 1 or "tinyopt.contraction" not in reduces[0].attributes:
        return "not one contraction (a sum of products over K)"
    if any(isinstance(o, loop.ParallelOp) for o in body):
        return "a nested parallel loop"
    reduce = reduces[0]
    if len(reduce.extents) != 1 or len(reduce.res) != 1 or not _sums_from_zero(reduce):
        return "its K loop is not one f32 sum from 0"
    ivs = list(nest.body.block.args)
    prologue = body[: body.index(reduce)]
    if depends_on(prologue, ivs) & {r for o in prologue for r in o.results}:
        return "it computes per point before its K loop"
    sides = _sides(reduce, ivs[-1])
    if isinstance(sides, str):
        return sides
    a_side, a_value, b_side, b_value, product = sides
    roles = [
        "b"
        if b_value in depends_on(b_side, [iv])
        else "m"
        if a_value in depends_on(a_side, [iv])
        else "?"
        for iv in ivs[:-1]
    ]
    if roles not in ([], ["m"], ["b"], ["b", "m"]):
        return f"its loops are not (batch?, rows?, columns) (roles {roles})"
    batch_iv = ivs[0] if roles[:1] == ["b"] else None
    m_iv = ivs[-2] if roles[-1:] == ["m"] else None
    k_iv = reduce.body.block.args[0]
    weight_loads = [
        o for op in b_side for o in op.walk() if isinstance(o, memref.LoadOp) and o.indices
    ]
    along_k = depends_on(b_side, [k_iv])
    k_loads = [o for o in weight_loads if any(i in along_k for i in o.indices)]
    along_n = bool(k_loads) and all(o.indices[-1] == ivs[-1] for o in k_loads)
    c = SkinnyContraction(
        nest,
        reduce,
        a_side,
        a_value,
        b_side,
        b_value,
        product,
        prologue,
        body[body.index(reduce) + 1 :],
        batch_iv,
        m_iv,
        ivs[-1],
        not along_n,
    )
    if c.extents[1] > MAX_ROWS:
        return f"M = {c.extents[1]} rows, more than the {MAX_ROWS} of a skinny GEMM"
    return c


def _sums_from_zero(reduce: loop.ReduceOp) -> bool:
    """Whether the K loop adds f32 values starting from 0.0 (so per-thread partial sums may
    each start from it)."""
    combine = [type(op) for op in reduce.combine.block.ops]
    init = reduce.init[0].owner
    return (
        combine == [arith.AddfOp, loop.YieldOp]
        and isinstance(init, arith.ConstantOp)
        and init.value == FloatAttr(0.0, f32)
    )


def _sides(
    reduce: loop.ReduceOp, n_iv: SSAValue
) -> tuple[list[Operation], SSAValue, list[Operation], SSAValue, Operation] | str:
    """(A side, A value, B side, B value, product) of `yield a * b`, B the side that varies
    with the output column `n_iv` and A the one that does not."""
    inner = list(reduce.body.block.ops)
    if len(inner) < 2 or not isinstance(product := inner[-2], arith.MulfOp):
        return "its K loop does not yield a product"
    last = inner[-1]
    if not isinstance(last, loop.YieldOp) or list(last.arguments) != [product.result]:
        return "its K loop does not yield a product"
    body = inner[:-2]
    varying = depends_on(body, [n_iv])
    lhs, rhs = product.lhs, product.rhs
    if lhs in varying:
        lhs, rhs = rhs, lhs
    if lhs in varying or rhs not in varying:
        return "not one operand varying with the output column and one not"
    return needed_ops(body, lhs), lhs, needed_ops(body, rhs), rhs, product
