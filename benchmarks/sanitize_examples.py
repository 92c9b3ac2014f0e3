"""Runs the example and test-program kernels under compute-sanitizer memcheck, racecheck, synccheck.

    python benchmarks/sanitize_examples.py [--tools memcheck,racecheck,synccheck] [--jobs 16]

The programs are examples/*.mlir, the cases of tests/programs.py whose work is small enough
for the sanitizers (`MAX_WORK`; the larger ones are listed as skipped), and, where PyTorch is
installed, the Llama block of examples/llama_block.py at a small size in f32 and bf16; then
`--variants` more per test program with random knob settings from the tuner's domain
(`tests/fuzz/generate.py`'s pipelines; the ones a pass refuses are dropped). A
process pool lowers them all once (NVRTC compiles into the on-disk cubin cache); then one
sanitizer process per tool runs this script with `--run`, which launches every program once
on random inputs and checks the outputs against the float64 reference. Prints per tool the
kernels run and the errors the sanitizer reports (racecheck's warnings too); exits 1 on any
sanitizer error, wrong result or failed run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ProcessPoolExecutor
from math import prod
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

MAX_WORK = 2**27
"""Largest work (result elements, times K for a matmul) of a test program run under the
sanitizers; the examples always run."""

TOOLS = ("memcheck", "racecheck", "synccheck")

Program = tuple[str, str, str, float | None]
"""(name, graph-level MLIR text, pipeline, tolerance — None: the output type's)."""

LLAMA_TOLERANCE = 5e-2
"""The block runs on N(0, 1) random weights here, not its own initialisation: attention scores
reach ~1e2 and bf16 rounding gives relative errors near 3e-2 (tests/test_llama.py checks the
block with its own weights against 2e-2)."""


def work(text: str) -> int:
    """Return the work of a graph program: its ops' result elements, times K for matmuls."""
    from xdsl.dialects.builtin import TensorType

    from tinyopt.backends.check import graph_function
    from tinyopt.compiler import parse
    from tinyopt.dialects import graph

    total = 0
    for op in graph_function(parse(text)).body.block.ops:
        for result in op.results:
            if isinstance(result.type, TensorType):
                elements = prod(result.type.get_shape())
                if isinstance(op, graph.MatmulOp | graph.LinearOp):
                    elements *= op.operands[0].type.get_shape()[-1]
                total += elements
    return total


def llama_programs() -> list[Program]:
    """Return the Llama example block at a small size in f32 and bf16 (none without torch)."""
    try:
        import torch
    except ImportError:
        return []

    from tinyopt.compiler import DEFAULT_PIPELINE
    from tinyopt.frontends.torch_fx import capture

    from programs import load_example

    llama = load_example("llama_block.py")
    out = []
    for dtype, name in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
        block = llama.block().to(dtype).eval()
        (x,) = llama.example_inputs()
        text = str(capture(block, x.to(dtype)).module)
        tolerance = LLAMA_TOLERANCE if dtype == torch.bfloat16 else None
        out.append((f"example_llama_block_{name}", text, DEFAULT_PIPELINE, tolerance))
    return out


def knob_pipelines(count: int, seed: int) -> list[str]:
    """Draw `count` pipelines with random tile knobs and rewrites (the fuzzer's strategy)."""
    from fuzz.generate import pipelines
    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as seeded

    drawn: list[str] = []

    @seeded(seed)
    @settings(
        max_examples=count,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(pipelines())
    def collect(pipeline: str) -> None:
        drawn.append(pipeline)

    if count:
        collect()
    return drawn[:count]


def programs(variants: int) -> tuple[list[Program], list[str]]:
    """Return the programs to sanitize and the names of those skipped as too large."""
    from programs import CASES, EXAMPLE_CASES

    chosen: list[Program] = [
        (case.id, case.text, case.pipeline, case.tolerance) for case in EXAMPLE_CASES
    ]
    small = [case for case in CASES if work(case.text) <= MAX_WORK]
    skipped = [case.id for case in CASES if case not in small]
    chosen += [(case.id, case.text, case.pipeline, case.tolerance) for case in small]
    knobs = iter(knob_pipelines(variants * len(small), seed=0))
    for case in small:
        for n in range(variants):
            chosen.append((f"{case.id}_variant{n}", case.text, next(knobs), case.tolerance))
    return chosen + llama_programs(), skipped


def lower(program: Program) -> tuple[str, str, str, float | None] | None:
    """Lower one program and compile its kernels for sm_90a; return (name, graph, lowered,
    tolerance).

    Returns None when a pass refuses the program's knobs.
    """
    from xdsl.utils.exceptions import DiagnosticException

    from tinyopt.backends.cuda.cache import cached_compile
    from tinyopt.compiler import lower as lower_text

    name, text, pipeline, tolerance = program
    try:
        _, module = lower_text(text, pipeline)
    except DiagnosticException:
        return None
    for op in module.ops:
        if op.name == "tile.cuda_kernel":
            cached_compile(op.properties["source"].data, op.properties["sym_name"].data, "sm_90a")
    return name, text, str(module), tolerance


def run_all(path: Path) -> int:
    """Run every lowered program of `path` once (the sanitized process); return the status."""
    from tinyopt.backends.check import (
        device_inputs,
        errors_against_reference,
        graph_function,
        tolerance,
    )
    from tinyopt.backends.cuda.runtime import compile_module
    from tinyopt.compiler import parse

    lowered: list[tuple[str, str, str, float | None]] = pickle.loads(path.read_bytes())
    kernels = failures = 0
    for name, text, module_text, accepted in lowered:
        graph = graph_function(parse(text))
        module = parse(module_text)
        inputs, arrays = device_inputs(graph, seed=5)
        try:
            outputs = compile_module(module).function(graph.sym_name.data)(*arrays)
        except Exception as exc:  # report it and keep sanitizing the other programs
            print(f"FAIL {name}: {type(exc).__name__}: {exc}", flush=True)
            failures += 1
            continue
        kernels += sum(op.name == "tile.cuda_kernel" for op in module.ops)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        errors = errors_against_reference(graph, outputs, inputs)
        if not all(e <= (accepted or tolerance(graph)) for e in errors):
            print(f"FAIL {name}: error {max(errors):.1e}", flush=True)
            failures += 1
    print(f"ran {kernels} kernels of {len(lowered)} programs, {failures} failed", flush=True)
    return 1 if failures else 0


def sanitize(tool: str, sanitizer: str, path: Path) -> tuple[int, int, int, bool, str]:
    """Run `--run` under one sanitizer tool.

    Returns (kernels run, errors, racecheck warnings, whether the run itself passed, output);
    errors is -1 when the sanitizer printed no summary.
    """
    # cuda.core probes each kernel's parameter count with driver calls that fail by design
    # (Kernel.bind): those host API errors are not errors of the kernels.
    command = [sanitizer, "--tool", tool, "--report-api-errors", "no", "--print-limit", "50"]
    command += [sys.executable, __file__, "--run", str(path)]
    result = subprocess.run(command, capture_output=True, text=True)
    output = result.stdout + result.stderr
    ran = re.search(r"ran (\d+) kernels of \d+ programs, (\d+) failed", output)
    errors, warnings = summary_counts(output)
    passed = ran is not None and ran.group(2) == "0" and result.returncode == 0
    return (int(ran.group(1)) if ran else 0), errors, warnings, passed, output


def summary_counts(output: str) -> tuple[int, int]:
    """Returns (errors, warnings) of a compute-sanitizer run from its summary line: memcheck
    and synccheck print `ERROR SUMMARY: n errors`, racecheck `RACECHECK SUMMARY: n hazards
    displayed (e errors, w warnings)`; errors is -1 when there is neither."""
    summary = re.search(r"ERROR SUMMARY: (\d+) error", output)
    hazards = re.search(r"RACECHECK SUMMARY: .*?\((\d+) errors?, (\d+) warnings?\)", output)
    if hazards:
        return int(hazards.group(1)), int(hazards.group(2))
    return (int(summary.group(1)) if summary else -1), 0


def main() -> int:
    """Lower everything once, run it under each sanitizer tool, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tools", default=",".join(TOOLS), help="comma-separated tools")
    parser.add_argument("--jobs", type=int, default=16, help="processes lowering programs")
    parser.add_argument(
        "--variants", type=int, default=1, help="random knob settings per test program"
    )
    parser.add_argument(
        "--sanitizer",
        default=shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer",
    )
    parser.add_argument("--run", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run is not None:
        return run_all(args.run)
    chosen, skipped = programs(args.variants)
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
        results = list(pool.map(lower, chosen))
    lowered = [r for r in results if r is not None]
    print(
        f"{len(lowered)} programs ({len(results) - len(lowered)} knob variants refused by a "
        f"pass; {len(skipped)} test programs too large: {', '.join(skipped)})"
    )
    status = 0
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "programs.pickle"
        path.write_bytes(pickle.dumps(lowered))
        print(f"{'tool':<10} {'kernels':>8} {'errors':>7} {'warnings':>9}  result")
        for tool in args.tools.split(","):
            kernels, errors, warnings, passed, output = sanitize(tool, args.sanitizer, path)
            ok = passed and errors == 0
            status |= not ok
            verdict = "ok" if ok else "FAILED"
            print(f"{tool:<10} {kernels:>8} {errors:>7} {warnings:>9}  {verdict}", flush=True)
            if not ok:
                print("\n".join(output.splitlines()[-60:]))
    return status


if __name__ == "__main__":
    sys.exit(main())
