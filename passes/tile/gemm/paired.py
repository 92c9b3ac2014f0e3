"""Paired contractions: two K loops over one A operand in one kernel, and how to split them.

`fuse` builds one where a root reads two matmuls sharing their A tensor, as the Llama MLP's
`silu(x @ wg) * (x @ wu)` does (the nest: docs/ir.md, "paired contraction").

The wgmma rule runs it as one dual GEMM (`wgmma.py`). Where that rule does not take the kernel,
`unpair` splits it into two kernels that the ordinary rules schedule: one computes the second
product (`%u`) into an f32 workspace, the other is the original kernel reading it from there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType, ModuleOp, f32
from xdsl.ir import Operation, SSAValue

from tinyopt.dialects import loop
from tinyopt.passes.tile.gemm.contraction_match import (
    Contraction,
    contraction_parts,
    contraction_reduces,
    operand_sides,
)
from tinyopt.passes.tile.gemm.split_k import derived_kernel, replace_kernels


@dataclass
class PairedContraction(Contraction):
    """A contraction (its first K loop) and the second K loop over the same A side, whose
    parts `second` gives as a contraction of its own (same nest, prologue and epilogue)."""

    second: Contraction


def match_paired_contraction(op: loop.KernelOp) -> PairedContraction | None:
    """Recognizes a contraction nest with two K loops whose A sides compute the same value."""
    found = contraction_reduces(op)
    if found is None or len(found[1]) != 2:
        return None
    nest, (first, second) = found
    c = contraction_parts(nest, [first, second])
    sides = operand_sides(nest, second)
    if c is None or sides is None or second.extents != first.extents:
        return None
    a_side, a_value, b_side, b_value, product = sides
    if not _same_side((c.a_side, c.a_value, first), (a_side, a_value, second)):
        return None
    *_, m_iv, n_iv = nest.body.block.args
    parts = (a_side, a_value, b_side, b_value, product, m_iv, n_iv, c.prologue, c.epilogue)
    return PairedContraction(**vars(c), second=Contraction(nest, second, *parts))


Side = tuple[Sequence[Operation], SSAValue, loop.ReduceOp]
"""An operand side's ops, the value it yields, and its K loop."""


def _same_side(first: Side, second: Side) -> bool:
    """Whether two operand sides are the same ops on the same values, each in its K loop."""
    (ops, value, reduce), (other_ops, other_value, other_reduce) = first, second
    if len(ops) != len(other_ops):
        return False
    same: dict[SSAValue, SSAValue] = {reduce.body.block.args[0]: other_reduce.body.block.args[0]}
    for op, other in zip(ops, other_ops):
        if (
            op.name != other.name
            or op.properties != other.properties
            or op.attributes != other.attributes
            or op.result_types != other.result_types
            or len(op.operands) != len(other.operands)
            or any(same.get(a, a) is not b for a, b in zip(op.operands, other.operands))
        ):
            return False
        same.update(zip(op.results, other.results))
    return same.get(value) is other_value


def unpair(
    module: ModuleOp, kernel: loop.KernelOp, c: PairedContraction
) -> tuple[loop.KernelOp, loop.KernelOp]:
    """Replaces a paired kernel by one computing its second K loop into an f32 workspace
    `[b?, m, n]` and the kernel itself reading that instead; returns both."""
    workspace_type = MemRefType(f32, c.nest.extents)
    positions = list(c.nest.body.block.ops)
    first_at, second_at = positions.index(c.reduce), positions.index(c.second.reduce)
    name = kernel.sym_name.data

    second, em, mapping = derived_kernel(kernel, f"{name}_second", [workspace_type])
    nest = c.nest.clone(value_mapper=mapping)
    em.op(nest)
    ops = list(nest.body.block.ops)
    for op in [*reversed(ops[second_at + 1 :]), ops[first_at]]:
        nest.body.block.erase_op(op)  # the epilogue, then the first K loop
    total = ops[second_at].results[0]
    nest.body.block.add_op(
        memref.StoreOp.get(total, second.body.block.args[-1], nest.body.block.args)
    )

    reading, em, mapping = derived_kernel(kernel, name, [workspace_type])
    nest = c.nest.clone(value_mapper=mapping)
    em.op(nest)
    replaced = list(nest.body.block.ops)[second_at]
    load = memref.LoadOp.get(reading.body.block.args[-1], nest.body.block.args)
    nest.body.block.insert_op_before(load, replaced)
    replaced.results[0].replace_all_uses_with(load.res)
    nest.body.block.erase_op(replaced)

    kept = [_drop_unused_args(second), _drop_unused_args(reading)]

    def with_workspace(args: list[SSAValue]) -> tuple[list[Operation], list[list[SSAValue]]]:
        workspace = memref.AllocOp([], [], workspace_type)
        passed = [*args, workspace.memref]
        return [workspace], [[passed[i] for i in positions] for positions in kept]

    replace_kernels(module, kernel, [second, reading], with_workspace)
    return second, reading


def _drop_unused_args(kernel: loop.KernelOp) -> list[int]:
    """Erases the buffer arguments the kernel does not use (the other product's B, or the
    output in the kernel that computes the second product); returns the kept positions."""
    block = kernel.body.block
    kept = [i for i, arg in enumerate(block.args) if arg.uses]
    for arg in [a for a in block.args if not a.uses]:
        block.erase_arg(arg)
    return kept
