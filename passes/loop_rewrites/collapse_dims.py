"""Collapses two adjacent parallel loops of a contraction kernel into one where every buffer
sees them as one row-major dimension, and drops the unit dims of a 2-D GEMM's buffers; the
host passes `memref.collapse_shape` views of the buffers retyped (docs/ir.md, "loop").

Loop variables `p` and `q` (extent Q) collapse when each is only a load or store index, the
two always indices d and d + 1 of a kernel buffer whose dim d + 1 is Q, in every access to
it: `p·Q + q` then addresses the same element. A nest left with more than one batch loop
(the GEMM rules take `b?, m, n`), or with a batch loop over a B operand it does not index,
merges its first two anyway: buffers read at the pair merge their dims, and other uses read
the variables back as `row / Q` and `row % Q` (`_merge_batch_pair`).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import takewhile
from math import prod

import numpy as np

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import ArrayAttr, IndexType, IntegerAttr, MemRefType, ModuleOp, i64
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.rewriter import Rewriter

from tinyopt.dialects import loop
from tinyopt.passes.graph_to_loop.index_eval import constant_index, on_grid

Access = memref.LoadOp | memref.StoreOp


def _index_uses(iv: SSAValue) -> set[Access] | None:
    """The loads and stores that use `iv` as an index, or None if it has any other use."""
    accesses: set[Access] = set()
    for use in iv.uses:
        op = use.operation
        first_index = 2 if isinstance(op, memref.StoreOp) else 1
        if not isinstance(op, Access) or use.index < first_index:
            return None
        accesses.add(op)
    return accesses


def _collapse_pair(kernel: loop.KernelOp, nest: loop.ParallelOp, a: int) -> dict[int, int]:
    """Collapses loop variables a and a + 1 of `nest` if they qualify; returns the merged dim
    of each kernel argument retyped (by position), or {} when nothing changed."""
    p, q = nest.body.block.args[a : a + 2]
    uses_p, uses_q = _index_uses(p), _index_uses(q)
    if uses_p is None or uses_q is None:
        return {}
    accesses = uses_p | uses_q
    if not accesses:
        return {}
    merged: dict[BlockArgument, int] = {}
    for op in accesses:
        indices, buffer = list(op.indices), op.memref
        if indices.count(p) != 1 or indices.count(q) != 1 or not isinstance(buffer, BlockArgument):
            return {}
        d = indices.index(p)
        shape = buffer.type.get_shape()  # type: ignore[attr-defined]
        in_kernel = buffer.owner is kernel.body.block
        if not in_kernel or indices.index(q) != d + 1 or shape[d + 1] != nest.extents[a + 1]:
            return {}
        if merged.setdefault(buffer, d) != d:
            return {}
    for buffer in merged:
        ops = _accesses(buffer)
        if ops is None or not accesses.issuperset(ops):
            return {}
    positions = {arg.index: d for arg, d in merged.items()}
    _rewrite(kernel, nest, a, merged)
    return positions


def _merge_batch_pair(kernel: loop.KernelOp, nest: loop.ParallelOp) -> dict[int, int] | None:
    """Merges the first two loops of a contraction nest where the GEMM rules (`b?, m, n`)
    need it; buffers that every access indexes at the pair, adjacent, merge those dims, and
    any other use of a variable reads it back out of the merged one (`b = z / H`).

    - More than one batch loop: always (`[B, H, S, D]` heads read at `[b, h, m, k]`, BERT's
      padding mask `[B, S]` read at `[b, n]`).
    - A batch loop and the rows, `(b, m, n)`: when every load in the K loops that uses b or m
      is of a merged buffer, i.e. B is shared by the batch (ViT's output projection, whose
      epilogue recomputes the residual at `[b, 0, max(m, 1) - 1, n]`): one GEMM of B·M rows
      instead of a batched one. Returns None when that does not hold.

    Returns the merged dim of each kernel argument retyped, by position."""
    p, q = nest.body.block.args[:2]
    extent = nest.extents[1]
    merged: dict[BlockArgument, int] = {}
    for buffer in kernel.body.block.args:
        ops = _accesses(buffer)
        if not ops or not all(p in op.indices or q in op.indices for op in ops):
            continue
        shape = buffer.type.get_shape()  # type: ignore[attr-defined]
        places = {
            (list(op.indices).index(p), list(op.indices).index(q))
            if list(op.indices).count(p) == list(op.indices).count(q) == 1
            else None
            for op in ops
        }
        if len(places) == 1 and (place := places.pop()) is not None:
            d, e = place
            if e == d + 1 and shape[e] == extent:
                merged[buffer] = d
    if len(nest.extents) == 3:
        varying = {p, q}  # values computed from b or m, in the order the body computes them
        loads = []
        for op in nest.walk():
            if op is not nest and any(o in varying for o in op.operands):
                varying.update(op.results)
                if isinstance(op, memref.LoadOp) and isinstance(op.parent_op(), loop.ReduceOp):
                    loads.append(op)
        if not loads or any(
            load.memref not in merged or not {p, q} <= set(load.indices) for load in loads
        ):
            return None
    positions = {arg.index: d for arg, d in merged.items()}
    _rewrite(kernel, nest, 0, merged, keep_uses=True)
    return positions


def _sink_operand_indices(nest: loop.ParallelOp) -> None:
    """Moves index arithmetic of the nest's body that only K loops use into each of them.

    The GEMM rules take a prologue only where it does not vary per point; an operand index
    computed from the batch variable (GQA's keys `[B, KV, S, D]` read at `[z / H, z % H / G,
    n, k]` for merged batch and heads) is then part of that operand's side, which the
    register-staged rules evaluate as they load (Llama's fp32 scores went to the row-reduction
    rule: 6.5 of 43.6 ms at 8x512, H200 2026-12-02)."""
    body = nest.body.block
    prologue = list(takewhile(lambda o: not isinstance(o, loop.ReduceOp), body.ops))
    if len(prologue) == len(body.ops):
        return  # no K loop
    for op in reversed(prologue):
        if not isinstance(op, _INDEX_MATH) or not all(
            isinstance(r.type, IndexType) for r in op.results
        ):
            continue
        users = {body.find_ancestor_op_in_block(u.operation) for r in op.results for u in r.uses}
        if not users or not all(isinstance(u, loop.ReduceOp) for u in users):
            continue
        for reduce in users:
            inner = reduce.body.block  # type: ignore[union-attr]
            copy = op.clone()
            inner.insert_op_before(copy, inner.first_op)  # type: ignore[arg-type]
            for old_result, new_result in zip(op.results, copy.results, strict=True):
                for use in list(old_result.uses):
                    if reduce.is_ancestor(use.operation):  # type: ignore[union-attr]
                        use.operation.operands[use.index] = new_result
        Rewriter.erase_op(op)


_INDEX_MATH = (
    arith.ConstantOp,
    arith.AddiOp,
    arith.SubiOp,
    arith.MuliOp,
    arith.DivUIOp,
    arith.RemUIOp,
    arith.MaxSIOp,
    arith.MinSIOp,
)
"""Ops `_sink_operand_indices` moves: pure, on indices."""


def _rewrite(
    kernel: loop.KernelOp,
    nest: loop.ParallelOp,
    a: int,
    merged: dict[BlockArgument, int],
    keep_uses: bool = False,
) -> None:
    """Merges loop variables a and a + 1 into one, and dims d, d + 1 of each merged buffer;
    with `keep_uses`, other uses of the two read them back as `row / Q` and `row % Q`."""
    extents = list(nest.extents)
    extent = extents[a + 1]
    extents[a : a + 2] = [extents[a] * extent]
    body = nest.body.block
    row = body.insert_arg(body.args[a].type, a)
    p, q = body.args[a + 1 : a + 3]
    for buffer, d in merged.items():
        _retype(kernel, buffer, d, lambda op, d=d: [*op.indices[:d], row, *op.indices[d + 2 :]])
    if keep_uses and (p.uses or q.uses):
        size = arith.ConstantOp(IntegerAttr(extent, IndexType()))
        outer, inner = arith.DivUIOp(row, size), arith.RemUIOp(row, size)
        users = [body.find_ancestor_op_in_block(u.operation) for u in (*p.uses, *q.uses)]
        first = min(users, key=lambda op: body.get_operation_index(op))  # type: ignore[arg-type]
        body.insert_ops_before([size, outer, inner], first)  # type: ignore[arg-type]
        p.replace_all_uses_with(outer.result)
        q.replace_all_uses_with(inner.result)
    body.erase_arg(p)
    body.erase_arg(q)
    nest.properties["bounds"] = loop.ParallelOp(extents).bounds


def _retype(
    kernel: loop.KernelOp,
    buffer: BlockArgument,
    d: int,
    new_indices: Callable[[Access], list[SSAValue]],
    count: int = 2,
) -> None:
    """Replaces kernel argument `buffer` by one with dims d to d + count − 1 merged, and each
    access to it by one at the indices `new_indices` gives it."""
    old = buffer.type
    assert isinstance(old, MemRefType)
    shape = list(old.get_shape())
    shape[d : d + count] = [prod(shape[d : d + count])]
    view = kernel.body.block.insert_arg(MemRefType(old.element_type, shape), buffer.index)
    for use in list(buffer.uses):
        op = use.operation
        assert isinstance(op, Access)
        indices = new_indices(op)
        if isinstance(op, memref.LoadOp):
            new: Operation = memref.LoadOp.get(view, indices)
        else:
            new = memref.StoreOp.get(op.value, view, indices)
        new.attributes |= op.attributes
        Rewriter.replace_op(op, new)
    kernel.body.block.erase_arg(buffer)


def _accesses(buffer: BlockArgument) -> list[Access] | None:
    """The loads and stores of a kernel buffer, or None if it has another use."""
    ops = [u.operation for u in buffer.uses]
    if not all(isinstance(op, Access) and op.memref is buffer for op in ops):
        return None
    return ops  # type: ignore[return-value]


def _drop_unit_dim(kernel: loop.KernelOp) -> dict[int, int]:
    """Merges a size-1 dim that every access indexes by the constant 0 into its neighbour
    (`[1, s, d]` read at `[0, m, k]` becomes `[s, d]` read at `[m, k]`); returns the merged
    dim of the argument retyped, by position, or {}."""
    for buffer in kernel.body.block.args:
        if not isinstance(buffer.type, MemRefType):  # a runtime scalar
            continue
        shape = buffer.type.get_shape()
        accesses = _accesses(buffer)
        if len(shape) < 2 or not accesses:
            continue
        for d, size in enumerate(shape):
            if size == 1 and all(constant_index(op.indices[d]) == 0 for op in accesses):
                start = d if d + 1 < len(shape) else d - 1
                position, zeros = buffer.index, {op.indices[d].owner for op in accesses}
                _retype(
                    kernel, buffer, start, lambda op, d=d: [*op.indices[:d], *op.indices[d + 1 :]]
                )
                for zero in zeros:
                    if isinstance(zero, Operation) and not zero.results[0].uses:
                        Rewriter.erase_op(zero)
                return {position: start}
    return {}


def _unraveled(load: memref.LoadOp, shape: list[int]) -> tuple[int, int] | None:
    """(first dim, count) of the dims of `load`'s buffer whose indices are its K loop's
    variable k unraveled over them, row-major, k's extent their product: `[n, k / 9, k / 3 %
    3, k % 3]` of a convolution's `[N, C, 3, 3]` weight read as `[N, C·9]` (a unit dim among
    them read at 0); None where no two dims are. The indices that do not vary with the output
    point must be exactly those, consecutive; each is evaluated at every k (at most
    `UNRAVEL_CHECKED`) against the unraveling."""
    reduce = load.parent_op()
    if not isinstance(reduce, loop.ReduceOp) or len(reduce.extents) != 1:
        return None
    (extent,) = reduce.extents
    if extent > UNRAVEL_CHECKED:
        return None
    grid = np.arange(extent)
    values = [on_grid(index, {reduce.body.block.args[0]: grid}) for index in load.indices]
    known = [d for d, v in enumerate(values) if v is not None]  # k's, and constants (a unit dim)
    if len(known) < 2 or known != list(range(known[0], known[-1] + 1)):
        return None
    d, count = known[0], len(known)
    if sum(np.ndim(v) == 1 for v in values) < 2 or prod(shape[d : d + count]) != extent:
        return None  # a unit dim beside k alone is `_drop_unit_dim`'s
    expected = np.unravel_index(grid, shape[d : d + count])
    if not all(np.all(values[d + i] == e) for i, e in enumerate(expected)):
        return None
    return d, count


UNRAVEL_CHECKED = 2**20
"""Longest K loop whose unraveled indices `_unraveled` checks point by point."""


def _collapse_unraveled(kernel: loop.KernelOp) -> list[dict[int, int]]:
    """Merges the dims of a buffer that every access reads at its K loop's variable unraveled
    over them into one dim read at the variable itself: a weight reshaped for a GEMM (a
    convolution's `[Cout, Cin, kh, kw]` as `[Cout, Cin·kh·kw]`) becomes a plain load, which the
    GEMM rules copy whole (TMA, cp.async) rather than computing an address per element.
    Returns the pair collapses the launch must pass, as `collapse_dims`'s changes: `count`
    merged dims are `count − 1` collapses of dims (d, d + 1)."""
    for buffer in kernel.body.block.args:
        accesses = _accesses(buffer)
        if not accesses or not all(isinstance(op, memref.LoadOp) for op in accesses):
            continue
        shape = list(buffer.type.get_shape())  # type: ignore[attr-defined]
        found = {_unraveled(op, shape) for op in accesses}  # type: ignore[arg-type]
        if len(found) != 1 or (place := found.pop()) is None:
            continue
        d, count = place
        position = buffer.index
        unraveling = {i.owner for op in accesses for i in op.indices[d : d + count]}

        def at_k(op: Access, d: int = d, count: int = count) -> list[SSAValue]:
            k = op.parent_op().body.block.args[0]  # type: ignore[union-attr]
            return [*op.indices[:d], k, *op.indices[d + count :]]

        _retype(kernel, buffer, d, at_k, count)
        _erase_unused(unraveling)
        return [{position: d}] * (count - 1)
    return []


def _erase_unused(ops: set[Operation | Block | None]) -> None:
    """Erases the pure index ops among `ops` left without a use, and then their operands'."""
    stack = [op for op in ops if isinstance(op, Operation)]
    while stack:
        op = stack.pop()
        if op.parent is None or not isinstance(op, _INDEX_MATH) or any(r.uses for r in op.results):
            continue
        operands = [v.owner for v in op.operands if isinstance(v.owner, Operation)]
        Rewriter.erase_op(op)
        stack.extend(operands)


def _views(host: Block, launch: loop.LaunchOp, dims: dict[int, int]) -> None:
    """Passes the launch a `memref.collapse_shape` view of each argument whose dims merged."""
    args = list(launch.args)
    for position, d in sorted(dims.items()):
        source = args[position]
        rank = source.type.get_num_dims()  # type: ignore[attr-defined]
        groups = [[i] for i in range(rank) if i not in (d, d + 1)]
        groups.insert(d, [d, d + 1])
        shape = list(source.type.get_shape())  # type: ignore[attr-defined]
        shape[d : d + 2] = [shape[d] * shape[d + 1]]
        view = memref.CollapseShapeOp(
            operands=[source],
            result_types=[MemRefType(source.type.element_type, shape)],  # type: ignore[attr-defined]
            properties={
                "reassociation": ArrayAttr(
                    [ArrayAttr([IntegerAttr(i, i64) for i in g]) for g in groups]
                )
            },
        )
        host.insert_op_before(view, launch)
        args[position] = view.result
    launch.operands = args


def collapse_dims(module: ModuleOp, kernel: loop.KernelOp) -> None:
    """Collapses the loops of a contraction kernel (every K loop a matmul's) where they
    qualify, and passes each launch of it views of the buffers whose dims merged."""
    nest = kernel.body.block.first_op
    reduces = [op for op in kernel.walk() if isinstance(op, loop.ReduceOp)]
    if not isinstance(nest, loop.ParallelOp) or not reduces:
        return
    if any("tinyopt.contraction" not in r.attributes for r in reduces):
        return
    changes: list[dict[int, int]] = []
    a = 0
    while a + 1 < len(nest.extents):
        dims = _collapse_pair(kernel, nest, a)
        if dims:
            changes.append(dims)
        else:
            a += 1
    while len(nest.extents) >= 3 and (dims := _drop_unit_dim(kernel)):
        changes.append(dims)
    while len(nest.extents) >= 3 and (dims := _merge_batch_pair(kernel, nest)) is not None:
        changes.append(dims)
    while len(nest.extents) == 2 and (dims := _drop_unit_dim(kernel)):
        changes.append(dims)
    _sink_operand_indices(nest)
    while unraveled := _collapse_unraveled(kernel):
        changes += unraveled
    name = kernel.sym_name.data
    for launch in [op for op in module.walk() if isinstance(op, loop.LaunchOp)]:
        if launch.callee.string_value() == name:
            for dims in changes:
                _views(launch.parent_block(), launch, dims)  # type: ignore[arg-type]
