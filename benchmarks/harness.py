"""What the benchmark scripts share: timing, compiling a program, error, the result table."""

from __future__ import annotations

from collections.abc import Callable

import torch
from triton.testing import do_bench

from tinyopt.backends.cuda.runtime import HostFunction, compile_module
from tinyopt.compiler import DEFAULT_PIPELINE, lower


def median_ms(fn: Callable[[], object], warmup: int = 50, rep: int = 300) -> float:
    """Returns the median time of `fn` in milliseconds (`warmup`, `rep`: milliseconds).

    tinyopt is timed as a bound call (`HostFunction.bind`: buffers allocated and launch
    parameters fixed once, so a call only queues its kernels); references as eager torch calls.
    """
    return do_bench(fn, warmup=warmup, rep=rep, return_mode="median")


def compile_program(text: str, pipeline: str = DEFAULT_PIPELINE) -> HostFunction:
    """Lowers a graph program and returns its host function, unpoisoned and asynchronous."""
    program, module = lower(text, pipeline)
    name = next(op.sym_name.data for op in program.ops)
    return compile_module(module, poison=False, sync=False).function(name)


def rel_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """Returns ‖out − ref‖ / ‖ref‖ in float64 (NaN if `out` is not finite)."""
    out64 = out.double()
    if not torch.isfinite(out64).all():
        return float("nan")
    return ((out64 - ref).norm() / ref.norm()).item()


def publish(lines: list[str], out: str | None) -> None:
    """Prints the table and, when `out` is a path, writes it there too."""
    text = "\n".join(lines)
    print(text)
    if out:
        with open(out, "w") as f:
            f.write(text + "\n")
