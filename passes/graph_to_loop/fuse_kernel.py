"""Builds the `loop.kernel` that computes one materialized tensor (a root) of a graph function.

Producers are inlined by index substitution (compute-inline): each element of the root is an
expression tree whose leaves are loads from the kernel's input buffers (function arguments,
other roots, non-splat constants); slices, concats and gathers are index maps. The kernel is
elementwise, a row reduction (reductions over trailing dims that the root reads at a row-only
index are hoisted to the row level), a reduction, or a contraction (a matmul read at the root's
own index, up to unit dims, its operands inlined into the K loop; two matmuls sharing their A
tensor give a paired contraction, `_partner`); docs/ir.md shows the shapes.

Anything that does not fit raises `Materialize` naming the tensor that needs its own kernel;
the pass then adds that root and rebuilds. Scalar code is placed at the outermost loop level
whose index variables it uses, so a value that depends only on the row is computed once per row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from itertools import accumulate
from math import copysign, prod
from typing import Literal

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    TensorType,
    UnitAttr,
    f32,
    i64,
)
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.dialects import graph, loop
from tinyopt.dialects.graph import FP8_SCALE_BLOCK
from tinyopt.passes.graph_to_loop.fuse_index import (
    Bin,
    Const,
    Index,
    Loaded,
    Point,
    Scalar,
    UNBOUNDED,
    Var,
    bound,
    broadcast_point,
    dynamic_slice_point,
    gather_point,
    point_vars,
    reshape_point,
    shift_into,
    slice_point,
    transpose_point,
)
from tinyopt.passes.graph_to_loop.fuse_scalar import (
    ELEMENTWISE_OPS,
    element_type,
    from_f32,
    lower_elementwise,
    round_to,
    to_f32,
)

INDEX_LIMIT = 2**31
"""Kernels whose buffers all have fewer elements index with 32-bit `int`s (to-cuda)."""

CONTRACTION_ATTR = "tinyopt.contraction"
"""Discardable unit attribute marking the `loop.reduce` of a matmul's K loop."""

_IDENTITY = {
    graph.ReduceSumOp: 0.0,
    graph.ReduceProdOp: 1.0,
    graph.ReduceMeanOp: 0.0,
    graph.ReduceMaxOp: float("-inf"),
    graph.ReduceMinOp: float("inf"),
}
_COMBINER = {
    graph.ReduceProdOp: arith.MulfOp,
    graph.ReduceMaxOp: arith.MaximumfOp,
    graph.ReduceMinOp: arith.MinimumfOp,
}

Kind = Literal["elementwise", "rows", "reduce", "contraction"]


def _layout_source(value: SSAValue) -> SSAValue:
    """Return the value below `value`'s chain of shape ops if the chain transposes or
    broadcasts an elementwise producer, else `value`.

    A reshape alone keeps the layout. A chain that transposes without broadcasting is stored
    as the contraction reads it (a copy kernel; tensor-core schedules need plain operands),
    except for a last swap of the two innermost dims, which the GEMM and attention rules read
    either way: `q @ k.transpose(-1, -2)` stores k as `[B, H, S, D]`, rows of D contiguous,
    which the attention rules load with cp.async and the GEMM rules take as one batch dim
    (`_mixes_batch`); stored as read, `[B, H, D, S]`, the keys were loaded one element at a
    time (BERT's attention 2.5x slower, H200 2026-12-02). A chain that broadcasts an
    elementwise producer stores the producer (fewer bytes).
    """
    source, moves, broadcasts = value, False, False
    while isinstance(source.owner, graph.SHAPE_OPS):
        moves |= isinstance(source.owner, graph.TransposeOp | graph.BroadcastOp)
        broadcasts |= isinstance(source.owner, graph.BroadcastOp)
        source = source.owner.operands[0]
    if not moves:
        return value
    if broadcasts and not isinstance(source.owner, graph.MatmulOp | graph.ReduceOp):
        return source
    return _unswapped(value)


def _unswapped(value: SSAValue) -> SSAValue:
    """Return `value` below its last swaps of the two innermost dims: what a matmul operand
    is stored as, since the GEMM and attention rules read a buffer either way."""
    while isinstance(value.owner, graph.TransposeOp) and _swaps_inner_dims(value.owner.perm_list):
        value = value.owner.x
    return value


def _swaps_inner_dims(perm: Sequence[int]) -> bool:
    rank = len(perm)
    return rank >= 2 and list(perm) == [*range(rank - 2), rank - 1, rank - 2]


MAX_SCALARS = 4096
"""The most scalars (values at points) a kernel's build emits before it gives the most
recomputed value a buffer: 8× the largest kernel of the test programs and the zoo (496,
ResNet's stem)."""


