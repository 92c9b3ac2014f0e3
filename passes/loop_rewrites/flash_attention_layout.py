"""The fused attention kernel stores the program's output layout: the copy after it goes.

After the `flash-attention` rewrite the fused kernel writes `[B·H, S, D]` into a temporary
that a second kernel only copies into the layout the program wants (`[B, H, S, D]`, or Llama's
`[S, H·D]`). When that copy is the only reader of the temporary and moves elements by a
permutation (its load's row-major offset, written as mixed-radix digits of its loop indices by
`passes/graph_to_loop/index_digits.py`, takes every offset once), the fused kernel stores
straight into the copy's destination and the copy, its kernel and the temporary are dropped.
docs/flash_attention.md ("The output layout") says more; measured 2026-11-29:
benchmarks/RESULTS.md, "Run 8 (the split-row copy vectorized, …)".
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import MemRefType
from xdsl.rewriter import Rewriter
from xdsl.ir import Block, Operation, SSAValue

from tinyopt.dialects import loop
from tinyopt.passes.graph_to_loop.index_digits import (
    Digits,
    build,
    flat_index,
    inverse,
    is_permutation,
)


def fold_output_copy(module: Operation, launch: loop.LaunchOp) -> bool:
    """Makes the kernel `launch` runs store into the destination of the copy that follows it,
    when there is one that moves elements by a permutation (see the module doc); tells whether
    it did."""
    symbols = {
        op.properties["sym_name"].data: op  # type: ignore[union-attr]
        for op in module.walk()
        if "sym_name" in op.properties
    }
    kernel = symbols.get(launch.callee.root_reference.data)
    if not isinstance(kernel, loop.KernelOp) or not isinstance(
        store := _last_store(kernel), memref.StoreOp
    ):
        return False
    out_arg = store.memref
    temp = launch.args[kernel.body.block.args.index(out_arg)]  # type: ignore[arg-type]
    if not isinstance(temp.owner, memref.AllocOp) or len(list(temp.uses)) != 2:
        return False
    (copy,) = [u.operation for u in temp.uses if u.operation is not launch] or [None]
    if not isinstance(copy, loop.LaunchOp) or copy.parent_block() is not launch.parent_block():
        return False
    copier = symbols.get(copy.callee.root_reference.data)
    if not isinstance(copier, loop.KernelOp) or len(copy.args) != 2 or copy.args[0] is not temp:
        return False
    dest = copy.args[1]
    moved = _copy_map(copier)
    if moved is None or not _movable_before(dest, launch, copy):
        return False
    placed = _placed_indices(kernel, store, *moved)
    if placed is None:
        return False
    _store_into(kernel, store, dest.type, *placed)  # type: ignore[arg-type]
    if isinstance(dest.owner, memref.AllocOp):
        dest.owner.detach()
        launch.parent_block().insert_op_before(dest.owner, launch)  # type: ignore[union-attr]
    launch.parent_block().insert_op_before(  # type: ignore[union-attr]
        loop.LaunchOp(
            launch.callee.root_reference.data, [dest if a is temp else a for a in launch.args]
        ),
        launch,
    )
    for op in (launch, copy, temp.owner):
        Rewriter.erase_op(op)
    if not any(isinstance(o, loop.LaunchOp) and o.callee == copy.callee for o in module.walk()):
        Rewriter.erase_op(copier)
    return True


def _last_store(kernel: loop.KernelOp) -> memref.StoreOp | None:
    """Returns the store ending the kernel's one nest, when it is the nest's only store."""
    ops = list(kernel.body.block.ops)
    if len(ops) != 1 or not isinstance(nest := ops[0], loop.ParallelOp):
        return None
    stores = [o for o in nest.walk() if isinstance(o, memref.StoreOp)]
    last = nest.body.block.last_op
    return last if stores == [last] and isinstance(last, memref.StoreOp) else None


def _copy_map(kernel: loop.KernelOp) -> tuple[Digits, list[SSAValue]] | None:
    """Returns the offset a copy kernel reads its first buffer at, as digits of its indices,
    and the indices it stores its second at, when it copies element to element by a
    permutation (see the module doc); else None."""
    src, dst = kernel.body.block.args
    ops = list(kernel.body.block.ops)
    if len(ops) != 1 or not isinstance(nest := ops[0], loop.ParallelOp):
        return None
    store = nest.body.block.last_op
    loads = [o for o in nest.walk() if isinstance(o, memref.LoadOp)]
    if not isinstance(store, memref.StoreOp) or store.memref is not dst or len(loads) != 1:
        return None
    load = loads[0]
    src_shape, dst_shape = src.type.get_shape(), dst.type.get_shape()  # type: ignore[attr-defined]
    if load.memref is not src or _unchanged(store.value) is not load:
        return None
    if not _at_own_index(store, nest.body.block.args, dst_shape):
        return None
    ivs = dict(zip(nest.body.block.args, nest.extents, strict=True))
    offset = flat_index(load.indices, src_shape, ivs)
    if offset is None or prod(dst_shape) != prod(src_shape):
        return None
    return (offset, list(store.indices)) if is_permutation(offset, ivs, prod(src_shape)) else None


def _at_own_index(store: memref.StoreOp, ivs: Sequence[SSAValue], shape: Sequence[int]) -> bool:
    """Tells whether a store indexes by the nest's ivs in order, with constant 0 indices at
    size-1 dims (`fuse` leaves those out of its nests)."""
    kept = [
        index
        for index, size in zip(store.indices, shape, strict=True)
        if not (size == 1 and isinstance(index.owner, arith.ConstantOp))
    ]
    return kept == list(ivs)


def _unchanged(value: SSAValue) -> Operation | None:
    """Returns the load a stored value is, when it is the loaded value, or that value widened
    and rounded back to its own type."""
    owner = value.owner
    if isinstance(owner, arith.TruncFOp) and isinstance(owner.input.owner, arith.ExtFOp):
        inner = owner.input.owner.input
        if inner.type == value.type:
            owner = inner.owner
    return owner if isinstance(owner, memref.LoadOp) else None


def _movable_before(dest: SSAValue, launch: loop.LaunchOp, copy: loop.LaunchOp) -> bool:
    """Tells whether the copy's destination may be written at `launch` instead: nothing
    between the two launches uses it, and it exists there (an argument, or an alloc that can
    move up)."""
    block = launch.parent_block()
    assert block is not None
    between: list[Operation] = []
    op = launch.next_op
    while op is not None and op is not copy:
        between.append(op)
        op = op.next_op
    if op is None:
        return False
    owner = dest.owner
    if isinstance(owner, Block):
        return not any(dest in o.operands for o in between)
    return (
        isinstance(owner, memref.AllocOp)
        and not owner.operands
        and owner in between
        and not any(dest in o.operands for o in between if o is not owner)
    )


def _placed_indices(
    kernel: loop.KernelOp, store: memref.StoreOp, offset: Digits, copy_indices: list[SSAValue]
) -> tuple[list[Operation], list[SSAValue]] | None:
    """Returns ops computing where the copy puts the element the kernel's store writes, and
    those indices; None when the store's offset does not split into the copy's digits."""
    (nest,) = kernel.body.block.ops
    assert isinstance(nest, loop.ParallelOp)
    ivs = dict(zip(nest.body.block.args, nest.extents, strict=True))
    flat = flat_index(store.indices, store.memref.type.get_shape(), ivs)  # type: ignore[attr-defined]
    point = None if flat is None else inverse(offset, flat)
    if point is None:
        return None
    ops: list[Operation] = []
    indices = []
    for index in copy_indices:  # a copy index, or a constant 0 at a size-1 dim
        index_ops, value = build(point.get(index, ()))
        ops += index_ops
        indices.append(value)
    return ops, indices


def _store_into(
    kernel: loop.KernelOp,
    store: memref.StoreOp,
    dest_type: MemRefType,
    ops: list[Operation],
    indices: list[SSAValue],
) -> None:
    """Replaces the kernel's output argument by one of `dest_type` and the store by one at
    `indices`, computed by `ops`."""
    block = kernel.body.block
    old = store.memref
    new = block.insert_arg(dest_type, block.args.index(old))  # type: ignore[arg-type]
    new.name_hint = old.name_hint
    parent = store.parent_block()
    assert parent is not None
    for op in ops:
        parent.insert_op_before(op, store)
    parent.insert_op_before(memref.StoreOp.get(store.value, new, indices), store)
    Rewriter.erase_op(store)
    block.erase_arg(old)
