"""Refusing a module that an earlier pass of the pipeline has not lowered yet."""

from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.dialects import loop, tile


def refuse_graph_ops(module: ModuleOp, pass_name: str) -> None:
    """Raises a diagnostic naming the first `graph` op left in the module: the tile-level passes
    take loop kernels, which `fuse` makes of graph functions, and would otherwise leave a graph
    function as it is without a word (`-p to-cuda,fuse` exited 0 and printed loop IR). Kernels
    are not searched (they hold no graph ops): only what else the module holds."""
    for top in module.ops:
        if isinstance(top, loop.KernelOp | tile.KernelOp | tile.CudaKernelOp):
            continue
        for op in top.walk():
            if op.dialect_name() == "graph":
                if isinstance(top, ModuleOp):  # fuse lowers the functions of the top module
                    raise DiagnosticException(
                        f"{pass_name}: '{op.name}' is inside a nested builtin.module, which fuse "
                        "does not enter: put the graph functions at the top level of the module"
                    )
                name = top.properties.get("sym_name")
                where = f" in @{name.data}" if isinstance(name, StringAttr) else ""
                raise DiagnosticException(
                    f"{pass_name}: the module still has '{op.name}'{where}: fuse lowers graph "
                    "functions to loop kernels, before tile and to-cuda (-p fuse,tile,to-cuda)"
                )
