"""Reductions the row rule can take: several reduce dimensions made one, and reductions with
fewer rows than SMs split in two kernels.

`x.sum()` or `x.mean()` fuses to a kernel of one row whose `loop.reduce` runs over the whole
tensor. Scheduled as it is, one thread group reads every element. With fewer rows than SMs, the
planner cuts the reduction in two kernels first:

- partial: parallel over (rows, a), each point reducing its share into a workspace of the
  reduction's state, `[rows…, a]`;
- fold: parallel over the rows, reducing each row's `a` states with the same combine, then the
  kernel's epilogue.

A reduction over several dimensions is first made one over a single dimension
(`flatten_reductions`, for the row rule in any case); `a` is a divisor of its length that leaves
chunks of at least `SPLIT_MIN_CHUNK` (at most `SPLIT_MAX_PARTS` parts). A length without one (a
prime) is cut in chunks of a multiple of 8 elements with a shorter last one: its points past
the end fold the init (their index clamped to the last element, their value not used).
`loop.reduce`'s init is its combine's identity, so the split folds the same monoid in another
association (a float sum rounds differently, as any parallel reduction does). Both pieces are
row kernels the ordinary rules schedule.

A strided reduction, one whose elements lie a row apart in memory while its rows lie side by
side (a sum over dim 0, a mean over batch and sequence), is another case: a thread group per
row would read one element per 32-byte sector. Of `SPLIT_MIN_ELEMENTS` elements or more, such
a kernel runs on the sequential rule, a thread per row, so a warp reads 32 neighbouring rows at
once (`split_strided_reduction`); with fewer rows than `STRIDED_THREADS_PER_SM` threads per
SM, its partial kernel is a thread per (part, row), the parts cutting the reduction, and the
fold the same as above.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from math import isqrt, prod

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import MemRefType, ModuleOp, UnitAttr
from xdsl.ir import Operation, SSAValue

from tinyopt.dialects import loop
from tinyopt.passes.graph_to_loop.fuse_kernel import CONTRACTION_ATTR
from tinyopt.passes.tile.emit import UNROLL, Emitter, Mapping, depends_on
from tinyopt.passes.tile.gemm.split_k import SEQUENTIAL, derived_kernel, replace_kernels
from tinyopt.passes.tile.target import Target

SPLIT_MIN_ELEMENTS = 1 << 16
"""A reduction over fewer elements a row is left whole: one thread group reads it fast enough."""
SPLIT_MIN_CHUNK = 1024
"""Elements each point of a split one-dimensional reduction folds, at least."""
SPLIT_MAX_PARTS = 4096
"""Parts of a split one-dimensional reduction, at most."""
ALIGNED_CHUNK = 8
"""Elements in 16 bytes of 16-bit values (two such runs of f32)."""
STRIDED_THREADS_PER_SM = 2048
"""Threads per SM a strided reduction's partial kernel is cut to give (all an SM holds): each
thread has few loads in flight, so the memory needs many threads."""
STRIDED_MIN_CHUNK = 16
"""Elements each thread of a strided partial kernel folds, at least."""
STRIDED_UNROLL = 64
"""A strided reduction of at most this many elements a thread is unrolled (`UNROLL`): each
thread issues all of its loads before the first combine, instead of waiting a memory latency
per element (the decode merge's loop over its splits: 9.8 → 5.6 µs unrolled, RESULTS.md
nineteenth session)."""


def split_reduction(
    module: ModuleOp, kernel: loop.KernelOp, target: Target
) -> tuple[loop.KernelOp, ...]:
    """Puts a partial and a fold kernel in place of a reduction of fewer rows than SMs, and
    returns them; returns the kernel where it is not one."""
    found = _few_row_reduction(kernel, target)
    if found is None:
        return (kernel,)
    return _split(module, kernel, *found)


def split_strided_reduction(
    module: ModuleOp, kernel: loop.KernelOp, target: Target
) -> tuple[loop.KernelOp, ...]:
    """Runs a strided reduction of at least `SPLIT_MIN_ELEMENTS` elements a thread per row:
    marks the kernel for the sequential rule where its rows give `STRIDED_THREADS_PER_SM`
    threads per SM, else puts a partial kernel (a thread per part and row, rows fastest) and a
    fold in its place and returns them; returns the kernel where it is no such reduction (a
    smaller one stays on the row rule: one memory latency either way, and no second launch)."""
    found = _one_reduction(kernel)
    if found is None or SEQUENTIAL in kernel.attributes or not _strided(*found):
        return (kernel,)
    nest, reduce = found
    rows, n = prod(nest.extents), reduce.extents[0]
    if rows * n < SPLIT_MIN_ELEMENTS:  # one latency either way: no second launch
        return (kernel,)
    parts = min(-(-target.sms * STRIDED_THREADS_PER_SM // rows), n // STRIDED_MIN_CHUNK)
    if parts < 2:
        kernel.attributes[SEQUENTIAL] = UnitAttr()
        if n <= STRIDED_UNROLL:
            reduce.attributes[UNROLL] = UnitAttr()
        return (kernel,)
    chunk = -(-n // parts)
    return _split(module, kernel, nest, reduce, -(-n // chunk), chunk, strided=True)


def _split(
    module: ModuleOp,
    kernel: loop.KernelOp,
    nest: loop.ParallelOp,
    reduce: loop.ReduceOp,
    parts: int,
    chunk: int,
    strided: bool = False,
) -> tuple[loop.KernelOp, loop.KernelOp]:
    """Puts the partial kernel (with `strided`, a thread per (part, row) on the sequential
    rule) and the fold in `kernel`'s place, with their workspace `[rows…, parts]` of each of
    the reduction's results; returns them."""
    workspace = [MemRefType(t, [*nest.extents, parts]) for t in reduce.res.types]
    partial = _partial_kernel(kernel, nest, reduce, parts, chunk, workspace, parts_first=strided)
    if strided:
        partial.attributes[SEQUENTIAL] = UnitAttr()
    fold = _fold_kernel(kernel, nest, reduce, parts, workspace)

    def with_workspace(args: list[SSAValue]) -> tuple[list[Operation], list[list[SSAValue]]]:
        allocs = [memref.AllocOp([], [], t) for t in workspace]
        return allocs, [[*args, *(a.memref for a in allocs)]] * 2

    replace_kernels(module, kernel, [partial, fold], with_workspace)
    return partial, fold


