"""What tinyopt adds to xDSL: its dialects, passes and the `cuda` output target.

`TINYOPT_UNIVERSE` is registered as the `xdsl.universe` entry point (pyproject.toml), so
`xdsl-opt` and every other xDSL tool in the environment see tinyopt's dialects and passes.
Each getter imports its module only when called, so one module failing to import does not
hide the others.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Dialect
from xdsl.passes import ModulePass
from xdsl.universe import Universe
from xdsl.utils.exceptions import DiagnosticException
from xdsl.utils.target import Target


def get_graph() -> Dialect:
    """Return the graph dialect (tensors, value semantics)."""
    from tinyopt.dialects.graph import Graph

    return Graph


def get_loop() -> Dialect:
    """Return the loop dialect (one kernel per future GPU kernel)."""
    from tinyopt.dialects.loop import Loop

    return Loop


def get_tile() -> Dialect:
    """Return the tile dialect (GPU mapping)."""
    from tinyopt.dialects.tile import Tile

    return Tile


def get_decompose() -> type[ModulePass]:
    """Return the pass rewriting composite graph ops into primitives."""
    from tinyopt.passes.graph_to_loop.decompose import DecomposePass

    return DecomposePass


def get_fuse() -> type[ModulePass]:
    """Return the pass grouping graph primitives into loop kernels."""
    from tinyopt.passes.graph_to_loop.fuse import FusePass

    return FusePass


def get_online_softmax() -> type[ModulePass]:
    """Return the pass merging softmax's max and sum reductions into one online reduction."""
    from tinyopt.passes.loop_rewrites.online_softmax import OnlineSoftmaxPass

    return OnlineSoftmaxPass


def get_flash_attention() -> type[ModulePass]:
    """Return the pass fusing attention's score, softmax and PV kernels into one kernel."""
    from tinyopt.passes.loop_rewrites.flash_attention import FlashAttentionPass

    return FlashAttentionPass


def get_welford() -> type[ModulePass]:
    """Return the pass merging the mean and variance reductions into one Welford reduction."""
    from tinyopt.passes.loop_rewrites.welford import WelfordPass

    return WelfordPass


def get_check_assoc() -> type[ModulePass]:
    """Return the analysis annotating fold step functions with their associativity verdict."""
    from tinyopt.passes.loop_rewrites.associativity import CheckAssocPass

    return CheckAssocPass


def get_tile_pass() -> type[ModulePass]:
    """Return the pass mapping loop kernels onto the GPU."""
    from tinyopt.passes.tile import TilePass

    return TilePass


def get_apply_tuned() -> type[ModulePass]:
    """Return the pass attaching each loop kernel's knobs from the tuning cache."""
    from tinyopt.passes.autotune.apply_tuned import ApplyTunedPass

    return ApplyTunedPass


def get_plan_pass() -> type[ModulePass]:
    """Return the pass attaching each loop kernel's schedule plan (rule and resolved knobs)."""
    from tinyopt.passes.tile.tile_pass import PlanPass

    return PlanPass


def get_to_cuda() -> type[ModulePass]:
    """Return the pass printing tile kernels as CUDA C."""
    from tinyopt.passes.to_cuda import ToCudaPass

    return ToCudaPass


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
            raise DiagnosticException(
                "the cuda target needs tile.cuda_kernel ops; run the to-cuda pass first"
            )
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


def get_cuda_target() -> type[Target]:
    """Return the target printing the CUDA C held by `tile.cuda_kernel` ops."""
    return CudaTarget


TINYOPT_UNIVERSE = Universe(
    all_dialects={"graph": get_graph, "loop": get_loop, "tile": get_tile},
    all_passes={
        "decompose": get_decompose,
        "fuse": get_fuse,
        "apply-tuned": get_apply_tuned,
        "plan": get_plan_pass,
        "tile": get_tile_pass,
        "to-cuda": get_to_cuda,
        "online-softmax": get_online_softmax,
        "welford": get_welford,
        "flash-attention": get_flash_attention,
        "check-assoc": get_check_assoc,
    },
    all_targets={"cuda": get_cuda_target},
)