def _past_scalar_limit(count: int) -> bool:
    """Whether a walk that has `count` scalars asks `_too_many_scalars` again: once past
    `MAX_SCALARS`, then at each doubling, so a walk with nothing recomputed to give a buffer
    costs its length, not its square (a Swin mask built by 9 slice writes had walked for
    minutes)."""
    return count > MAX_SCALARS and (count == MAX_SCALARS + 1 or not count & (count - 1))


class Materialize(Exception):
    """Raised while building a kernel: `value` must be computed by a kernel of its own, for
    `reason` (a phrase `fuse{debug=true}` prints)."""

    def __init__(self, value: SSAValue, reason: str):
        super().__init__(f"materialize {value}: {reason}")
        self.value = value
        self.reason = reason


def shape_of(value: SSAValue) -> tuple[int, ...]:
    """Return the static shape of a tensor value."""
    assert isinstance(value.type, TensorType)
    return value.type.get_shape()


def buffer_type(value: SSAValue) -> MemRefType:
    """Return the memref type holding a tensor value."""
    assert isinstance(value.type, TensorType)
    return MemRefType(value.type.element_type, shape_of(value))


def is_buffer_constant(value: SSAValue) -> bool:
    """Return whether `value` is a non-splat `graph.constant`, which kernels read from memory."""
    op = value.owner
    return isinstance(op, graph.ConstantOp) and not graph.is_splat(op.value)


ONE_ROW_LIMIT = 2**16
"""The most elements a reduction over a whole tensor (a norm or softmax of one row: `[7]`,
`[1, 4096]`) may have for its kernel to compute it as one row, in one block; larger ones get
a reduction kernel of their own. Split into kernels, a bf16 norm of one row stored its
statistics in bf16 (error 4.3e-2 against a 2e-2 tolerance, fuzz seed 0 cases 972-973)."""


def _reduced(op: graph.ReduceOp) -> int:
    """The number of elements each result element of `op` reduces."""
    shape = shape_of(op.x)
    return prod(shape[d] for d in op.dim_list)


def _is_trailing(op: graph.ReduceOp) -> bool:
    rank = len(shape_of(op.x))
    dims = sorted(op.dim_list)
    return dims == list(range(rank - len(dims), rank))


