"""xDSL's common subexpression elimination, with the same decisions in less time.

The tile pass runs CSE over every kernel it emits (tens of thousands of ops for a Llama block),
and xDSL's `CSEDriver` spent most of its time hashing: each lookup builds an `OperationInfo`
whose hash (name, attributes, properties, result types, operands) is computed again by every
`__eq__`, and each region copies the whole table of known ops. Here an op's hash is computed
once per lookup (an op in the table never changes: CSE only rewires the operands of ops it has
not reached yet) and nested regions chain their tables instead of copying them. Lookups find
the same op: a table never holds two equivalent ops, so which scope is probed first does not
matter. The walk, the side-effect checks, the replacements and the erasures are xDSL's; the
checks read an op's effects from one collection (xDSL collected them up to three times, each a
walk of the op's regions for a loop) and its class's traits from a table.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from xdsl.ir import Block, Operation, SSAValue, Use
from xdsl.traits import (
    EffectInstance,
    IsolatedFromAbove,
    IsTerminator,
    MemoryEffect,
    MemoryEffectKind,
    SymbolOpInterface,
)
from xdsl.transforms.common_subexpression_elimination import (
    CSEDriver,
    OperationInfo,
    has_other_side_effecting_op_in_between,
)


def _result_only_effects(op: Operation, effects: AbstractSet[EffectInstance] | None) -> bool:
    """xDSL's `result_only_effects(op)` (dead_code_elimination.py), given the op's effects:
    none observable beyond its results (reads, and allocations of values it defines)."""
    return effects is not None and all(
        e.kind == MemoryEffectKind.READ
        or (
            e.kind == MemoryEffectKind.ALLOC
            and isinstance(v := e.value, SSAValue)
            and op.is_ancestor(v.owner)
        )
        for e in effects
    )


def _effects(op: Operation, traits: list[MemoryEffect]) -> set[EffectInstance] | None:
    """xDSL's `get_effects(op)` given the op class's memory-effect traits (`traits`): the
    union of their effects, None where the op has none or one cannot tell."""
    if not traits:
        return None
    effects: set[EffectInstance] = set()
    for trait in traits:
        trait_effects = trait.get_effects(op)
        if trait_effects is None:
            return None
        effects.update(trait_effects)
    return effects


class OpTraits:
    """The traits CSE and DCE read of an op, by its class (traits belong to the class): whether
    it is a terminator, whether a symbol (`is_trivially_dead` spares both), and its
    memory-effect traits. Each class is looked up once per pass application."""

    def __init__(self) -> None:
        self._table: dict[type[Operation], tuple[bool, bool, list[MemoryEffect]]] = {}

    def of(self, op_type: type[Operation]) -> tuple[bool, bool, list[MemoryEffect]]:
        traits = self._table.get(op_type)
        if traits is None:
            traits = (
                op_type.has_trait(IsTerminator),
                op_type.has_trait(SymbolOpInterface),
                op_type.get_traits_of_type(MemoryEffect),
            )
            self._table[op_type] = traits
        return traits

    def is_trivially_dead(self, op: Operation) -> bool:
        """xDSL's `is_trivially_dead(op)`: no result used, not a terminator nor a symbol, and
        no effect observable beyond its results."""
        if any(result.first_use is not None for result in op.results):
            return False
        is_terminator, is_symbol, effect_traits = self.of(type(op))
        return (
            not is_terminator
            and not is_symbol
            and _result_only_effects(op, _effects(op, effect_traits))
        )


class _Info(OperationInfo):
    """`OperationInfo` with its hash computed once, at construction."""

    def __init__(self, op: Operation) -> None:
        self.op = op
        self._hash = OperationInfo.__hash__(self)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, _Info)
            and self._hash == other._hash
            and self.name == other.name
            and self.op.attributes == other.op.attributes
            and self.op.properties == other.op.properties
            and self.op.operands == other.op.operands
            and self.op.result_types == other.op.result_types
            and all(
                s.is_structurally_equivalent(o)
                for s, o in zip(self.op.regions, other.op.regions, strict=True)
            )
        )


class _KnownOps:
    """xDSL's `KnownOps` as a chain of scopes: a nested region's table sees its parents'.

    Each scope also keeps the values its ops take as operands (`_operands`), so that
    `_replace_and_delete` can skip looking up the users of a result no op in the table uses:
    an op equal to such a user would have that result among its operands."""

    def __init__(self, parent: _KnownOps | None = None) -> None:
        self._known_ops: dict[_Info, Operation] = {}
        self._operands: set[SSAValue] = set()
        self._parent = parent

    def add(self, info: _Info, op: Operation) -> None:
        """Record `op` under `info` (ops in the table are never changed afterwards)."""
        self._known_ops[info] = op
        self._operands.update(op.operands)

    def uses(self, value: SSAValue) -> bool:
        """Whether some op in the table, in this scope or a parent's, has `value` as an
        operand."""
        scope: _KnownOps | None = self
        while scope is not None:
            if value in scope._operands:
                return True
            scope = scope._parent
        return False

    def find(self, info: _Info) -> Operation | None:
        scope: _KnownOps | None = self
        while scope is not None:
            found = scope._known_ops.get(info)
            if found is not None:
                return found
            scope = scope._parent
        return None

    def __contains__(self, k: Operation) -> bool:
        return self.find(_Info(k)) is not None

    def get(self, k: Operation, default: None = None) -> Operation | None:
        return self.find(_Info(k))

    def __setitem__(self, k: Operation, v: Operation) -> None:
        self.add(_Info(k), v)


class FastCSEDriver(CSEDriver):
    """`CSEDriver` over `_KnownOps`; `_simplify_operation` is xDSL's, looking an op up and
    recording it with one hash."""

    def __init__(self) -> None:
        super().__init__(_known_ops=_KnownOps())  # type: ignore[arg-type]
        self._traits = OpTraits()

    def _replace_and_delete(self, op: Operation, existing: Operation):
        known = self._known_ops

        def was_visited(use: Use) -> bool:
            return use.operation not in known

        for o, n in zip(op.results, existing.results, strict=True):
            # A user equal to an op in the table would share its operand `o`: where no op
            # there uses `o`, no user is in the table (the lookups' answer, without them).
            if not known.uses(o) or all(was_visited(u) for u in o.uses):
                o.replace_all_uses_with(n)
        if all(not r.uses for r in op.results):
            self._mark_erasure(op)

    def _simplify_operation(self, op: Operation):
        # xDSL's `is_trivially_dead`, `is_side_effect_free` and `only_has_effect(op, READ)`
        # each collect the op's effects again (the whole body of a loop or an `if`, for one);
        # nothing changes the op between them, so they are decided here from one collection.
        is_terminator, is_symbol, effect_traits = self._traits.of(type(op))
        if is_terminator:
            return
        effects = _effects(op, effect_traits)
        if (
            all(result.first_use is None for result in op.results)
            and not is_symbol
            and _result_only_effects(op, effects)
        ):
            self._mark_erasure(op)
            return
        if any(len(region.blocks) > 1 for region in op.regions):
            return
        if effects is None:
            return  # unknown effects: neither side-effect free nor only reading
        known = self._known_ops
        if effects:  # not side-effect free
            if not all(e.kind == MemoryEffectKind.READ for e in effects):
                return
            info = _Info(op)
            if existing := known.find(info):
                if (
                    op.parent_block() is existing.parent_block()
                    and not has_other_side_effecting_op_in_between(existing, op)
                ):
                    self._replace_and_delete(op, existing)
                    return
            known.add(info, op)
            return
        info = _Info(op)
        if existing := known.find(info):
            self._replace_and_delete(op, existing)
            return
        known.add(info, op)

    def _simplify_block(self, block: Block):
        for op in block.ops:
            if op.regions:
                if op.has_trait(IsolatedFromAbove, value_if_unregistered=True):
                    old_scope = self._known_ops
                    self._known_ops = _KnownOps()  # type: ignore[assignment]
                    for region in op.regions:
                        self._simplify_region(region)
                    self._known_ops = old_scope
                else:
                    for region in op.regions:
                        self._simplify_region(region)
            self._simplify_operation(op)

    def _simplify_region(self, region):
        if not region.blocks:
            return
        if len(region.blocks) == 1:
            old_scope = self._known_ops
            self._known_ops = _KnownOps(old_scope)  # type: ignore[arg-type,assignment]
            self._simplify_block(region.block)
            self._known_ops = old_scope


def cse(op: Operation) -> None:
    """Runs CSE over the regions of `op`, as xDSL's `cse(op)` does."""
    FastCSEDriver().simplify(op)
