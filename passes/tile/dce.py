"""xDSL's dead code elimination, removing the same ops in less time.

xDSL's `dce` is a pattern walker applied until nothing changes: it checks every op of the
module at least twice (the last sweep only confirms that nothing is left), through the pattern
rewriter's worklist and listeners. Here each op is checked once, and again only when erasing an
op may have made it dead: the ops defining the erased op's operands (its nested ops' included)
and its parent. The predicate is xDSL's (`is_trivially_dead`, of an op in a block; the traits
it reads looked up once per op class, `cse.OpTraits`), so the ops removed are the same: erasing
a dead op only takes uses and effects away, so an op dead at some point stays dead until
erased, and every order of erasures that leaves no dead op behind erases the same ops.
"""

from __future__ import annotations

from xdsl.ir import Operation, OpResult
from xdsl.rewriter import Rewriter

from tinyopt.passes.tile.cse import OpTraits


def dce(root: Operation) -> None:
    """Erases the trivially dead ops nested in `root`, as xDSL's `dce(root)` does."""
    # Popped from the end: the last op of the walk first, so users go before what they use.
    worklist = list(root.walk())
    traits = OpTraits()
    while worklist:
        op = worklist.pop()
        if op.parent is None or not traits.is_trivially_dead(op):
            continue  # erased already (itself or an enclosing op), the root, or alive
        defining = [
            value.op
            for nested in op.walk()
            for value in nested.operands
            if isinstance(value, OpResult)
        ]
        parent = op.parent_op()
        Rewriter.erase_op(op)
        worklist.extend(defining)
        if parent is not None:
            worklist.append(parent)