class KernelBuilder:
    """Builds the kernel of one root; `inputs` and `fused` describe it once `build` returns."""

    def __init__(
        self,
        name: str,
        root: SSAValue,
        materialized: Container[SSAValue],
        store_shape: tuple[int, ...] | None = None,
    ):
        self.root = root
        self.materialized = materialized
        self.store_shape = shape_of(root) if store_shape is None else store_shape
        """The shape the kernel iterates and stores: the root's, or a coarser one the root's
        dims split (a reshape folded into the store; the host passes a collapsed view)."""
        self.inputs: list[SSAValue] = []
        """Graph values the kernel loads, in the order of its buffer arguments."""
        self.fused: list[SSAValue] = []
        """Reductions and matmuls the kernel computes inline."""
        out_type = MemRefType(buffer_type(root).element_type, self.store_shape)
        self.kernel = loop.KernelOp(name, [out_type])
        self._next_var = 0
        self._blocks: list[Block] = []
        self._var_level: dict[Var, int] = {}
        self._var_arg: dict[Var, SSAValue] = {}
        self._values: dict[tuple[SSAValue, Point], SSAValue] = {}
        self._indices: dict[Index, SSAValue] = {}
        self._consts: dict[tuple[float, float], SSAValue] = {}
        self._target = 0
        self._kind: Kind = "elementwise"
        self._matmuls: tuple[SSAValue, ...] = ()
        """The kernel's matmuls: none, one, or a pair sharing A (`_partner`)."""
        self._matmul_point: Point = ()

    # ------------------------------------------------------------------ kernel structure

    def build(self) -> loop.KernelOp:
        """Emit the kernel body; raises `Materialize` when the root cannot be built alone."""
        if isinstance(self.root.owner, graph.DynamicUpdateSliceOp):
            return self._build_update(self.root.owner)
        store_point = tuple(self._fresh_var(extent) for extent in self.store_shape)
        root_point = reshape_point(store_point, self.store_shape, shape_of(self.root))
        loop_vars = [e for e in store_point if isinstance(e, Var)]
        self._kind, split = self._choose_kind(loop_vars, root_point)
        outer = self._open_parallel(loop_vars[:split])
        self.kernel.body.block.add_op(outer)
        if self._kind == "rows":
            inner = self._open_parallel(loop_vars[split:])
            value = self._value(self.root, root_point)
            self._store(value, store_point)
            self._blocks.pop()
            outer.body.block.add_op(inner)
        else:
            for matmul in self._matmuls:
                self._value(matmul, self._matmul_point)
            self._store(self._value(self.root, root_point), store_point)
        self._check_index_range()
        return self.kernel

    def _build_update(self, op: graph.DynamicUpdateSliceOp) -> loop.KernelOp:
        """Emit the in-place write of a dynamic update slice: a loop over the update's points
        storing each at its place in the output buffer, which the host function binds to the
        operand's (a function argument's) buffer. Only elementwise work is inlined: an update
        computed from matmuls (a projection's keys, rotated and transposed) reads their
        buffers, one write kernel after the GEMMs; one holding another reduction gets a buffer
        of its own (a kernel computing it, then the write)."""
        point = tuple(self._fresh_var(extent) for extent in shape_of(op.update))
        found = self._reductions_reached(op.update, point)
        if found and all(isinstance(v.owner, graph.MatmulOp) for v, _ in found):
            raise Materialize(found[0][0], "the update of an in-place write reads it")
        if found:
            raise Materialize(op.update, "the update of an in-place write holds a reduction")
        self._kind = "elementwise"
        outer = self._open_parallel([e for e in point if isinstance(e, Var)])
        self.kernel.body.block.add_op(outer)
        dim = op.dim.value.data
        offset = Scalar(op.offset, op.offset_bounds()[1])
        self._store(self._value(op.update, point), dynamic_slice_point(point, dim, offset))
        self._check_index_range()
        return self.kernel

    def _check_index_range(self) -> None:
        """Refuse a kernel whose index arithmetic would overflow the 32-bit indices it gets.

        Kernels index with 32 bits unless a buffer has 2^31 elements or more (to-cuda's
        rule), but an index into an inlined intermediate (a broadcast read through a
        reshape) can exceed every buffer. A gather's id itself is left out (it is any
        integer until it is clamped into its table).
        """
        bounds = (bound(e) for e in self._indices)
        largest = max((b - 1 for b in bounds if b < UNBOUNDED), default=0)
        buffers = [self.root, *self.inputs]
        if largest < INDEX_LIMIT or any(prod(shape_of(v)) >= INDEX_LIMIT for v in buffers):
            return
        raise DiagnosticException(
            f"fuse: kernel @{self.kernel.sym_name.data} computes an index up to {largest}, "
            "past the 32-bit indices of a kernel whose buffers have fewer than 2^31 elements "
            "(an intermediate read through a reshape is larger than every buffer)"
        )

    def _choose_kind(self, loop_vars: Sequence[Var], root_point: Point) -> tuple[Kind, int]:
        """Pick the kernel shape and how many leading loop variables are the outer level."""
        n_vars = len(loop_vars)
        found = self._reductions_reached(self.root, root_point)
        matmuls = [(v, p) for v, p in found if isinstance(v.owner, graph.MatmulOp)]
        reductions = [(v, p) for v, p in found if isinstance(v.owner, graph.ReduceOp)]
        if matmuls:
            kept = self._kept_matmul([v for v, _ in matmuls])
            kept_point = next(p for v, p in matmuls if v is kept)
            pair = (kept, *self._partner(kept, kept_point, matmuls))
            for value, point in matmuls:
                # The root may add or drop unit dims (a reshape), not move the loop variables.
                moved = [e for e in point if e != Const(0)] != list(loop_vars)
                if value not in pair:
                    raise Materialize(value, "its kernel computes another matmul")
                if point != kept_point or moved:
                    raise Materialize(value, "read off its kernel's own index")
            for value, _ in reductions:
                # A reduction over the matmul reads it off the root's index: keep the reduction.
                if self._reaches(value, kept):
                    raise Materialize(kept, "a reduction reads it off its kernel's own index")
                raise Materialize(value, "read by a contraction kernel")
            for value in pair:
                self._check_contraction_operands(value, kept_point)
            self._matmuls, self._matmul_point = pair, kept_point
            return "contraction", n_vars
        if isinstance(self.root.owner, graph.ReduceOp):
            return "reduce", n_vars
        if not reductions:
            return "elementwise", n_vars
        split = 0
        for value, point in reductions:
            used = [i for i, v in enumerate(loop_vars) if v in point_vars(point)]
            op = value.owner
            assert isinstance(op, graph.ReduceOp)
            if not used and _is_trailing(op) and _reduced(op) <= ONE_ROW_LIMIT:
                continue  # the tensor is one row (a decode step's norm): one row kernel
            if not _is_trailing(op) or not used or used[-1] == len(loop_vars) - 1:
                raise Materialize(value, "not a trailing reduction read once per row")
            split = max(split, used[-1] + 1)
        return "rows", split

    def _kept_matmul(self, matmuls: Sequence[SSAValue]) -> SSAValue:
        """Return the matmul the kernel computes among those it reaches: the first that no
        other one reads.

        A matmul that another one reads (a residual `x + o` feeding both the next layer and
        its output) is computed by that one's operand kernel too, so it gets a buffer.
        """
        distinct = list(dict.fromkeys(matmuls))
        read = {
            v
            for v in distinct
            for w in distinct
            if w is not v and any(self._reaches(o, v) for o in w.owner.operands)
        }
        return next(v for v in distinct if v not in read)

    def _partner(
        self, kept: SSAValue, point: Point, matmuls: Sequence[tuple[SSAValue, Point]]
    ) -> tuple[SSAValue, ...]:
        """Return the matmul computed beside `kept` (none or one): the first other one read at
        the same point with the same A operand, neither reading the other (a paired
        contraction, docs/ir.md: the gate and up projections of `silu(x @ wg) * (x @ wu)`)."""
        lhs = kept.owner.lhs  # type: ignore[union-attr]
        for value, at in matmuls:
            if (
                value is not kept
                and at == point
                and value.owner.lhs is lhs  # type: ignore[union-attr]
                and not self._reaches(value, kept)
                and not any(self._reaches(o, value) for o in kept.owner.operands)  # type: ignore[union-attr]
            ):
                return (value,)
        return ()

    def _check_contraction_operands(self, value: SSAValue, point: Point) -> None:
        """Materialize a matmul operand that itself holds a reduction or a matmul.

        When the operand reaches its producer through a transpose or a broadcast, what gets
        a buffer is the producer below those shape ops: the contraction reads it through
        their index maps, so the buffer keeps the producer's own layout and size (attention's
        keys are stored once per KV head, row-major, not repeated per query head and
        transposed with strided reads).
        """
        op = value.owner
        assert isinstance(op, graph.MatmulOp)
        k = self._fresh_var(shape_of(op.lhs)[-1])
        for operand, operand_point in (
            (op.lhs, (*point[:-1], k)),
            (op.rhs, (*point[:-2], k, point[-1])),
        ):
            if self._reductions_reached(operand, operand_point):
                raise Materialize(_layout_source(operand), "a matmul operand holding a reduction")
            if self._is_load(_unswapped(operand)):
                continue  # a buffer already (mean pooling, then a linear): read as stored
            outer = point_vars((operand_point[-2] if operand is op.lhs else point[-1],))
            batch = point_vars(point[:-2])
            scales = self._reads_fp8(operand, operand_point)
            for at_load in (
                lambda load, at: _not_plain(load, at, outer, k if scales else None),
                lambda load, at: _mixes_batch(at, batch),
            ):
                if reason := self._first_at_loads(operand, operand_point, at_load):
                    raise Materialize(_unswapped(operand), f"a matmul operand {reason}")

    def _reads_fp8(self, value: SSAValue, point: Point) -> bool:
        """Whether inlining `value` at `point` loads an 8-bit float buffer (an FP8 operand,
        which may carry block scales, `_not_plain`)."""
        return any(
            self._is_load(v) and v.type.element_type in graph.FP8_TYPES  # type: ignore[attr-defined]
            for v, _ in self._inlined(value, point)
        )

    def _inlined(self, value: SSAValue, point: Point) -> Iterator[tuple[SSAValue, Point]]:
        """Yield each value at each point that inlining `value` at `point` visits, once, in the
        order of a depth-first walk over operands; loads, reductions and matmuls end a path
        (iterative: a chain of elementwise ops may be longer than Python's recursion limit)."""
        seen: set[tuple[SSAValue, Point]] = set()
        stack = [(value, point)]
        while stack:
            value, point = stack.pop()
            if (value, point) in seen:
                continue
            seen.add((value, point))
            if _past_scalar_limit(len(seen)):
                self._too_many_scalars(seen)
            yield value, point
            if not self._is_load(value) and not _reduces(value):
                stack.extend(reversed(_operand_points(value.owner, point)))

    def _reductions_reached(self, value: SSAValue, point: Point) -> list[tuple[SSAValue, Point]]:
        """The reductions and matmuls inlining `value` at `point` reaches, in walk order."""
        return [
            (v, p) for v, p in self._inlined(value, point) if not self._is_load(v) and _reduces(v)
        ]

    def _first_at_loads(
        self, value: SSAValue, point: Point, at_load: Callable[[SSAValue, Point], str | None]
    ) -> str | None:
        """Returns the first of `at_load(load, its point)` that is not None over the loads
        inlining `value` at `point` reads, in walk order, or None."""
        for v, p in self._inlined(value, point):
            if self._is_load(v) and (found := at_load(v, p)) is not None:
                return found
        return None

    def _reaches(
        self, value: SSAValue, target: SSAValue, seen: set[SSAValue] | None = None
    ) -> bool:
        """Return whether inlining `value` reads `target` (an iterative walk)."""
        seen = set() if seen is None else seen
        stack = [value]
        while stack:
            value = stack.pop()
            if value is target:
                return True
            if value in seen or self._is_load(value) or not isinstance(value.owner, Operation):
                continue
            seen.add(value)
            stack.extend(reversed(value.owner.operands))
        return False

    def _open_parallel(self, loop_vars: Sequence[Var]) -> loop.ParallelOp:
        """Create a `loop.parallel` over `loop_vars` (one unit dim if none) and enter it."""
        par = loop.ParallelOp([v.extent for v in loop_vars] or [1])
        self._enter(par.body.block, loop_vars)
        return par

    def _enter(self, block: Block, indices: Sequence[Index]) -> None:
        """Push `block` as the innermost level; its arguments are the `Var`s among `indices`."""
        self._blocks.append(block)
        for var, arg in zip(indices, block.args):
            if isinstance(var, Var):
                self._var_level[var] = len(self._blocks) - 1
                self._var_arg[var] = arg

    def _fresh_var(self, extent: int) -> Index:
        """Return a new loop variable, or constant 0 for a unit extent."""
        if extent == 1:
            return Const(0)
        self._next_var += 1
        return Var(self._next_var, extent)

    # ------------------------------------------------------------------ scalar emission

    def const(self, value: float) -> SSAValue:
        """Return an f32 constant, created once per kernel at the outermost level (keyed by
        its sign too: −0.0 == +0.0 as a dict key, and `where(c, x, -0.0)` keeps −0.0)."""
        key = (value, copysign(1.0, value))
        if key not in self._consts:
            op = arith.ConstantOp(FloatAttr(value, f32))
            self._blocks[0].add_op(op)
            self._consts[key] = op.result
        return self._consts[key]

    def emit(self, op: Operation) -> SSAValue:
        """Append `op` at the current target level and return its result."""
        self._blocks[self._target].add_op(op)
        return op.results[0]

    def _level(self, point: Point) -> int:
        return max((self._var_level[v] for v in point_vars(point)), default=0)

    def inlined_scalars(self) -> dict[SSAValue, list[SSAValue]]:
        """Return the f32 scalars the kernel computes for each graph value it inlines (loaded
        ones left out), one per point it reads the value at: what `fuse_cost` prices."""
        scalars: dict[SSAValue, list[SSAValue]] = {}
        for (value, _), scalar in self._values.items():
            if not self._is_load(value):
                scalars.setdefault(value, []).append(scalar)
        return scalars

    def _is_load(self, value: SSAValue) -> bool:
        if isinstance(value, BlockArgument) or is_buffer_constant(value):
            return True
        return value is not self.root and value in self.materialized

    def _value(self, value: SSAValue, point: Point) -> SSAValue:
        """Return the f32 scalar of tensor `value` at `point`, emitting its code if needed.

        The operands of an inlined elementwise or index-map op are emitted first, in operand
        order and depth first, by an explicit stack rather than recursion (a chain of
        elementwise ops may be longer than Python's recursion limit); `_compute` then finds
        them in `_values`. Only reductions and contractions recurse, once per nesting level.
        """
        key = (value, point)
        stack: list[tuple[tuple[SSAValue, Point], bool]] = [(key, False)]
        while stack:
            (value, point), ready = stack.pop()
            if (value, point) in self._values:
                continue
            operands = None if ready else self._inlined_operands(value, point)
            if not operands:
                self._values[(value, point)] = self._compute(value, point)
                if _past_scalar_limit(len(self._values)):
                    self._too_many_scalars(self._values)
                continue
            stack.append(((value, point), True))
            stack.extend((o, False) for o in reversed(operands) if o not in self._values)
        return self._values[key]

    def _too_many_scalars(self, visited: Iterable[tuple[SSAValue, Point]]) -> None:
        """Give a buffer to the recomputed value nearest the root (the last in program order
        visited at two points or more) once the kernel would hold more than `MAX_SCALARS`
        scalars: chained windows, e.g. three 5×5 poolings, inline 25³ loads per element, which
        the cost model would cut after the build, one pooling at a time (minutes); chained
        concatenations, each a select over its pieces, e.g. the slice writes of a Swin mask
        built in `forward` (each write a concat of slices of the one before: 9 of them took
        `fuse` 12 s on a 4×4 mask, about a minute on 6×6); nothing if no value is recomputed."""
        computes = (*ELEMENTWISE_OPS, graph.ConcatOp)
        points = Counter(
            v for v, _ in visited if isinstance(v.owner, computes) and not self._is_load(v)
        )
        recomputed = [v for v, count in points.items() if count > 1]
        if recomputed:
            order = {op: i for i, op in enumerate(self.root.owner.parent_block().ops)}
            value = max(recomputed, key=lambda v: order.get(v.owner, -1))
            raise Materialize(
                value,
                f"its kernel would compute more than {MAX_SCALARS} scalars, this one at "
                f"{points[value]} points",
            )

    def _inlined_operands(self, value: SSAValue, point: Point) -> list[tuple[SSAValue, Point]]:
        """Return the operands `_compute` reads to emit `value` at `point` (none where it
        loads it, or emits it from its own body: a constant, iota, reduction or matmul)."""
        op = value.owner
        if self._is_load(value) or not isinstance(op, Operation):
            return []
        if isinstance(op, graph.ConstantOp | graph.IotaOp | graph.ReduceOp | graph.MatmulOp):
            return []
        if (
            isinstance(op, graph.DynamicSliceOp)
            and self._kind == "contraction"
            and not isinstance(op.x.owner, graph.IotaOp)
        ):
            # The GEMM rules read operand and epilogue buffers at tile coordinates of their own.
            # A window of an iota is index arithmetic on the offset (a runtime number of valid
            # keys becomes a kernel argument the attention rules bound their key loops by).
            raise Materialize(value, "a window at a runtime offset, in a contraction kernel")
        return _operand_points(op, point)

    def _compute(self, value: SSAValue, point: Point) -> SSAValue:
        if self._is_load(value):
            return self._load(value, point)
        op = value.owner
        assert isinstance(op, Operation)
        if isinstance(op, graph.ConstantOp):
            return self.const(graph.first_value(op.value))
        if isinstance(op, graph.IotaOp):
            return self._iota(op, point)
        if isinstance(op, graph.ReduceOp):
            return self._reduction(op, point)
        if isinstance(op, graph.MatmulOp):
            return self._contraction(op, point)
        args = [self._value(o, p) for o, p in _operand_points(op, point)]
        if isinstance(op, ELEMENTWISE_OPS):
            self._target = self._level(point)
            return lower_elementwise(op, args, self)
        if isinstance(op, graph.ConcatOp):
            return self._select_operand(op, point, args)
        return args[0]

    def _iota(self, op: graph.IotaOp, point: Point) -> SSAValue:
        """Emit an iota's element: its index along `dim`, converted to float."""
        along = point[op.dim.value.data]
        index = self._index(along)
        self._target = self._level((along,))
        wide = self.emit(arith.IndexCastOp(index, i64))
        return round_to(self, self.emit(arith.SIToFPOp(wide, f32)), element_type(op.result.type))

    def _select_operand(
        self, op: graph.ConcatOp, point: Point, args: Sequence[SSAValue]
    ) -> SSAValue:
        """Emit the choice among a concat's operand values by the index along its dim."""
        dim = op.dim.value.data
        index = self._index(point[dim])
        ends = list(accumulate(shape_of(x)[dim] for x in op.inputs))
        result = args[-1]
        for end, arg in zip(reversed(ends[:-1]), reversed(args[:-1])):
            bound = self._index(Const(end))
            self._target = self._level(point)
            before = self.emit(arith.CmpiOp(index, bound, "ult"))
            result = self.emit(arith.SelectOp(before, arg, result))
        return result

    def _buffer(self, value: SSAValue) -> SSAValue:
        """Return the kernel argument holding `value`, adding it before the output if new."""
        if value not in self.inputs:
            self.kernel.body.block.insert_arg(buffer_type(value), len(self.inputs))
            self.inputs.append(value)
        return self.kernel.body.block.args[self.inputs.index(value)]

    def _scalar(self, value: SSAValue) -> SSAValue:
        """Return the kernel argument holding runtime scalar `value` (passed by value), adding
        it before the output if new."""
        if value not in self.inputs:
            assert isinstance(value.type, TensorType)
            arg = self.kernel.body.block.insert_arg(value.type.element_type, len(self.inputs))
            arg.name_hint = value.name_hint
            self.inputs.append(value)
        return self.kernel.body.block.args[self.inputs.index(value)]

    def _load(self, value: SSAValue, point: Point) -> SSAValue:
        indices = [self._index(e) for e in point]
        self._target = self._level(point)
        loaded = self.emit(memref.LoadOp.get(self._buffer(value), indices))
        return to_f32(self, loaded)

    def _store(self, value: SSAValue, point: Point) -> None:
        indices = [self._index(e) for e in point]
        self._target = len(self._blocks) - 1
        stored = from_f32(self, value, element_type(self.root.type))
        out = self.kernel.body.block.args[-1]
        self._blocks[-1].add_op(memref.StoreOp.get(stored, out, indices))

    def _index(self, e: Index) -> SSAValue:
        """Return the `index` value of expression `e`, emitting arith ops once per kernel."""
        if e in self._indices:
            return self._indices[e]
        match e:
            case Var():
                result = self._var_arg[e]
            case Const(value=c):
                op = arith.ConstantOp(IntegerAttr(c, IndexType()))
                self._blocks[0].add_op(op)
                result = op.result
            case Loaded(ids, point):
                if self._is_load(ids):
                    indices = [self._index(i) for i in point]
                    self._target = self._level(point)
                    loaded = self.emit(memref.LoadOp.get(self._buffer(ids), indices))
                elif _computed_per_element(ids):  # a flip's n - 1 - i, an interpolation's rows
                    loaded = self._value(ids, point)
                    self._target = self._level(point)
                else:
                    raise Materialize(ids, "gather ids computed by a reduction or a contraction")
                result = self.emit(arith.IndexCastOp(loaded, IndexType()))
            case Scalar(value):
                self._target = 0
                result = self.emit(arith.IndexCastOp(self._scalar(value), IndexType()))
            case Bin(kind, lhs, rhs):
                ops = {"add": arith.AddiOp, "mul": arith.MuliOp, "sub": arith.SubiOp}
                ops |= {"div": arith.DivUIOp, "rem": arith.RemUIOp}
                ops |= {"max": arith.MaxSIOp, "min": arith.MinSIOp}
                a, b = self._index(lhs), self._index(rhs)
                self._target = self._level((e,))
                result = self.emit(ops[kind](a, b))
        self._indices[e] = result
        return result

    # ------------------------------------------------------------------ reductions

    def _reduction(self, op: graph.ReduceOp, point: Point) -> SSAValue:
        """Emit a `loop.reduce` at the row level; the reduced input is inlined in its body."""
        value = op.results[0]
        if value is not self.root and (
            self._kind not in ("rows", "reduce")
            or not _is_trailing(op)
            or self._level(point) != 0
            or value in self.fused
        ):
            raise Materialize(value, "read at more than one row, or per element")
        dims = op.dim_list
        shape = shape_of(op.x)
        body = Block(arg_types=[IndexType()] * len(dims))
        red_vars = {d: self._fresh_var(shape[d]) for d in dims}
        kept = iter(e for i, e in enumerate(point) if not (op.keepdim.value.data and i in dims))
        in_point = tuple(red_vars[d] if d in red_vars else next(kept) for d in range(len(shape)))
        self._enter(body, [red_vars[d] for d in dims])
        body.add_op(loop.YieldOp(self._value(op.x, in_point)))
        self._blocks.pop()
        init = self.const(_IDENTITY[type(op)])
        combiner = _COMBINER.get(type(op), arith.AddfOp)
        reduce = loop.ReduceOp([shape[d] for d in dims], [init], Region(body), _combine(combiner))
        self._blocks[0].add_op(reduce)
        self.fused.append(value)
        result = reduce.res[0]
        if isinstance(op, graph.ReduceMeanOp):
            self._target = 0
            count = prod(shape[d] for d in dims)
            result = self.emit(arith.DivfOp(result, self.const(float(count))))
        return result

    def _contraction(self, op: graph.MatmulOp, point: Point) -> SSAValue:
        """Emit the K loop of the kernel's matmul: `reduce [k] { a(.., m, k) * b(.., k, n) }`."""
        value = op.results[0]
        if value not in self._matmuls or value in self.fused:
            raise Materialize(value, "read at more than one point of a contraction kernel")
        extent = shape_of(op.lhs)[-1]
        body = Block(arg_types=[IndexType()])
        k = self._fresh_var(extent)
        self._enter(body, [k])
        a = self._value(op.lhs, (*point[:-1], k))
        b = self._value(op.rhs, (*point[:-2], k, point[-1]))
        product = arith.MulfOp(a, b)
        body.add_ops([product, loop.YieldOp(product)])
        self._blocks.pop()
        reduce = loop.ReduceOp([extent], [self.const(0.0)], Region(body), _combine(arith.AddfOp))
        reduce.attributes[CONTRACTION_ATTR] = UnitAttr()
        self._blocks[0].add_op(reduce)
        self.fused.append(value)
        return reduce.res[0]


