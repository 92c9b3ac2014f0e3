"""Compiles one test program and runs it a few times on torch CUDA tensors (for ncu, sanitizers).

Usage: python benchmarks/run_once.py PROGRAM ARGS... [--pipeline P] [--runs N]
PROGRAM is a generator of tests/programs.py (e.g. `matmul_relu 4096 4096 4096`); True and False
are booleans (`matmul_plain 4096 4096 4096 f32 kn False`).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import torch

from tinyopt.backends.check import graph_function
from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.compiler import lower

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
import programs  # noqa: E402

TORCH_TYPES = {
    "f32": torch.float32,
    "f16": torch.float16,
    "bf16": torch.bfloat16,
    "f8E4M3FN": torch.float8_e4m3fn,
    "f8E5M2": torch.float8_e5m2,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("program")
    parser.add_argument("args", nargs="*")
    parser.add_argument("--pipeline", default="fuse,tile,to-cuda")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    words = {"True": True, "False": False}
    values = [int(a) if a.isdigit() else words.get(a, a) for a in args.args]
    program, module = lower(getattr(programs, args.program)(*values), args.pipeline)
    graph = graph_function(program)
    inputs = []
    for t in graph.function_type.inputs:
        dtype = TORCH_TYPES[str(t.element_type)]
        inputs.append(torch.randn(*t.get_shape(), device="cuda").to(dtype))
    fn = compile_module(module, poison=False).function(graph.sym_name.data)
    for _ in range(args.runs):
        out = fn(*inputs)
    torch.cuda.synchronize()
    first = out[0] if isinstance(out, tuple) else out
    print(args.program, values, "finite:", bool(np.isfinite(first.float().cpu().numpy()).all()))


if __name__ == "__main__":
    main()
