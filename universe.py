"""What tinyopt adds to xDSL: its dialects, passes and the `cuda` output target.

`TINYOPT_UNIVERSE` is registered as the `xdsl.universe` entry point (pyproject.toml), so
`xdsl-opt` and every other xDSL tool in the environment see tinyopt's dialects and passes.
Each getter imports its module only when called, so one module failing to import does not
hide the others.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.universe import Universe
from xdsl.utils.exceptions import DiagnosticException
from xdsl.utils.target import Target


def _getter(module: str, name: str) -> Callable[[], Any]:
    """Returns a getter that imports `tinyopt.<module>` when called and returns its `name`."""
    return lambda: getattr(importlib.import_module(f"tinyopt.{module}"), name)


@dataclass(frozen=True)
class CudaTarget(Target):
    """Prints the CUDA C of every `tile.cuda_kernel`, each after a comment with its launch shape
    (and `pdl` when it is launched with programmatic stream serialization)."""

    name = "cuda"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        """Write each kernel's source to `output`; a module without kernels is an error."""
        from tinyopt.dialects.tile import CudaKernelOp

        kernels = [op for op in module.walk() if isinstance(op, CudaKernelOp)]
        if not kernels:
            raise DiagnosticException(_missing_step(module))
        for i, kernel in enumerate(kernels):
            separator = "\n" if i else ""
            grid = ", ".join(map(str, kernel.grid.get_values()))
            block = ", ".join(map(str, kernel.block.get_values()))
            pdl = " pdl" if kernel.pdl is not None else ""
            output.write(
                f"{separator}// kernel @{kernel.sym_name.data} grid ({grid}) "
                f"block ({block}) smem {kernel.smem.value.data}{pdl}\n"
            )
            output.write(kernel.source.data.rstrip("\n") + "\n")


def _missing_step(module: ModuleOp) -> str:
    """Say why a module has no `tile.cuda_kernel`: the first level it still holds, and the
    passes that lower it, or that it holds nothing to compile."""
    from xdsl.dialects import func
    from xdsl.dialects.builtin import TensorType

    levels = (
        ("tile.kernel", "to-cuda", "to-cuda"),
        ("loop.kernel", "tile and to-cuda", "tile,to-cuda"),
    )
    for name, passes, pipeline in levels:
        if found := [op for op in module.walk() if op.name == name]:
            symbol = found[0].properties.get("sym_name")
            where = f" @{symbol.data}" if symbol is not None else ""  # type: ignore[attr-defined]
            return (
                f"the cuda target prints tile.cuda_kernel ops, and this module has {name}{where}: "
                f"run {passes} on it (-p ...,{pipeline})"
            )
    for op in module.walk():
        if isinstance(op, func.FuncOp) and op.body.blocks:
            types = (*op.function_type.inputs.data, *op.function_type.outputs.data)
            if any(isinstance(t, TensorType) for t in types):
                return (
                    "the cuda target prints tile.cuda_kernel ops, and this module still has "
                    f"the graph function @{op.sym_name.data}: fuse lowers it to loop kernels, "
                    "before tile and to-cuda (-p fuse,tile,to-cuda)"
                )
    for op in module.walk():
        if not isinstance(op, func.FuncOp) or not op.body.blocks:
            continue
        if op.function_type.inputs.data and not op.function_type.outputs.data:
            return (
                f"nothing to compile: @{op.sym_name.data} returns nothing, so it has no kernel "
                "(a graph function's kernels compute the values it returns)"
            )
    return (
        "nothing to compile: the module has no graph function (a func.func with tensor "
        "arguments or results) and no kernels"
    )


TINYOPT_UNIVERSE = Universe(
    all_dialects={
        "graph": _getter("dialects.graph", "Graph"),
        "loop": _getter("dialects.loop", "Loop"),
        "tile": _getter("dialects.tile", "Tile"),
    },
    all_passes={
        "decompose": _getter("passes.graph_to_loop.decompose", "DecomposePass"),
        "fuse": _getter("passes.graph_to_loop.fuse", "FusePass"),
        "apply-tuned": _getter("passes.autotune.apply_tuned", "ApplyTunedPass"),
        "plan": _getter("passes.tile.tile_pass", "PlanPass"),
        "tile": _getter("passes.tile", "TilePass"),
        "to-cuda": _getter("passes.to_cuda", "ToCudaPass"),
        "online-softmax": _getter("passes.loop_rewrites.online_softmax", "OnlineSoftmaxPass"),
        "welford": _getter("passes.loop_rewrites.welford", "WelfordPass"),
        "flash-attention": _getter("passes.loop_rewrites.flash_attention", "FlashAttentionPass"),
        "check-assoc": _getter("passes.loop_rewrites.associativity", "CheckAssocPass"),
    },
    all_targets={"cuda": lambda: CudaTarget},
)
