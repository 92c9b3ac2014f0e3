"""Runs random programs through the full pipeline on the GPU against the float64 reference.

    python tests/fuzz/run_gpu.py [-n 500] [--seed 0] [--failures DIR]

Each program (`generate.programs`) is lowered with random knobs (`generate.pipelines`),
compiled with NVRTC, run on random inputs and compared with `run_reference` in float64 at
the output dtype's tolerance (`tinyopt.backends.check.TOLERANCES`). Knob combinations a pass
refuses are counted, not failed. Failing programs are written to DIR with their pipeline on
the first line (the format of tests/fuzz/regressions/). Exits 1 when any program failed.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections import Counter
from pathlib import Path

from generate import pipelines, programs
from hypothesis import HealthCheck, Phase, given, settings
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.backends import check
from tinyopt.backends.cuda.nvrtc import gpu_available
from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.compiler import apply_pipeline, parse


def run_one(text: str, pipeline: str, seed: int) -> str | None:
    """Returns None when the program matches the reference, else why it failed.

    Raises DiagnosticException when a pass refuses the program or its knobs.
    """
    program = parse(text)
    graph = check.graph_function(program).clone()
    module = apply_pipeline(program, pipeline)
    inputs, device_inputs = check.device_inputs(graph, seed)
    outputs = compile_module(module)["fuzz"](*device_inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    errors = check.errors_against_reference(graph, outputs, inputs)
    types = [check.element_type(t) for t in graph.function_type.outputs]
    bad = [
        f"output {i}: {e:.3e} > {check.TOLERANCES[t]:.0e}"
        for i, (e, t) in enumerate(zip(errors, types))
        if not e <= check.TOLERANCES[t]
    ]
    return "; ".join(bad) or None


def main() -> int:
    """Runs the campaign and prints a summary; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=500, help="number of programs")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random inputs")
    parser.add_argument("--failures", type=Path, default=Path("fuzz_failures"))
    args = parser.parse_args()
    if not gpu_available():
        print("run_gpu.py: no CUDA GPU available", file=sys.stderr)
        return 1
    stats: Counter[str] = Counter()

    @settings(
        max_examples=args.n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(programs(), pipelines())
    def campaign(text: str, pipeline: str) -> None:
        stats["cases"] += 1
        try:
            problem = run_one(text, pipeline, args.seed)
        except DiagnosticException:
            stats["refused"] += 1
            return
        except Exception:  # every other exception is a bug: record it and go on
            problem = traceback.format_exc()
        if problem is None:
            stats["passed"] += 1
            return
        stats["failed"] += 1
        args.failures.mkdir(exist_ok=True)
        path = args.failures / f"case{stats['cases']:04d}.mlir"
        comment = "\n".join(f"// {line}" for line in problem.splitlines())
        path.write_text(f"// PIPELINE: {pipeline}\n{comment}\n{text}")
        print(f"FAIL {path}: {problem.splitlines()[-1]}", flush=True)

    campaign()
    print(
        f"fuzz on GPU: {stats['cases']} programs, {stats['passed']} passed, "
        f"{stats['refused']} refused by a pass, {stats['failed']} failed"
    )
    return 1 if stats["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
