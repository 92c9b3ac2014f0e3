"""The `to-cuda` pass: each `tile.kernel` becomes a `tile.cuda_kernel` holding its CUDA C."""

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.backends.cuda.printer import printed_kernel
from tinyopt.dialects import loop, tile
from tinyopt.passes.pass_order import refuse_graph_ops
from tinyopt.passes.tile.limits import fit_launch


@dataclass(frozen=True)
class ToCudaPass(ModulePass):
    """Prints each top-level `tile.kernel` as CUDA C into a `tile.cuda_kernel` of the same name.

    The launch shape is kept; `smem` is the bytes of dynamic shared memory the kernel's `tile.alloc
    dynamic` buffers need (0 when all are static), and `tile.tensor_maps` is carried over. A
    `loop.kernel` (not tiled), a `graph` op (not fused) or an op without a CUDA C form raises
    a `DiagnosticException` naming it, before the module is changed. `pdl=1` marks every kernel
    for programmatic dependent launch (docs/knobs.md).
    """

    name = "to-cuda"

    pdl: int = 1

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.pdl not in (0, 1):
            raise DiagnosticException(f"to-cuda: pdl must be 0 or 1, got {self.pdl}")
        refuse_graph_ops(op, "to-cuda")
        kernels: list[tile.KernelOp] = []
        for kernel in op.ops:
            if isinstance(kernel, loop.KernelOp):
                raise DiagnosticException(
                    f"to-cuda: cannot print 'loop.kernel' @{kernel.sym_name.data}: "
                    "it was not tiled (run the tile pass first)"
                )
            if isinstance(kernel, tile.KernelOp):
                kernels.append(kernel)
        # Re-grids tile IR written past the launch limits; each kernel's index range, as the
        # checks found it, sets its printed index type.
        ranges = [fit_launch(kernel, "to-cuda") for kernel in kernels]
        # Every kernel is printed before any is replaced, so a failure leaves the module as is.
        printed_kernels = [
            printed_kernel(kernel, bool(self.pdl), indices)
            for kernel, indices in zip(kernels, ranges, strict=True)
        ]
        for kernel, (source, smem) in zip(kernels, printed_kernels, strict=True):
            printed = tile.CudaKernelOp(
                kernel.sym_name.data,
                kernel.grid_size,
                kernel.block_size,
                smem,
                source,
                bool(self.pdl),
            )
            if tile.TENSOR_MAPS in kernel.attributes:
                printed.attributes[tile.TENSOR_MAPS] = kernel.attributes[tile.TENSOR_MAPS]
            Rewriter.replace_op(kernel, printed)