def _reduces(value: SSAValue) -> bool:
    """Whether `value` is a reduction's or a matmul's result (inlining stops there)."""
    return isinstance(value.owner, graph.ReduceOp | graph.MatmulOp)


def _not_plain(load: SSAValue, point: Point, outer: set[Var], k: Var | None) -> str | None:
    """Why a matmul operand's `load` at `point` would keep the GEMM rules from reading the
    operand as tiles (they would leave the matmul to a scalar rule), or None; `outer` holds
    the loop variables of the operand's row (A) or column (B) index, `k` the K variable where
    the operand is FP8 (else None).

    Two things do: an index that divides a row or column variable (a flattened row index, a
    convolution's windows; K split into heads and head dims, or a batch index divided by GQA's
    group size, is fine), and a stored reduction (a norm's row statistics, stored because two
    kernels read them). A copy of the operand costs one pass over it; the scalar rule costs
    orders of magnitude more. An FP8 operand's 128×128 block scales (an f32 load at the row or
    column index divided by 128 and K divided by 128) are fine: the wgmma rule applies them
    per K step (`passes/tile/gemm/block_scales.py`).
    """
    if k is not None and _block_scale_point(load, point, outer, k):
        return None
    if any(_divides(e, outer) for e in point):
        return "that reads its input through a division of its row or column index"
    if isinstance(load.owner, graph.ReduceOp):
        return "that reads a stored reduction (row statistics)"
    return None


