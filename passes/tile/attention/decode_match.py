"""The decode-attention matcher: a flash-attention kernel whose query rows come in small groups
that read the same keys and values (one query per head at decode, or a few; the query heads
of one KV head under GQA).

The kernel `parallel [rows..., d] { (m, l, acc) = reduce [j] {...}; epilogue }` is seen as
P query rows (every nest index but the last, row-major) of one output column d each. Rows
p and p' share their keys and values when every load of k and v reads the same element for
both, for every key j and column; the matcher proves it by evaluating the loads' index
arithmetic over every row and a sample of keys and columns (`group_rows`), so GQA, heads
side by side in a row and batch-broadcast keys need no case of their own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import prod

import numpy as np
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IndexType, IntegerType
from xdsl.ir import Attribute, Operation, SSAValue

from tinyopt.dialects import loop
from tinyopt.passes.graph_to_loop.index_eval import on_grid
from tinyopt.passes.loop_rewrites.flash_attention import FLASH_ATTR, backward_slice
from tinyopt.passes.tile.attention.attention_match import MAX_HEAD_DIM, TENSOR_CORE_ELEMENTS
from tinyopt.passes.tile.attention.simt import ELEMENTS
from tinyopt.passes.tile.emit import depends_on
from tinyopt.passes.tile.gemm.mma_sync import MMA_K

MAX_GROUP_ROWS = 64
"""Most query rows sharing one K/V head that the decode schedule takes: past them the 64- and
128-row tiles of the other attention rules are full."""
ROWS_AT_ONCE = 8192
"""Rows whose index arithmetic is evaluated in one numpy pass (bounds the memory)."""


@dataclass
class DecodeAttention:
    """The parts of a flash-attention kernel the decode rewrite regroups."""

    nest: loop.ParallelOp
    reduce: loop.ReduceOp
    qk: loop.ReduceOp
    program: list[Operation]
    """The nest's ops before the reduce, the reduce body's ops and the dot product's body ops,
    each after what it uses."""
    q_value: SSAValue
    k_value: SSAValue
    v_value: SSAValue
    element: Attribute
    group: int
    """Consecutive query rows (row-major over the nest's row indices) that read the same keys
    and values: all H/KV heads of a KV head times the queries of each."""

    @property
    def row_ivs(self) -> Sequence[SSAValue]:
        return self.nest.body.block.args[:-1]

    @property
    def rows(self) -> int:
        return prod(self.nest.extents[:-1])

    @property
    def keys(self) -> int:
        """The number of keys each row attends over (the one place it is read from the IR)."""
        return self.reduce.extents[0]

    @property
    def head_qk(self) -> int:
        return self.qk.extents[0]

    @property
    def head_v(self) -> int:
        return self.nest.extents[-1]

    @property
    def on_tensor_cores(self) -> bool:
        """Whether the partial kernel runs on tensor cores (f16/bf16, head dims multiples of
        16); else on CUDA cores (`decode_simt.py`)."""
        heads = (self.head_qk, self.head_v)
        return isinstance(self.element, TENSOR_CORE_ELEMENTS) and all(h % MMA_K == 0 for h in heads)

    @property
    def kv_ops(self) -> list[Operation]:
        """The ops computing k and v (their loads and index arithmetic)."""
        return backward_slice([self.k_value, self.v_value], self.program)


def match_decode_attention(kernel: loop.KernelOp) -> DecodeAttention | str:
    """Returns the kernel's parts and row groups, or why it is not decode attention."""
    ops = list(kernel.body.block.ops)
    if len(ops) != 1 or not isinstance(nest := ops[0], loop.ParallelOp):
        return "not a flash-attention kernel (the flash-attention rewrite's form)"
    reduces = [op for op in nest.body.block.ops if FLASH_ATTR in op.attributes]
    if len(reduces) != 1 or not isinstance(reduce := reduces[0], loop.ReduceOp):
        return "not a flash-attention kernel (the flash-attention rewrite's form)"
    inner = [op for op in reduce.body.block.ops if isinstance(op, loop.ReduceOp)]
    if len(inner) != 1 or len(inner[0].extents) != 1 or len(nest.extents) < 2:
        return "not a flash-attention kernel (one dot product over the head dim)"
    qk = inner[0]
    product = qk.body.block.last_op.operands[0].owner  # type: ignore[union-attr]
    if not isinstance(product, arith.MulfOp):
        return "not a flash-attention kernel (the dot product is not a sum of products)"
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
    d, j, e = nest.body.block.args[-1], reduce.body.block.args[0], qk.body.block.args[0]
    end = reduce.body.block.last_op
    assert isinstance(end, loop.YieldOp)
    score, _, v_value = end.arguments
    for q_value, k_value in ((product.lhs, product.rhs), (product.rhs, product.lhs)):
        q_ops, k_ops = backward_slice([q_value], program), backward_slice([k_value], program)
        if q_value not in depends_on(q_ops, [j, d]) and k_value not in depends_on(k_ops, [d]):
            break
    else:
        return "q must not depend on the key or output column, k not on the output column"
    v_ops = backward_slice([v_value], program)
    score_ops = backward_slice([score], program, [qk.res[0]])
    if score in depends_on(score_ops, [d]) or v_value in depends_on(v_ops, [e]):
        return "the score must not depend on the output column, v not on the head dim"
    types = {
        o.memref.type.element_type  # type: ignore[attr-defined]
        for op in (*q_ops, *k_ops, *v_ops)
        for o in op.walk()
        if isinstance(o, memref.LoadOp)
    }
    if len(types) != 1 or not isinstance(element := types.pop(), ELEMENTS):
        return "q, k and v must be read as one of f32, f16 and bf16"
    heads = (qk.extents[0], nest.extents[-1])
    if not all(h <= MAX_HEAD_DIM for h in heads):
        return f"head dims must be at most {MAX_HEAD_DIM}, got {heads}"
    a = DecodeAttention(nest, reduce, qk, program, q_value, k_value, v_value, element, 1)
    a.group = group_rows(a)
    if a.group > MAX_GROUP_ROWS:
        return (
            f"{a.group} query rows share each key and value (more than {MAX_GROUP_ROWS}: the "
            "tensor-core attention rules' tiles of 64 and 128 rows are full)"
        )
    return a


def group_rows(a: DecodeAttention) -> int:
    """Returns how many consecutive query rows read the same k and v elements: the length of
    the first run of rows whose loads' indices equal row 0's, when every aligned run of that
    length is alike (a run longer than MAX_GROUP_ROWS is returned unchecked, for the refusal);
    1 where that does not hold or the index arithmetic cannot be evaluated (each row then
    reads its own copy, which is always right)."""
    first = _signatures(a, 0, min(a.rows, ROWS_AT_ONCE))
    if first is None:
        return 1
    same = np.all(first == first[0], axis=1)
    run = len(same) if same.all() else int(np.argmin(same))
    if run > MAX_GROUP_ROWS:
        return run
    if a.rows % run:
        return 1
    step = run * (ROWS_AT_ONCE // run)
    for start in range(0, a.rows, step):
        rows = _signatures(a, start, min(a.rows, start + step))
        if rows is None:
            return 1
        grouped = rows.reshape(-1, run, rows.shape[1])
        if not np.all(grouped == grouped[:, :1]):
            return 1
    return run


def _signatures(a: DecodeAttention, start: int, stop: int) -> np.ndarray | None:
    """For rows start..stop-1: every integer operand of the k and v loads (and of any other
    op reading index values in their computation) at sampled keys and columns, one row each;
    None where one cannot be evaluated."""
    keys = sorted({0, 1, a.keys // 2, a.keys - 1})
    columns = sorted({0, 1, 7, min(a.head_qk, a.head_v) - 1})
    rows = np.arange(start, stop)
    env: dict[SSAValue, np.ndarray] = {}
    extents = a.nest.extents[:-1]
    for iv, extent, inner in zip(a.row_ivs, extents, _strides(extents), strict=True):
        env[iv] = ((rows // inner) % extent)[:, None, None]
    env[a.reduce.body.block.args[0]] = np.array(keys)[None, :, None]
    for column in (a.nest.body.block.args[-1], a.qk.body.block.args[0]):
        env[column] = np.array(columns)[None, None, :]
    shape = (len(rows), len(keys), len(columns))
    signature = []
    for op in a.kv_ops:
        if op.results and on_grid(op.results[0], env) is not None:
            continue
        for operand in op.operands:
            value = on_grid(operand, env)
            if value is not None:
                signature.append(np.broadcast_to(value, shape).reshape(len(rows), -1))
            elif isinstance(operand.type, IndexType | IntegerType):
                return None
    if not signature:
        return np.zeros((len(rows), 1), np.int64)
    return np.concatenate(signature, axis=1)


def _strides(extents: Sequence[int]) -> list[int]:
    """Row-major strides of an index space, in elements."""
    return [prod(extents[k + 1 :]) for k in range(len(extents))]
