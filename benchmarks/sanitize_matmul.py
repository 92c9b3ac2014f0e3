"""Runs every matmul ladder step and the odd-shape matmul programs once, for compute-sanitizer.

Usage: compute-sanitizer --tool memcheck --error-exitcode 1 python benchmarks/sanitize_matmul.py
[--match WORD,WORD] (only the programs whose name or pipeline contains one of the words, e.g.
`copy=tma`).
Each kernel also has its output checked against float64 numpy; small shapes keep it fast. Each
ladder step runs at shapes that are not tile multiples (`ODD_SHAPES`): rows of 65 floats
(scalar copies), of 68 (16-byte copies whose last tile runs past the data), and a K long
enough for split-K.
"""

from __future__ import annotations

import argparse
import os
import sys

from ladder import LADDER

from tinyopt.backends.check import (
    device_inputs,
    errors_against_reference,
    graph_function,
    tolerance,
)
from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.compiler import lower

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import CASES, TF32_TOLERANCE, matmul_plain  # noqa: E402


ODD_SHAPES = ((257, 131, 65), (257, 132, 68), (65, 136, 2056))
"""(M, N, K) each ladder step runs at; the TMA steps (copy=tma, mma=wgmma) only where the rows
are multiples of 16 bytes (`Step.runs_at`)."""


def programs() -> list[tuple[str, str, str, float | None]]:
    """Returns (name, program, pipeline, tolerance or None for the output type's): each
    ladder step at odd shapes, then test matmuls (dual GEMMs, skinny and FP8 GEMMs too)."""
    out = []
    for step in LADDER:
        for m, n, k in ODD_SHAPES:
            if not step.runs_at(m, n, k):
                continue  # the test programs cover TMA at other odd shapes
            name = f"{step.name} {m}x{n}x{k}"
            text = matmul_plain(m, n, k, step.dtype, relu=step.relu)
            out.append((name, text, step.pipeline, TF32_TOLERANCE if step.tf32 else None))
    matmuls = [
        c
        for c in CASES
        if any(
            w in c.id
            for w in (
                "matmul",
                "bmm",
                "linear",
                "swiglu",
                "gated",
                "skinny",
                "fp8",
                "wgmma",
                "mma_sync",
            )
        )
    ]
    out += [(c.id, c.text, c.pipeline, c.tolerance) for c in matmuls]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--match", default="", help="comma-separated words a name must contain")
    words = [w for w in parser.parse_args().match.split(",") if w]
    failures = 0
    for name, text, pipeline, limit in programs():
        if words and not any(w in f"{name} {pipeline}" for w in words):
            continue
        program, module = lower(text, pipeline)
        graph = graph_function(program)
        inputs, arrays = device_inputs(graph, seed=3)
        outputs = compile_module(module).function(graph.sym_name.data)(*arrays)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        errors = errors_against_reference(graph, outputs, inputs)
        ok = all(e <= (limit or tolerance(graph)) for e in errors)
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}: {max(errors):.1e}", flush=True)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