def _block_scale_point(load: SSAValue, point: Point, outer: set[Var], k: Var) -> bool:
    """Whether `load` is an f32 128×128 block scale read at `point`: `[k / FP8_SCALE_BLOCK,
    row / FP8_SCALE_BLOCK]` in either order. Not where K is one block: the scale does not vary
    along K then, so the loop kernel reads it outside the K loop, where no GEMM rule takes it
    (a copy of the scaled operand keeps the GEMM tiled)."""
    if load.type.element_type != f32 or len(point) != 2 or k.extent <= FP8_SCALE_BLOCK:  # type: ignore[attr-defined]
        return False

    def blocked(e: Index, var: Var) -> bool:
        return (
            isinstance(e, Bin)
            and e.kind == "div"
            and e.lhs == var
            and isinstance(e.rhs, Const)
            and e.rhs.value == FP8_SCALE_BLOCK
        )

    for along_k, along_rows in (point, point[::-1]):
        if blocked(along_k, k) and any(blocked(along_rows, v) for v in outer):
            return True
    return False


def _mixes_batch(point: Point, batch: set[Var]) -> str | None:
    """Why a matmul operand's load at `point` mixes a batch variable with another in one index
    (v at `[b, k, h*64 + n]` in the `[B, T, 3·H·D]` output of GPT-2's fused projection), or
    None: planning then cannot merge the batch loops into the one batch dim the GEMM rules
    take, and the attention rules load such rows one element at a time instead of with
    cp.async (GPT-2's attention at 8×2048 ran at 18 TFLOP/s)."""
    if any((used := point_vars((e,))) & batch and used - batch for e in point):
        return "whose index mixes a batch variable with another"
    return None


