"""Refusing a module that an earlier pass of the pipeline has not lowered yet."""

from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException


def refuse_graph_ops(module: ModuleOp, pass_name: str) -> None:
    """Raises a diagnostic naming the first `graph` op left in the module: the tile-level passes
    take loop kernels, which `fuse` makes of graph functions, and would otherwise leave a graph
    function as it is without a word (`-p to-cuda,fuse` exited 0 and printed loop IR)."""
    for op in module.walk():
        if op.dialect_name() == "graph":
            function = op.parent_op()
            while function is not None and "sym_name" not in function.properties:
                function = function.parent_op()
            name = function.properties["sym_name"] if function is not None else None
            where = f" in @{name.data}" if name is not None else ""  # type: ignore[attr-defined]
            raise DiagnosticException(
                f"{pass_name}: the module still has '{op.name}'{where}: fuse lowers graph "
                "functions to loop kernels, before tile and to-cuda (-p fuse,tile,to-cuda)"
            )
