"""The device limits every launch respects, checked and met in one place for every `tile.kernel`.

The schedule rules compute their grids from the problem alone (a batch of 100000 GEMMs in
`grid.z`, batch × heads of attention in `grid.y`); `fit_launch`, run on each kernel the `tile`
pass emits (and again by `to-cuda`, for tile IR written by hand), re-grids the ones past the
limits so that every rule's kernel runs at any size:

- a grid whose y or z is past 65535 (or x past 2^31 - 1) is folded into x: the launch is
  `(gx · gy · gz, 1, 1)` and the body's block indices are recovered from `blockIdx.x` by
  division and remainder, x fastest, the order the hardware starts blocks in;
- where even the folded grid is past x's limit, each block loops over the excess: round `r`
  runs virtual block `r · X + blockIdx.x` (X = the launched blocks), skipped past the last, with
  a barrier between rounds where the body shares memory. Bodies that keep state across their
  own end (mbarrier phases, cross-block flags, `setmaxnreg`, TMA and wgmma pipelines) cannot
  be re-run; they are refused by name (their tiles make such grids far larger than a device's
  memory).

Blocks stay within 1024 threads and the shared memory a block may use (48 KiB declared
statically, 227 KiB in all); registers are capped by the `__launch_bounds__` every printed
kernel carries, which has ptxas fit the block's threads in the register file.

Index arithmetic is bounded by `index_range` (the interval of every index value the kernel
computes, from its launch shape, loop bounds and constants): to-cuda prints `long long`
indices where a value may leave `int`, and a kernel whose indices or buffers may leave int64
is refused with a diagnostic naming it and the limit. Kernels within every limit are left
exactly as the rules emitted them.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from math import prod

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import DenseArrayBase, IndexType, IntegerAttr, MemRefType, i64
from xdsl.ir import Block, Operation, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.backends.cuda.hopper import dynamic_layout
from tinyopt.dialects import tile
from tinyopt.passes.tile.emit import Emitter, element_bytes

MAX_GRID = (2**31 - 1, 65535, 65535)
"""The largest gridDim.x, .y and .z of a launch (sm_90). Tests lower them to make small
problems re-grid."""

MAX_THREADS = 1024
"""Threads per block (the tile.kernel verifier enforces it too)."""

STATIC_SHARED_BYTES = 48 * 1024
"""Shared memory a block may declare statically."""

INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)

_NOT_RERUN = (
    tile.MbarrierInitOp,
    tile.MbarrierArriveOp,
    tile.MbarrierArriveExpectTxOp,
    tile.MbarrierWaitOp,
    tile.FlagSetOp,
    tile.FlagWaitOp,
    tile.SetMaxNRegOp,
    tile.TmaLoadOp,
    tile.TmaStoreOp,
    tile.BulkCommitOp,
    tile.BulkWaitOp,
    tile.WgmmaOp,
    tile.WgmmaRegisterAOp,
    tile.NamedBarrierOp,
)
"""Ops whose state outlives one pass over the body: a body holding one is not looped over."""


def _where(kernel: tile.KernelOp) -> str:
    return f"kernel @{kernel.sym_name.data}"


def fits(grid: Sequence[int]) -> bool:
    """Whether a grid is within the launch limits."""
    return all(g <= limit for g, limit in zip(grid, MAX_GRID, strict=True))


def fit_launch(kernel: tile.KernelOp, stage: str = "tile") -> tuple[int, int]:
    """Re-grids `kernel` where its grid is past the device's limits, then checks its block,
    static shared memory and index range; raises a `DiagnosticException` naming the kernel
    and the limit where one cannot be met. A kernel within every limit is not changed.
    Returns the kernel's `index_range` as it is after any re-gridding (the CUDA printer's
    index type reads it: to-cuda hands it on rather than walking the kernel again)."""
    where = f"{stage}: {_where(kernel)}"
    threads = prod(kernel.block_size)
    if threads > MAX_THREADS:
        raise DiagnosticException(
            f"{where}: {threads} threads per block exceed the limit {MAX_THREADS}"
        )
    # One walk serves the shared-memory checks and, where no re-gridding changes the kernel,
    # the index range (each walk of a large kernel costs as much as the checks themselves).
    ops = list(kernel.walk())
    allocs = [op for op in ops if isinstance(op, tile.AllocOp)]
    static = sum(
        prod(t.get_shape()) * element_bytes(t.element_type)
        for op in allocs
        if op.dynamic is None
        and isinstance(t := op.result.type, MemRefType)
        and tile.memory_space(t) == tile.SHARED
    )
    if static > STATIC_SHARED_BYTES:
        raise DiagnosticException(
            f"{where}: {static} bytes of static shared memory exceed the "
            f"{STATIC_SHARED_BYTES} a block may declare"
        )
    _, dynamic = dynamic_layout(kernel, allocs)  # it reads the allocs of the walk only
    if static + dynamic > tile.DYNAMIC_SHARED_BYTES:
        raise DiagnosticException(
            f"{where}: {static} bytes of static and {dynamic} of dynamic shared memory exceed "
            f"the {tile.DYNAMIC_SHARED_BYTES} a block may use"
        )
    for arg in kernel.body.block.args:
        t = arg.type
        if isinstance(t, MemRefType) and prod(t.get_shape()) > INT64[1]:
            raise DiagnosticException(
                f"{where}: its buffer {t} has {prod(t.get_shape())} elements, an index space "
                f"beyond the 64-bit indices' limit 2^63 - 1"
            )
    if not fits(kernel.grid_size):
        cluster = kernel.cluster_size
        if cluster is not None and prod(cluster) > 1:
            # Folding the grid into x would scatter a cluster's blocks (and break its sizes'
            # division of the grid): they find each other by their block indices.
            raise DiagnosticException(
                f"{where}: its grid {list(kernel.grid_size)} is past the device's limits "
                f"{list(MAX_GRID)}, and a kernel launched in clusters of {list(cluster)} "
                "cannot be re-gridded"
            )
        _regrid(kernel, where)
        ops = list(kernel.walk())
    lo, hi = index_range(kernel, ops)
    if lo < INT64[0] or hi > INT64[1]:
        raise DiagnosticException(
            f"{where}: its index arithmetic reaches {hi if hi > INT64[1] else lo}, beyond the "
            "64-bit indices' limit 2^63 - 1"
        )
    return lo, hi


def _regrid(kernel: tile.KernelOp, where: str) -> None:
    """Folds the grid into x, looping over what is past x's limit (module docstring)."""
    grid = kernel.grid_size
    total = prod(grid)
    launch = min(total, MAX_GRID[0])
    rounds = -(-total // launch)
    body = kernel.body.block
    ids = [op for op in kernel.walk() if isinstance(op, tile.BlockIdOp)]
    used = {op.dim.data for op in ids}
    prologue = Block()
    em = Emitter(prologue)
    if rounds == 1:
        first = em.value(tile.BlockIdOp("x"))
        _replace_ids(ids, _split(em, first, grid, used))
        first_op = body.first_op
        for op in list(prologue.ops):
            op.detach()
            if first_op is None:
                body.add_op(op)
            else:
                body.insert_op_before(op, first_op)
    else:
        blocking = [op for op in kernel.walk() if isinstance(op, _NOT_RERUN)]
        if blocking:
            raise DiagnosticException(
                f"{where}: its grid of {total} blocks is past gridDim.x's limit "
                f"{MAX_GRID[0]}, and its body cannot loop over the excess: it keeps "
                f"'{blocking[0].name}' state across blocks"
            )
        shares = any(
            isinstance(op, tile.BarrierOp | tile.BlockReduceOp)
            or (isinstance(op, tile.AllocOp) and tile.memory_space(op.result.type) == tile.SHARED)
            for op in kernel.walk()
        )
        ops = list(body.ops)
        for op in ops:  # buffers stay declared once, outside the rounds
            if isinstance(op, tile.AllocOp):
                op.detach()
                prologue.add_op(op)
        first = em.value(tile.BlockIdOp("x"))
        with em.for_loop(0, rounds, 1) as (r, _, _):
            virtual = em.add(em.mul(r, launch), first)
            with em.if_(em.less(virtual, total)) as (then_block, _, _), em.into(then_block):
                _replace_ids(ids, _split(em, virtual, grid, used))
                for op in ops:
                    if op.parent is body:
                        op.detach()
                        then_block.add_op(op)
            if shares:  # the next round's shared memory must not overwrite this one's
                em.op(tile.BarrierOp())
            em.op(scf.YieldOp())
        for op in list(prologue.ops):
            op.detach()
            body.add_op(op)
    kernel.grid = DenseArrayBase.from_list(i64, [launch, 1, 1])


def _split(em: Emitter, flat: SSAValue, grid: Sequence[int], used: set[str]) -> dict[str, SSAValue]:
    """The block indices of the linear block `flat` (x fastest), those in `used` only."""
    gx, gy, gz = grid
    out: dict[str, SSAValue] = {}
    if "x" in used:
        out["x"] = flat if gy * gz == 1 else em.index(0) if gx == 1 else em.rem(flat, gx)
    if "y" in used:
        rest = em.div(flat, gx)
        out["y"] = rest if gz == 1 else em.index(0) if gy == 1 else em.rem(rest, gy)
    if "z" in used:
        out["z"] = em.div(flat, gx * gy)
    return out


def _replace_ids(ids: list[tile.BlockIdOp], values: dict[str, SSAValue]) -> None:
    for op in ids:
        op.result.replace_all_uses_with(values[op.dim.data])
        op.detach()
        op.erase()


def index_range(kernel: tile.KernelOp, ops: Iterable[Operation] | None = None) -> tuple[int, int]:
    """The smallest and largest value any index the kernel computes may take, where it is known
    from the launch shape, loop bounds and constants; (0, 0) where none is. Values read from
    memory (a gather's ids) are left out, as is what is computed from them. `ops`: the kernel's
    ops in walk order, where the caller has just walked it."""
    grid, block = kernel.grid_size, kernel.block_size
    ranges: dict[SSAValue, tuple[int, int]] = {}
    lo, hi = 0, 0
    for op in kernel.walk() if ops is None else ops:
        if isinstance(op, scf.ForOp):
            bounds = [ranges.get(v) for v in (op.lb, op.ub)]
            if bounds[0] and bounds[1] and isinstance(op.body.block.args[0].type, IndexType):
                iv = (bounds[0][0], max(bounds[0][1], bounds[1][1] - 1))
                ranges[op.body.block.args[0]] = iv
                lo, hi = min(lo, iv[0]), max(hi, iv[1])
            continue
        results = op.results
        if len(results) != 1:
            continue
        (result,) = results
        if not isinstance(result.type, IndexType):
            continue
        r = _range(op, ranges, grid, block)
        if r is not None:
            ranges[result] = r
            lo, hi = min(lo, r[0]), max(hi, r[1])
    return lo, hi


_DIMS = {"x": 0, "y": 1, "z": 2}


@functools.cache
def _kind(op_type: type[Operation]) -> str | None:
    """Which rule of `_range` an op class takes, or None: the isinstance tests of the rules,
    in their order, made once per class (an op's class fixes them) rather than per op: they
    were half of `index_range`'s time, which walks every op of every kernel twice."""
    kinds = (
        (arith.ConstantOp, "constant"),
        (tile.BlockIdOp, "block_id"),
        (tile.ThreadIdOp, "thread_id"),
        (tile.WarpUniformOp, "uniform"),
        (arith.SelectOp, "select"),
        (arith.AddiOp, "add"),
        (arith.SubiOp, "sub"),
        (arith.MuliOp, "mul"),
        (arith.MaxSIOp | arith.MaxUIOp, "max"),
        (arith.MinSIOp | arith.MinUIOp, "min"),
        (arith.DivUIOp | arith.DivSIOp | arith.FloorDivSIOp, "div"),
        (arith.CeilDivUIOp | arith.CeilDivSIOp, "ceil_div"),
        (arith.RemUIOp | arith.RemSIOp, "rem"),
    )
    return next((kind for cls, kind in kinds if issubclass(op_type, cls)), None)


def _range(
    op: Operation,
    ranges: dict[SSAValue, tuple[int, int]],
    grid: Sequence[int],
    block: Sequence[int],
) -> tuple[int, int] | None:
    """The interval of an index-typed op's result, or None where it is not known."""
    kind = _kind(type(op))
    if kind is None:
        return None
    if kind == "constant":
        value = op.value  # type: ignore[attr-defined]
        return (value.value.data,) * 2 if isinstance(value, IntegerAttr) else None
    if kind == "block_id":
        return 0, grid[_DIMS[op.dim.data]] - 1  # type: ignore[attr-defined]
    if kind == "thread_id":
        return 0, block[_DIMS[op.dim.data]] - 1  # type: ignore[attr-defined]
    operands = [ranges.get(v) for v in op.operands]
    if kind == "uniform":
        return operands[0]
    if kind == "select":
        a, b = operands[1], operands[2]
        return (min(a[0], b[0]), max(a[1], b[1])) if a and b else None
    if len(operands) != 2 or operands[0] is None or operands[1] is None:
        return None
    (a0, a1), (b0, b1) = operands  # type: ignore[misc]
    if kind == "add":
        return a0 + b0, a1 + b1
    if kind == "sub":
        return a0 - b1, a1 - b0
    if kind == "mul":
        products = (a0 * b0, a0 * b1, a1 * b0, a1 * b1)
        return min(products), max(products)
    if kind == "max":
        return max(a0, b0), max(a1, b1)
    if kind == "min":
        return min(a0, b0), min(a1, b1)
    if a0 < 0 or b0 <= 0:  # division and remainder: of non-negative values only
        return None
    if kind == "div":
        return a0 // b1, a1 // b0
    if kind == "ceil_div":
        return -(-a0 // b1), -(-a1 // b0)
    return (a0, a1) if a1 < b0 else (0, min(a1, b1 - 1))  # rem