def _divides(e: Index, outer: set[Var]) -> bool:
    """Whether index expression `e` divides (or takes the remainder of) an expression of a
    variable in `outer`."""
    if not isinstance(e, Bin):
        return False
    if e.kind in ("div", "rem") and point_vars((e.lhs,)) & outer:
        return True
    return _divides(e.lhs, outer) or _divides(e.rhs, outer)


def _combine(kind: type[Operation]) -> Region:
    """Return the combine region `yield kind(a, b)` of a one-state f32 reduction."""
    block = Block(arg_types=[f32, f32])
    combined = kind(*block.args)
    block.add_ops([combined, loop.YieldOp(combined)])
    return Region(block)


_PER_ELEMENT = (
    *ELEMENTWISE_OPS, graph.IotaOp, graph.ConstantOp, graph.BroadcastOp, graph.ReshapeOp,
    graph.TransposeOp, graph.SliceOp, graph.ConcatOp,
)  # fmt: skip
"""Ops whose element at a point is computed from their operands' elements at points an index
map gives: what a gather's ids may be computed by inside the kernel that gathers."""


def _computed_per_element(value: SSAValue) -> bool:
    """Whether `value` is computed from inputs, constants and indices by `_PER_ELEMENT` ops
    only (no reduction, contraction or gather), so each id can be computed where it is used."""
    stack, seen = [value], set()
    while stack:
        v = stack.pop()
        if v in seen or isinstance(v, BlockArgument):
            continue
        seen.add(v)
        if not isinstance(v.owner, _PER_ELEMENT):
            return False
        stack.extend(v.owner.operands)
    return True