def flatten_reductions(kernel: loop.KernelOp) -> bool:
    """Makes each reduction over several dimensions of a row kernel's nest (a mean over H and W,
    over the batch and the sequence) a reduction over one, its indices recovered by division,
    and so each loop over several dimensions beside it (the row's output, as `x - x.sum(dims)`
    writes it): the row rule takes a nest whose loops are one-dimensional, where the sequential
    rule would otherwise run each row on one thread. Sums of products are left to the GEMM
    rules, and nests with loops inside their reductions (attention) alone. Returns whether it
    changed the kernel."""
    ops = list(kernel.body.block.ops)
    if len(ops) != 1 or not isinstance(nest := ops[0], loop.ParallelOp):
        return False
    inner = [op for op in nest.walk() if op is not nest and isinstance(op, _LOOPS)]
    wide = [op for op in inner if isinstance(op, loop.ReduceOp) and len(op.extents) > 1]
    if not wide or any(CONTRACTION_ATTR in op.attributes for op in wide):
        return False
    if any(o is not r and isinstance(o, _LOOPS) for r in inner for o in r.walk()):
        return False
    for reduce in wide:
        flat = loop.ReduceOp(
            [prod(reduce.extents)], list(reduce.init), combine=reduce.combine.clone()
        )
        _flatten_into(reduce, flat)
    for inside in [op for op in inner if isinstance(op, loop.ParallelOp) and len(op.extents) > 1]:
        _flatten_into(inside, loop.ParallelOp([prod(inside.extents)]))
    return True


def _flatten_into(
    nest: loop.ReduceOp | loop.ParallelOp, flat: loop.ReduceOp | loop.ParallelOp
) -> None:
    """Moves `nest`'s body into the one-dimensional `flat`, its indices recovered from flat's
    by division, and puts `flat` in its place."""
    for key, value in nest.attributes.items():
        flat.attributes[key] = value
    block = flat.body.block
    ivs = Emitter(block).delinearize(block.args[0], list(nest.extents))
    for arg, iv in zip(nest.body.block.args, ivs, strict=True):
        arg.replace_all_uses_with(iv)
    for op in list(nest.body.block.ops):
        op.detach()
        block.add_op(op)
    parent = nest.parent_block()
    assert parent is not None
    parent.insert_op_before(flat, nest)
    for old, new in zip(nest.results, flat.results, strict=True):
        old.replace_all_uses_with(new)
    parent.erase_op(nest)


