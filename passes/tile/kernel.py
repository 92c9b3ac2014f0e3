"""Creating a `tile.kernel` for a `loop.kernel` and swapping it in."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Block, Region
from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.emit import Emitter, Mapping


def new_kernel(
    op: loop.KernelOp,
    grid: Sequence[int],
    block: Sequence[int],
    cluster: Sequence[int] | None = None,
) -> tuple[tile.KernelOp, Emitter, Mapping]:
    """Returns an empty tile kernel with `op`'s buffers and plan (launched in clusters of
    `cluster` blocks, where given), an emitter at its body, and the map from `op`'s buffer
    arguments to the new kernel's."""
    body = Block(arg_types=[a.type for a in op.body.block.args])
    for old, new in zip(op.body.block.args, body.args, strict=True):
        if old.name_hint:
            new.name_hint = old.name_hint
    kernel = tile.KernelOp(op.sym_name.data, grid, block, Region(body), cluster)
    if tile.PLAN in op.attributes:  # shown on the tile kernel for reading
        kernel.attributes[tile.PLAN] = op.attributes[tile.PLAN]
    return kernel, Emitter(body), dict(zip(op.body.block.args, body.args, strict=True))


def replace_kernel(rewriter: PatternRewriter, old: loop.KernelOp, new: tile.KernelOp) -> None:
    """Replaces a loop kernel by its scheduled tile kernel."""
    rewriter.replace(old, new, new_results=[])