def _operand_points(op: Operation | None, point: Point) -> list[tuple[SSAValue, Point]]:
    """Return the operands an elementwise or index-map op reads at `point`, with their points."""
    if isinstance(op, ELEMENTWISE_OPS):
        return [(o, point) for o in op.operands]
    if isinstance(op, graph.BroadcastOp):
        return [(op.x, broadcast_point(point, shape_of(op.x)))]
    if isinstance(op, graph.TransposeOp):
        return [(op.x, transpose_point(point, op.perm_list))]
    if isinstance(op, graph.ReshapeOp):
        return [(op.x, reshape_point(point, shape_of(op.result), shape_of(op.x)))]
    if isinstance(op, graph.SliceOp):
        dim, start, step = (a.value.data for a in (op.dim, op.start, op.step))
        return [(op.x, slice_point(point, dim, start, step))]
    if isinstance(op, graph.DynamicSliceOp):
        offset = Scalar(op.offset, op.offset_bounds()[1])
        return [(op.x, dynamic_slice_point(point, op.dim.value.data, offset))]
    if isinstance(op, graph.GatherOp):
        id_rank, rows = len(shape_of(op.ids)), shape_of(op.table)[0]
        return [(op.table, gather_point(point, op.ids, id_rank, rows))]
    if isinstance(op, graph.ConcatOp):
        dim, offset, points = op.dim.value.data, 0, []
        for x in op.inputs:
            size = shape_of(x)[dim]
            shifted = (*point[:dim], shift_into(point[dim], offset, size), *point[dim + 1 :])
            points.append((x, shifted))
            offset += size
        return points
    if isinstance(op, graph.ConstantOp | graph.IotaOp):
        return []
    raise DiagnosticException(f"fuse: cannot lower '{op.name if op else 'block argument'}'")
