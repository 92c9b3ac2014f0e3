"""Building blocks the schedule rules share: an op appender, index arithmetic, loops, and
cloning loop-level bodies into tile-level code (sequentially or across vector lanes)."""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from xdsl.dialects import arith, memref, scf
from xdsl.dialects.builtin import (
    FloatAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    UnitAttr,
    f32,
    i1,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

from tinyopt.dialects import loop, tile

Mapping = dict[SSAValue, SSAValue]
UNROLL = "tinyopt.unroll"
"""Attribute of a loop-level `loop.reduce` that `emit_sequential` emits as an unrolled `scf.for`
(`#pragma unroll`): where its iterations' loads do not depend on the carried state, the
compiler issues them all before the first combine (the decode merge's splits)."""
CachedLoad = Callable[[memref.LoadOp, list[SSAValue]], list[SSAValue] | None]
"""Returns per-lane values for a load served from a register cache, or None to load."""


_INDEX = IndexType()
_ULT = IntegerAttr(6, 64)
"""The predicate of `arith.CmpiOp(a, b, "ult")`."""


@functools.cache
def _index_attr(v: int) -> IntegerAttr:
    """`IntegerAttr(v, IndexType())`, made once per value (attributes are immutable)."""
    return IntegerAttr(v, _INDEX)


def _binary(kind: type[Operation], a: SSAValue, b: SSAValue) -> Operation:
    """The op `kind(a, b)` builds (an arith binary op, typed as `a`), without the IRDL
    builder's argument checks."""
    a, b = SSAValue.get(a), SSAValue.get(b)
    return kind.create(operands=[a, b], result_types=[a.type])


class Emitter:
    """Appends ops at the end of a current block, with a few folding index helpers."""

    def __init__(self, block: Block) -> None:
        self.block = block
        self._consts: dict[tuple[Block, int], SSAValue] = {}

    def op(self, op: Operation) -> Operation:
        self.block.add_op(op)
        return op

    def value(self, op: Operation) -> SSAValue:
        return self.op(op).results[0]

    @contextmanager
    def into(self, block: Block):
        outer, self.block = self.block, block
        try:
            yield block
        finally:
            self.block = outer

    def index(self, v: int) -> SSAValue:
        """An index constant, made once per value and block: a later op of the block (or of a
        region in it) reuses it while it is still there. The tile pass's CSE would merge the
        copies, and they were most of its work (90% of the constants the rules emitted over
        the test programs, 2026-12-03). Constants print as literals, so where one sits does
        not change the CUDA."""
        cached = self._consts.get((self.block, v))
        if cached is not None and cached.owner.parent is self.block:
            return cached
        # `create`: the op `arith.ConstantOp(IntegerAttr(v, IndexType()))` builds, without the
        # IRDL builder's argument checks (a sixth of the tile pass's time on a Llama block)
        value = {"value": _index_attr(v)}
        result = self.value(arith.ConstantOp.create(result_types=[_INDEX], properties=value))
        self._consts[(self.block, v)] = result
        return result

    def f32(self, v: float) -> SSAValue:
        return self.value(arith.ConstantOp(FloatAttr(v, f32)))

    def add(self, a: SSAValue | int, b: SSAValue | int) -> SSAValue:
        a, b = _folded(a), _folded(b)
        if isinstance(a, int) and isinstance(b, int):
            return self.index(a + b)
        if b == 0:
            return self._v(a)
        if a == 0:
            return self._v(b)
        return self.value(_binary(arith.AddiOp, self._v(a), self._v(b)))

    def mul(self, a: SSAValue | int, b: SSAValue | int) -> SSAValue:
        a, b = _folded(a), _folded(b)
        if isinstance(a, int) and isinstance(b, int):
            return self.index(a * b)
        if b == 1:
            return self._v(a)
        if a == 1:
            return self._v(b)
        return self.value(_binary(arith.MuliOp, self._v(a), self._v(b)))

    def div(self, a: SSAValue, b: int) -> SSAValue:
        return a if b == 1 else self.value(_binary(arith.DivUIOp, a, self.index(b)))

    def rem(self, a: SSAValue, b: int) -> SSAValue:
        return self.value(_binary(arith.RemUIOp, a, self.index(b)))

    def less(self, a: SSAValue, b: SSAValue | int) -> SSAValue:
        a, b = SSAValue.get(a), SSAValue.get(self._v(b))
        arith.CmpiOp._validate_operand_types(a, b)
        return self.value(
            arith.CmpiOp.create(operands=[a, b], result_types=[i1], properties={"predicate": _ULT})
        )

    def _v(self, a: SSAValue | int) -> SSAValue:
        return self.index(a) if isinstance(a, int) else a

    def global_id(self, per_block: int, thread: str = "x") -> SSAValue:
        """Returns blockIdx.x · `per_block` + threadIdx.`thread`."""
        block = self.value(tile.BlockIdOp("x"))
        return self.add(self.mul(block, per_block), self.value(tile.ThreadIdOp(thread)))

    def load(
        self, source: SSAValue, indices: Sequence[SSAValue], width: int, evict_first: bool = False
    ) -> list[SSAValue]:
        """Loads `width` consecutive elements: one scalar load, or one vector load; with
        `evict_first`, a 128-bit one from global memory carries the L2 evict-first hint."""
        if width == 1:
            return [self.value(memref.LoadOp.get(source, indices))]
        t = source.type
        assert isinstance(t, MemRefType)
        hint = (
            evict_first
            and tile.memory_space(t) == tile.GLOBAL
            and width * t.element_type.bitwidth == 128  # type: ignore[attr-defined]
        )
        return list(self.op(tile.VectorLoadOp(source, indices, width, hint)).results)

    def delinearize(self, flat: SSAValue, extents: Sequence[int]) -> list[SSAValue]:
        """Splits a row-major linear index into one index per extent."""
        inner: list[SSAValue] = []
        for extent in reversed(extents[1:]):
            inner.insert(0, self.rem(flat, extent))
            flat = self.div(flat, extent)
        return [flat, *inner]

    def ring_parity(self, step: SSAValue, stages: int, flip: bool) -> SSAValue:
        """Returns the mbarrier phase parity of the round of a `stages`-slot ring that `step`
        falls in (flipped: of the round before it, which a fresh barrier counts as complete)."""
        rounds = self.div(step, stages)
        return self.rem(self.add(rounds, 1) if flip else rounds, 2)

    @contextmanager
    def for_loop(
        self,
        lb: SSAValue | int,
        ub: SSAValue | int,
        step: SSAValue | int,
        carried: Sequence[SSAValue] = (),
        unroll: bool | int = False,
    ):
        """Emits an `scf.for` whose body is current inside; yields (iv, carried args, op). The
        caller ends the body with `scf.yield`. `unroll`: True unrolls the loop fully, a count
        by that many iterations (`#pragma unroll N`)."""
        body = Block(arg_types=[IndexType(), *[v.type for v in carried]])
        for_op = scf.ForOp(self._v(lb), self._v(ub), self._v(step), list(carried), body)
        if unroll is True:
            for_op.attributes["tile.unroll"] = UnitAttr()
        elif unroll:
            for_op.attributes["tile.unroll"] = IntegerAttr(unroll, i64)
        self.op(for_op)
        with self.into(body):
            yield body.args[0], list(body.args[1:]), for_op

    @contextmanager
    def if_(self, cond: SSAValue, result_types: Sequence[Attribute] = ()):
        """Emits an `scf.if`; yields (then block, else block or None, op); caller adds yields."""
        then_block = Block()
        else_block = Block() if result_types else None
        if_op = scf.IfOp(
            cond, list(result_types), Region(then_block), Region(else_block) if else_block else None
        )
        self.op(if_op)
        yield then_block, else_block, if_op
        if not result_types:
            then_block.add_op(scf.YieldOp())

    def all_of(self, conditions: Sequence[SSAValue]) -> SSAValue:
        """Returns the conjunction of one or more i1 conditions."""
        result = conditions[0]
        for condition in conditions[1:]:
            result = self.value(arith.AndIOp(result, condition))
        return result

    @contextmanager
    def when(self, conditions: Sequence[SSAValue]):
        """Emits the body under an `scf.if` on all `conditions`, unguarded when there are none."""
        if not conditions:
            yield
            return
        with self.if_(self.all_of(conditions)) as (then_block, _, _), self.into(then_block):
            yield


def _folded(v: SSAValue | int) -> SSAValue | int:
    """Returns the integer of an index constant, so index arithmetic on it folds."""
    if isinstance(v, SSAValue) and (constant := index_constant(v)) is not None:
        return constant
    return v


def index_constant(v: SSAValue) -> int | None:
    """The integer an `arith.constant` of index type holds, or None for any other value."""
    if isinstance(v.owner, arith.ConstantOp):
        value = v.owner.value
        if isinstance(value, IntegerAttr) and isinstance(value.type, IndexType):
            return value.value.data
    return None


def inline_region(
    em: Emitter, region: Region, args: Sequence[SSAValue], mapping: Mapping
) -> list[SSAValue]:
    """Clones a single-block region's ops with its arguments bound; returns what it yields."""
    local = dict(mapping) | dict(zip(region.block.args, args, strict=True))
    return emit_sequential(em, region.block.ops, local)


def emit_sequential(em: Emitter, ops: Iterable[Operation], mapping: Mapping) -> list[SSAValue]:
    """Clones loop-level ops in order, parallel/reduce loops as sequential `scf.for`s; returns
    the mapped operands of a trailing `loop.yield` (empty if there is none)."""
    for op in ops:
        if isinstance(op, loop.YieldOp):
            return [mapping.get(v, v) for v in op.arguments]
        if isinstance(op, loop.ParallelOp):
            _sequential_nest(em, op.extents, op.body.block, mapping, [])
        elif isinstance(op, loop.ReduceOp):
            state = [mapping.get(v, v) for v in op.init]
            result = _sequential_nest(
                em, op.extents, op.body.block, mapping, state, op.combine, UNROLL in op.attributes
            )
            mapping.update(zip(op.res, result, strict=True))
        else:
            em.op(op.clone(value_mapper=mapping))
    return []


def _sequential_nest(
    em: Emitter,
    extents: Sequence[int],
    body: Block,
    mapping: Mapping,
    state: list[SSAValue],
    combine: Region | None = None,
    unroll: bool = False,
    ivs: Sequence[SSAValue] = (),
) -> list[SSAValue]:
    depth = len(ivs)
    with em.for_loop(0, extents[depth], 1, state, unroll) as (iv, carried, for_op):
        ivs_here = [*ivs, iv]
        if depth + 1 < len(extents):
            out = _sequential_nest(em, extents, body, mapping, carried, combine, unroll, ivs_here)
        else:
            local = dict(mapping) | dict(zip(body.args, ivs_here, strict=True))
            element = emit_sequential(em, body.ops, local)
            out = inline_region(em, combine, [*carried, *element], mapping) if combine else []
        em.op(scf.YieldOp(*out))
    return list(for_op.results)


def depends_on(ops: Iterable[Operation], roots: Iterable[SSAValue]) -> set[SSAValue]:
    """Returns the roots and every value computed by `ops` (nested ones too) that uses one."""
    dependent = set(roots)
    for op in ops:
        if _uses(op, dependent):
            dependent.update(r for inner in op.walk() for r in inner.results)
    return dependent


def is_contiguous(indices: Sequence[SSAValue], iv: SSAValue, dependent: set[SSAValue]) -> bool:
    """True when only the last index varies with `iv`, and it is `iv` itself."""
    return bool(indices) and indices[-1] == iv and not any(i in dependent for i in indices[:-1])


MAX_ALIGNMENT = 16
"""Widest vector (in elements) an alignment proof is ever asked for."""


def contiguous_alignment(
    indices: Sequence[SSAValue], iv: SSAValue, dependent: set[SSAValue]
) -> int:
    """Returns how aligned a vector along `iv` may be (in elements), or 0 if not contiguous.

    Contiguous means only the last index varies with `iv`, and it is `iv` or `iv + offset` with
    `offset` independent of `iv`; the offset's known power-of-two factor bounds the alignment
    (a split-K chunk `s·chunk + k` is aligned to the largest power of two dividing `chunk`).
    """
    if not indices:  # a rank-0 buffer: one scalar, the same for every `iv`
        return 0
    *leading, last = indices
    if any(i in dependent for i in leading):
        return 0
    if last == iv:
        return MAX_ALIGNMENT
    owner = last.owner
    if isinstance(owner, arith.AddiOp) and iv in (owner.lhs, owner.rhs):
        offset = owner.rhs if owner.lhs == iv else owner.lhs
        return 0 if offset in dependent else _power_of_two_factor(offset)
    return 0


def _power_of_two_factor(v: SSAValue) -> int:
    """Returns the largest power of two (≤ MAX_ALIGNMENT) known to divide an index value."""
    folded = _folded(v)
    if isinstance(folded, int):
        return MAX_ALIGNMENT if folded == 0 else min(MAX_ALIGNMENT, folded & -folded)
    if isinstance(v.owner, arith.MuliOp):
        product = _power_of_two_factor(v.owner.lhs) * _power_of_two_factor(v.owner.rhs)
        return min(MAX_ALIGNMENT, product)
    return 1


@dataclass
class LaneEmitter:
    """Clones a loop-level body for `width` consecutive values of one index variable.

    Loads and stores whose last index is that variable become one vector access; ops that do
    not depend on it are emitted once and shared by all lanes; the rest are cloned per lane.
    `cached_load` may return per-lane values for a load (a register cache) instead.
    """

    em: Emitter
    iv: SSAValue
    start: SSAValue
    width: int
    cached_load: CachedLoad = lambda op, indices: None
    lanes: list[Mapping] = field(default_factory=list)
    evict_first: Collection[Operation] = frozenset()
    """The loads whose vector loads carry the L2 evict-first hint (the rule's, knob `evict`)."""

    def emit(
        self, ops: Sequence[Operation], mapping: Mapping, per_lane: Sequence[Mapping] = ()
    ) -> list[list[SSAValue]]:
        """Emits the ops; returns the per-lane operands of a trailing `loop.yield`. `per_lane`
        maps values that differ by lane (one accumulator each); they depend on the variable."""
        dependent = depends_on(ops, [self.iv, *(v for m in per_lane for v in m)])
        em = self.em
        extra = per_lane or [{}] * self.width
        self.lanes = [
            {**mapping, self.iv: em.add(self.start, lane), **extra[lane]}
            for lane in range(self.width)
        ]
        for op in ops:
            if isinstance(op, loop.YieldOp):
                return [[m.get(v, v) for v in op.arguments] for m in self.lanes]
            if not _uses(op, dependent):
                shared = dict(self.lanes[0])
                em.op(op.clone(value_mapper=shared))
                for lane_map in self.lanes:
                    lane_map.update({r: shared[r] for r in op.results})
            elif isinstance(op, memref.LoadOp) and self._vector(op.indices, dependent):
                self._load(op)
            elif (
                isinstance(op, memref.StoreOp)
                or (isinstance(op, memref.AtomicRMWOp) and not op.result.uses and self.width > 1)
            ) and self._vector(op.indices, dependent):
                values = [m.get(op.value, op.value) for m in self.lanes]
                indices = [self.lanes[0].get(i, i) for i in op.indices]
                target = self.lanes[0].get(op.memref, op.memref)
                if isinstance(op, memref.AtomicRMWOp):
                    em.op(tile.VectorAtomicAddOp(values, target, indices))
                elif self.width == 1:
                    em.op(memref.StoreOp.get(values[0], target, indices))
                else:
                    em.op(tile.VectorStoreOp(values, target, indices))
            else:
                for lane_map in self.lanes:
                    em.op(op.clone(value_mapper=lane_map))
        return []

    def _vector(self, indices: Sequence[SSAValue], dependent: set[SSAValue]) -> bool:
        """True when the access is contiguous along the lanes and aligned to their width."""
        return contiguous_alignment(indices, self.iv, dependent) >= self.width

    def _load(self, op: memref.LoadOp) -> None:
        indices = [self.lanes[0].get(i, i) for i in op.indices]
        values = self.cached_load(op, indices)
        if values is None:
            source = self.lanes[0].get(op.memref, op.memref)
            values = self.em.load(source, indices, self.width, op in self.evict_first)
        for lane_map, v in zip(self.lanes, values, strict=True):
            lane_map[op.res] = v


def _uses(op: Operation, dependent: set[SSAValue]) -> bool:
    return any(o in dependent for inner in op.walk() for o in inner.operands)


def vector_width(ops: Iterable[Operation], iv: SSAValue, extent: int, wanted: int) -> int:
    """Returns the widest vector width ≤ `wanted` that every contiguous access along `iv` allows
    (aligned start and last dimension, dividing the extent of `iv`); 1 when none is contiguous."""
    ops = list(ops)
    dependent = depends_on(ops, [iv])
    width = wanted
    contiguous = False
    for op in (o for top in ops for o in top.walk()):
        if not isinstance(op, memref.LoadOp | memref.StoreOp | memref.AtomicRMWOp):
            continue
        alignment = contiguous_alignment(op.indices, iv, dependent)
        if alignment:
            contiguous = True
            t = op.memref.type
            assert isinstance(t, MemRefType)
            width = min(width, alignment, 16 // element_bytes(t.element_type))
            while t.get_shape()[-1] % width:
                width //= 2
    if not contiguous:
        return 1
    while extent % width:
        width //= 2
    return max(width, 1)


def element_bytes(t: Attribute) -> int:
    """Returns the size in bytes of an element type (a mask, i1, is stored as a byte)."""
    return max(t.bitwidth // 8, 1)  # type: ignore[attr-defined]
