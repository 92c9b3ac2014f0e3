"""xDSL's common subexpression elimination, with the same decisions in less time.

The tile pass runs CSE over every kernel it emits (tens of thousands of ops for a Llama block),
and xDSL's `CSEDriver` spent most of its time hashing: each lookup builds an `OperationInfo`
whose hash (name, attributes, properties, result types, operands) is computed again by every
`__eq__`, and each region copies the whole table of known ops. Here an op's hash is computed
once per lookup (an op in the table never changes: CSE only rewires the operands of ops it has
not reached yet) and nested regions chain their tables instead of copying them. Lookups find
the same op: a table never holds two equivalent ops, so which scope is probed first does not
matter. The walk, the side-effect checks, the replacements and the erasures are xDSL's.
"""

from __future__ import annotations

from xdsl.ir import Block, Operation, SSAValue, Use
from xdsl.traits import (
    IsolatedFromAbove,
    IsTerminator,
    MemoryEffectKind,
    is_side_effect_free,
    only_has_effect,
)
from xdsl.transforms.common_subexpression_elimination import (
    CSEDriver,
    OperationInfo,
    has_other_side_effecting_op_in_between,
)
from xdsl.transforms.dead_code_elimination import is_trivially_dead


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
        if op.has_trait(IsTerminator):
            return
        if is_trivially_dead(op):
            self._mark_erasure(op)
            return
        if any(len(region.blocks) > 1 for region in op.regions):
            return
        known = self._known_ops
        if not is_side_effect_free(op):
            if not only_has_effect(op, MemoryEffectKind.READ):
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