_LOOPS = (loop.ParallelOp, loop.ReduceOp)


def _few_row_reduction(
    kernel: loop.KernelOp, target: Target
) -> tuple[loop.ParallelOp, loop.ReduceOp, int, int] | None:
    """(the nest, its one reduction, the parts to cut it in, the elements of a part), for a
    kernel of fewer rows than SMs whose one `loop.reduce` (with no loop inside) folds enough
    contiguous elements a row."""
    found = _one_reduction(kernel)
    if found is None or SEQUENTIAL in kernel.attributes:
        return None
    nest, reduce = found
    if prod(nest.extents) >= target.sms:
        return None
    if reduce.extents[0] < SPLIT_MIN_ELEMENTS or _strided(nest, reduce):
        return None
    n = reduce.extents[0]
    if parts := _divisor_parts(n):
        return nest, reduce, parts, n // parts
    chunk = max(SPLIT_MIN_CHUNK, -(-n // min(isqrt(n), SPLIT_MAX_PARTS)))
    chunk = -(-chunk // ALIGNED_CHUNK) * ALIGNED_CHUNK
    return nest, reduce, -(-n // chunk), chunk


def _one_reduction(kernel: loop.KernelOp) -> tuple[loop.ParallelOp, loop.ReduceOp] | None:
    """(the nest, its reduction) of a kernel whose one nest holds one one-dimensional
    `loop.reduce` with no loop inside, that sums no products (GEMMs and GEMVs: the GEMM rules
    split K their way)."""
    ops = list(kernel.body.block.ops)
    if len(ops) != 1 or not isinstance(nest := ops[0], loop.ParallelOp):
        return None
    reduces = [op for op in nest.body.block.ops if isinstance(op, loop.ReduceOp)]
    if len(reduces) != 1:
        return None
    (reduce,) = reduces
    if CONTRACTION_ATTR in reduce.attributes:
        return None
    loops = [op for op in nest.walk() if isinstance(op, loop.ParallelOp | loop.ReduceOp)]
    if loops != [nest, reduce] or len(reduce.extents) > 1:  # see `flatten_reductions`
        return None
    return nest, reduce


def _strided(nest: loop.ParallelOp, reduce: loop.ReduceOp) -> bool:
    """Whether the reduction reads its elements a row apart: no load's last index varies with
    the reduction's index, and some load's last index varies with it and a row index (so
    neighbouring rows are neighbours in memory)."""
    ops = list(reduce.body.block.ops)
    along = depends_on(ops, reduce.body.block.args)
    across = depends_on(list(nest.body.block.ops), nest.body.block.args)
    loads = [op for op in reduce.walk() if isinstance(op, memref.LoadOp)]
    varying = [op for op in loads if any(i in along for i in op.indices)]
    return bool(varying) and all(
        op.indices and op.indices[-1] not in along and op.indices[-1] in across for op in varying
    )


def _divisor_parts(n: int) -> int | None:
    """The largest divisor of n up to √n and `SPLIT_MAX_PARTS` that leaves chunks of at least
    `SPLIT_MIN_CHUNK`, preferring chunks of a multiple of `ALIGNED_CHUNK` elements (each part's
    row then starts 16 bytes aligned, for 16-byte loads); None where fewer than 16 parts would
    (a prime n, say: cut with a shorter last chunk instead)."""
    fits = [
        parts
        for parts in range(min(isqrt(n), SPLIT_MAX_PARTS), 15, -1)
        if n % parts == 0 and n // parts >= SPLIT_MIN_CHUNK
    ]
    aligned = [parts for parts in fits if (n // parts) % ALIGNED_CHUNK == 0]
    return (aligned or fits or [None])[0]


def _partial_kernel(
    kernel: loop.KernelOp,
    nest: loop.ParallelOp,
    reduce: loop.ReduceOp,
    parts: int,
    chunk: int,
    workspace: list[MemRefType],
    parts_first: bool = False,
) -> loop.KernelOp:
    """`parallel(rows…, part) { s = reduce(k < chunk) { element(part·chunk + k) };
    ws[rows…, part] = s }` (with `parts_first`, the nest runs over (part, rows…)); where the
    parts overrun the length n, an index i past it reads element n − 1 and folds the init
    instead."""
    new, em, mapping = derived_kernel(kernel, f"{kernel.sym_name.data}_partial", workspace)
    n = reduce.extents[0]
    with _rows(em, mapping, nest, reduce, [parts], parts_first) as (ivs, init):
        part, *rows = ivs if parts_first else [ivs[-1], *ivs[:-1]]
        inner = loop.ReduceOp([chunk], init, combine=reduce.combine.clone())
        if parts_first and chunk <= STRIDED_UNROLL:
            inner.attributes[UNROLL] = UnitAttr()
        em.op(inner)
        with em.into(inner.body.block):
            (k,) = inner.body.block.args
            (iv,) = reduce.body.block.args
            index = em.add(em.mul(part, chunk), k)
            ragged = parts * chunk != n
            last = em.index(n - 1)
            mapping[iv] = em.value(arith.MinSIOp(index, last)) if ragged else index
            for op in reduce.body.block.ops:
                if ragged and isinstance(op, loop.YieldOp):
                    inside = em.value(arith.CmpiOp(index, last, "sle"))
                    values = [mapping.get(v, v) for v in op.operands]
                    kept = [em.value(arith.SelectOp(inside, v, i)) for v, i in zip(values, init)]
                    em.op(loop.YieldOp(*kept))
                else:
                    em.op(op.clone(value_mapper=mapping))
        spaces = new.body.block.args[-len(workspace) :]
        for value, space in zip(inner.res, spaces, strict=True):
            em.op(memref.StoreOp.get(value, space, [*rows, part]))
    return new


def _fold_kernel(
    kernel: loop.KernelOp,
    nest: loop.ParallelOp,
    reduce: loop.ReduceOp,
    parts: int,
    workspace: list[MemRefType],
) -> loop.KernelOp:
    """`parallel(rows…) { s = reduce(part) { ws[rows…, part] }; epilogue(s) }`."""
    new, em, mapping = derived_kernel(kernel, f"{kernel.sym_name.data}_fold", workspace)
    with _rows(em, mapping, nest, reduce, []) as (rows, init):
        fold = loop.ReduceOp([parts], init, combine=reduce.combine.clone())
        em.op(fold)
        with em.into(fold.body.block):
            (part,) = fold.body.block.args
            spaces = new.body.block.args[-len(workspace) :]
            states = [em.value(memref.LoadOp.get(space, [*rows, part])) for space in spaces]
            em.op(loop.YieldOp(*states))
        mapping.update(zip(reduce.res, fold.res, strict=True))
        body = list(nest.body.block.ops)
        for op in body[body.index(reduce) + 1 :]:
            em.op(op.clone(value_mapper=mapping))
    return new


@contextmanager
def _rows(
    em: Emitter,
    mapping: Mapping,
    nest: loop.ParallelOp,
    reduce: loop.ReduceOp,
    extra: list[int],
    extra_first: bool = False,
) -> Iterator[tuple[list[SSAValue], list[SSAValue]]]:
    """Emits a nest over the kernel's rows and `extra` dimensions (after the rows, or before
    them with `extra_first`), maps the old row indices to the new ones and clones the ops
    before the reduction into it; yields the nest's indices and the reduction's init values
    there, with the nest's body current."""
    extents = [*extra, *nest.extents] if extra_first else [*nest.extents, *extra]
    rows = loop.ParallelOp(extents)
    em.op(rows)
    with em.into(rows.body.block):
        ivs = list(rows.body.block.args)
        row_ivs = ivs[len(extra) :] if extra_first else ivs
        mapping.update(zip(nest.body.block.args, row_ivs, strict=False))
        body = list(nest.body.block.ops)
        for op in body[: body.index(reduce)]:
            em.op(op.clone(value_mapper=mapping))
        yield ivs, [mapping.get(v, v) for v in reduce.init]
