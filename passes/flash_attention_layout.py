"""The fused attention kernel stores the program's output layout: the reshape copy after it goes.

`decompose` runs attention on `[B·H, S, D]` views of `[B, H, S, D]` tensors, so after the
`flash-attention` rewrite the fused kernel writes a `[B·H, S, D]` temporary that a second
kernel only copies into the `[B, H, S, D]` result (about 8% of the time at B4 H32 S4096 D128).
When the next launch on that temporary is such a copy, the fused kernel stores straight into
the copy's destination and the copy, its kernel and the temporary are dropped.

A copy qualifies when its kernel is one nest over the destination's shape that loads the
temporary, stores the loaded value unchanged (an `extf` then `truncf` back to the same type
counts as unchanged) at its own indices, and reads element n of the temporary in row-major
order for element n of the destination. The shapes share their trailing dims (S, D), which the
copy must read at the same indices; its leading indices are checked on the whole grid of the
leading dims. The fused kernel's store then linearizes its leading indices over the
temporary's leading dims and delinearizes them over the destination's, keeping the trailing
ones, so stores along D stay contiguous.
"""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

import numpy as np
from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType
from xdsl.ir import Block, Operation, SSAValue

from tinyopt.dialects import loop
from tinyopt.passes.index_eval import on_grid

MAX_GRID = 1 << 16
"""Largest number of leading-index points checked (B·H is 128 at the benchmark shapes)."""


def fold_output_copy(module: Operation, launch: loop.LaunchOp) -> bool:
    """Makes the kernel `launch` runs store into the destination of the reshape copy that
    follows it, when there is one (see the module doc); tells whether it did."""
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
    if not _is_reshape_copy(copier) or not _movable_before(dest, launch, copy):
        return False
    _store_into(kernel, store, dest.type)  # type: ignore[arg-type]
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
        op.detach()
        op.erase()
    if not any(isinstance(o, loop.LaunchOp) and o.callee == copy.callee for o in module.walk()):
        copier.detach()
        copier.erase()
    return True


def _last_store(kernel: loop.KernelOp) -> memref.StoreOp | None:
    """Returns the store ending the kernel's one nest, when it is the nest's only store."""
    ops = list(kernel.body.block.ops)
    if len(ops) != 1 or not isinstance(nest := ops[0], loop.ParallelOp):
        return None
    stores = [o for o in nest.walk() if isinstance(o, memref.StoreOp)]
    last = nest.body.block.last_op
    return last if stores == [last] and isinstance(last, memref.StoreOp) else None


def _is_reshape_copy(kernel: loop.KernelOp) -> bool:
    """Tells whether a kernel copies its first buffer into its second, element n to element n."""
    src, dst = kernel.body.block.args
    ops = list(kernel.body.block.ops)
    if len(ops) != 1 or not isinstance(nest := ops[0], loop.ParallelOp):
        return False
    store = nest.body.block.last_op
    loads = [o for o in nest.walk() if isinstance(o, memref.LoadOp)]
    if not isinstance(store, memref.StoreOp) or store.memref is not dst or len(loads) != 1:
        return False
    load = loads[0]
    src_shape, dst_shape = src.type.get_shape(), dst.type.get_shape()  # type: ignore[attr-defined]
    ivs = list(nest.body.block.args)
    if load.memref is not src or _unchanged(store.value) is not load:
        return False
    if not _at_own_index(store, ivs, dst_shape) or prod(nest.extents) != prod(dst_shape):
        return False
    suffix = _common_suffix(src_shape, dst_shape)
    if not suffix or list(load.indices[-suffix:]) != list(store.indices[-suffix:]):
        return False
    lead_ivs = [iv for iv in ivs if iv not in store.indices[-suffix:]]
    extents = [nest.extents[ivs.index(iv)] for iv in lead_ivs]
    if prod(extents) > MAX_GRID:
        return False
    grid = np.indices(extents).reshape(len(extents), prod(extents))
    env = {iv: grid[k] for k, iv in enumerate(lead_ivs)}
    flat = []
    for indices, shape in ((store.indices, dst_shape), (load.indices, src_shape)):
        lead = shape[:-suffix]
        values = [on_grid(index, dict(env)) for index in indices[: len(lead)]]
        if any(v is None for v in values):
            return False
        terms = [np.broadcast_to(v, grid.shape[1:]) * s for v, s in zip(values, _strides(lead))]
        flat.append(sum(terms))
    return bool(np.array_equal(*flat))


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


def _common_suffix(a: Sequence[int], b: Sequence[int]) -> int:
    """Returns how many trailing dims two shapes share, keeping a leading dim on each side."""
    n = 0
    while n < min(len(a), len(b)) - 1 and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def _strides(shape: Sequence[int]) -> list[int]:
    return [prod(shape[k + 1 :]) for k in range(len(shape))]


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


def _store_into(kernel: loop.KernelOp, store: memref.StoreOp, dest_type: MemRefType) -> None:
    """Replaces the kernel's output argument by one of `dest_type` and re-indexes the store."""
    block = kernel.body.block
    old = store.memref
    assert isinstance(old.type, MemRefType)
    src_shape, dst_shape = old.type.get_shape(), dest_type.get_shape()
    suffix = _common_suffix(src_shape, dst_shape)
    lead_src, lead_dst = src_shape[:-suffix], dst_shape[:-suffix]
    new = block.insert_arg(dest_type, block.args.index(old))  # type: ignore[arg-type]
    new.name_hint = old.name_hint
    ops: list[Operation] = []

    def index(op: Operation) -> SSAValue:
        ops.append(op)
        return op.results[0]

    def const(n: int) -> SSAValue:
        return index(arith.ConstantOp(IntegerAttr(n, IndexType())))

    flat: SSAValue | None = None
    for value, stride in zip(store.indices[: len(lead_src)], _strides(lead_src)):
        term = value if stride == 1 else index(arith.MuliOp(value, const(stride)))
        flat = term if flat is None else index(arith.AddiOp(flat, term))
    assert flat is not None
    lead = []
    for k, (stride, extent) in enumerate(zip(_strides(lead_dst), lead_dst)):
        quotient = flat if stride == 1 else index(arith.DivUIOp(flat, const(stride)))
        lead.append(quotient if k == 0 else index(arith.RemUIOp(quotient, const(extent))))
    indices = [*lead, *store.indices[len(lead_src) :]]
    parent = store.parent_block()
    assert parent is not None
    for op in ops:
        parent.insert_op_before(op, store)
    parent.insert_op_before(memref.StoreOp.get(store.value, new, indices), store)
    store.detach()
    store.erase()
    block.erase_arg(old)
