"""Reduces a failing graph program to a smaller one that still fails (greedy, op by op).

Two kinds of step are tried, smallest result first, and the first that still fails is kept,
until none does: returning an earlier value instead of the results (everything after it
becomes dead), and bypassing an op by one of its operands of the same type. Dead ops and
unused arguments are removed after each step, so every candidate is a valid program.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

from xdsl.dialects import func
from xdsl.dialects.builtin import FunctionType, ModuleOp
from xdsl.ir import Operation, SSAValue

from tinyopt.backends import check
from tinyopt.compiler import parse


def _prune(module: ModuleOp) -> str:
    """Erase dead ops and unused arguments of the module's function; return the text."""
    function = check.graph_function(module)
    block = function.body.block
    for op in reversed(list(block.ops)):
        if not isinstance(op, func.ReturnOp) and not any(r.uses for r in op.results):
            block.erase_op(op)
    for arg in reversed(list(block.args)):
        if not arg.uses:
            block.erase_arg(arg)
    returned = block.last_op
    assert isinstance(returned, func.ReturnOp)
    function.function_type = FunctionType.from_lists(
        [a.type for a in block.args], [v.type for v in returned.arguments]
    )
    return str(module)


def _returning(text: str, index: int) -> str:
    """Return `text` with the function returning the result of its `index`-th op only."""
    module = parse(text)
    block = check.graph_function(module).body.block
    value = list(block.ops)[index].results[0]
    returned = block.last_op
    assert isinstance(returned, func.ReturnOp)
    block.erase_op(returned)
    block.add_op(func.ReturnOp(value))
    return _prune(module)


def _bypassing(text: str, index: int, operand: int) -> str:
    """Return `text` with its `index`-th op replaced by that op's `operand`-th operand."""
    module = parse(text)
    op: Operation = list(check.graph_function(module).body.block.ops)[index]
    replacement: SSAValue = op.operands[operand]
    op.results[0].replace_all_uses_with(replacement)
    return _prune(module)


def _candidates(text: str) -> Iterator[str]:
    """Yield the smaller programs one step away from `text`, smallest first."""
    ops = list(check.graph_function(parse(text)).body.block.ops)[:-1]
    for index in range(len(ops)):
        yield _returning(text, index)
    for index, op in enumerate(ops):
        for operand, value in enumerate(op.operands):
            if value.type == op.results[0].type:
                yield _bypassing(text, index, operand)


def op_count(text: str) -> int:
    """Return how many ops the function of `text` holds (its return excluded)."""
    return len(list(check.graph_function(parse(text)).body.block.ops)) - 1


def reduce_program(text: str, fails: Callable[[str], bool], seconds: float = 60.0) -> str:
    """Return a program no larger than `text` on which `fails` still holds.

    `fails(text)` must be true on entry; the search stops after `seconds`.
    """
    deadline = time.monotonic() + seconds
    current = text
    progress = True
    while progress and time.monotonic() < deadline:
        progress = False
        size = op_count(current)
        for candidate in _candidates(current):
            if time.monotonic() >= deadline:
                break
            if op_count(candidate) < size and fails(candidate):
                current, progress = candidate, True
                break
    return current
