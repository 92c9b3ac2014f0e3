"""The cost estimate by which `fuse` lets a kernel recompute a value or gives the value a buffer.

Compute-inline fusion evaluates an inlined value once per point a kernel reads it at. A row
kernel reads a value at several points when its reductions and its output pass each read it:
softmax's `exp(x - max)` is computed by the sum's loop and again by the output's, which is
cheaper than storing it. But a value that holds an earlier row kernel's reductions is
recomputed, with everything below it, by each reduction of every later one: 80 chained
softmaxes inlined into one kernel evaluate 6480 exps per element. The estimate compares, per
element of the kernel's loops:

- recomputing: the FP32 operations of the evaluations beyond the first (the scalar ops each
  evaluation runs per element, not those computed once per row, counted once where two
  evaluations share them);
- a buffer: the bytes of writing the value once and reading it once, times `OPS_PER_BYTE`.

A value whose recomputation costs more than its round trip gets a buffer. Only elementwise
values are candidates: an index map (reshape, transpose, slice, ...) costs nothing of its own,
and reductions and matmuls are never inlined twice (`fuse_kernel` refuses).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, llvm, memref
from xdsl.dialects.builtin import IndexType, TensorType
from xdsl.ir import Block, Operation, SSAValue

from tinyopt.dialects import loop
from tinyopt.passes.graph_to_loop.fuse_kernel import CONTRACTION_ATTR, KernelBuilder
from tinyopt.passes.graph_to_loop.fuse_scalar import ELEMENTWISE_OPS

OPS_PER_BYTE = 7
"""FP32 operations the GPU issues in the time it moves one byte of DRAM: on the H200, 132 SMs ×
128 FP32 lanes × 1.98 GHz ≈ 33.5 T operations/s over 4.8 TB/s."""

SPECIAL_FUNCTION_OPS = 8
"""What a `math` function (exp, log, rsqrt, erf, ...) or a division costs in FP32 operations:
each SM has 16 special-function lanes against 128 FP32 lanes. An fmod (`llvm.frem`, CUDA's
`fmodf`: a loop of f32 steps) is counted as one too."""


@dataclass(frozen=True)
class Recompute:
    """A value a kernel evaluates more than once per element, and what that costs."""

    value: SSAValue
    evaluations: int
    """Points per element the kernel computes the value at."""
    extra_ops: int
    """FP32 operations per element spent on the evaluations beyond the first."""
    round_trip_bytes: int
    """Bytes per element of writing the value to a buffer and reading it back."""

    @property
    def budget(self) -> int:
        """The operations the round trip costs: recomputing more than this gets a buffer."""
        return OPS_PER_BYTE * self.round_trip_bytes

    @property
    def materialize(self) -> bool:
        """Whether a buffer is cheaper than recomputing."""
        return self.extra_ops > self.budget


def recomputations(builder: KernelBuilder) -> list[Recompute]:
    """Return the elementwise values a built kernel computes at more than one point per element,
    with their costs, in the order the kernel first computed them."""
    row_block = _row_block(builder.kernel)
    found = []
    for value, scalars in builder.inlined_scalars().items():
        per_element = list(dict.fromkeys(s for s in scalars if not _is_per_row(s, row_block)))
        if not isinstance(value.owner, ELEMENTWISE_OPS) or len(per_element) < 2:
            continue
        once = _ops(per_element[:1], row_block)
        extra = _ops(per_element, row_block) - once
        found.append(Recompute(value, len(per_element), extra, 2 * _element_bytes(value)))
    return found


def _row_block(kernel: loop.KernelOp) -> Block | None:
    """Return the block whose ops run once per row (the outer `loop.parallel`'s, in a kernel
    with row loops: a nested parallel or a reduction that is no matmul's K loop), or None."""
    outer = kernel.body.block.first_op
    if not isinstance(outer, loop.ParallelOp):
        return None
    block = outer.body.block
    for op in block.ops:
        if isinstance(op, loop.ParallelOp):
            return block
        if isinstance(op, loop.ReduceOp) and CONTRACTION_ATTR not in op.attributes:
            return block
    return None


def _is_per_row(scalar: SSAValue, row_block: Block | None) -> bool:
    op = scalar.owner
    return not isinstance(op, Operation) or op.parent_block() is row_block


def _ops(scalars: list[SSAValue], row_block: Block | None) -> int:
    """Return the FP32 operations per element of computing `scalars`, each op counted once:
    the backward slice down to loads, reductions and what is computed once per row."""
    seen: set[Operation] = set()
    stack = list(scalars)
    total = 0
    while stack:
        value = stack.pop()
        op = value.owner
        if _is_per_row(value, row_block) or op in seen:
            continue
        assert isinstance(op, Operation)
        seen.add(op)
        if isinstance(op, memref.LoadOp | loop.ReduceOp):
            continue
        total += _op_cost(op)
        stack.extend(op.operands)
    return total


def _op_cost(op: Operation) -> int:
    """Return what one scalar op costs in FP32 operations (index arithmetic and constants are
    free: they are the addressing, shared by every evaluation)."""
    if isinstance(op, arith.ConstantOp) or any(isinstance(r.type, IndexType) for r in op.results):
        return 0
    if op.name.startswith("math.") or isinstance(op, arith.DivfOp | llvm.FRemOp):
        return SPECIAL_FUNCTION_OPS
    return 1


def _element_bytes(value: SSAValue) -> int:
    assert isinstance(value.type, TensorType)
    return max(1, value.type.element_type.bitwidth // 8)  # type: ignore[attr-defined]
