"""Runs random programs through the full pipeline on the GPU against the float64 reference.

    python tests/fuzz/run_gpu.py [-n 500] [--seed 0] [--jobs 16] [--failures DIR] [--gather]

The programs (`generate.programs`) and their pipelines with random knobs (`generate.pipelines`)
are drawn first. A pool of `--jobs` processes lowers each one, compiles its kernels with NVRTC
into the on-disk cubin cache and computes the float64 reference on random inputs; the main
process loads the cubins, runs the program on the GPU and compares each float output at its
dtype's tolerance (`tinyopt.backends.check.TOLERANCES`) as the loop-level check does
(`generate.output_error`: the smaller error against the float64 reference and against the one
rounded to each op's element type, relative but absolute near zero) and each mask (i1) output
exactly.
Knob combinations a pass refuses are counted, not failed. Each of the first `--reduce` failing
programs is then reduced (`reduce.py`, 30 s at most) to a minimal one that still fails, written
to DIR with its pipeline on the first line (the format of tests/fuzz/regressions/) and
printed. Exits 1 when any program failed.

`--gather` adds `graph.gather` (i64 ids) to the programs; integer inputs cast to masks are
drawn either way.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
import traceback
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from generate import output_problems, pipelines, programs
from hypothesis import HealthCheck, Phase, given, seed, settings
from reduce import op_count, reduce_program
from xdsl.dialects.builtin import i32, i64
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.backends import check
from tinyopt.backends.cuda.cache import cached_compile
from tinyopt.backends.cuda.nvrtc import gpu_available
from tinyopt.backends.reference import run_reference
from tinyopt.compiler import apply_pipeline, parse
from tinyopt.dialects import graph

ARCH = "sm_90a"
"""What the pool compiles for: the H200's architecture, as the runtime picks there."""


@dataclass
class Prepared:
    """A program lowered and compiled on the CPU, with its inputs and references: float64,
    and `rounded` to each op's element type (`run_reference(dtype=None)`)."""

    lowered: str
    device_inputs: list[np.ndarray]
    references: list[np.ndarray]
    rounded: list[np.ndarray]
    output_types: list[str]


def prepare(text: str, pipeline: str, input_seed: int) -> Prepared | str:
    """Lower and compile one program (no GPU); return it, or the diagnostic refusing it.

    Any other exception propagates (a bug).
    """
    program = parse(text)
    graph = check.graph_function(program).clone()
    try:
        module = apply_pipeline(program, pipeline)
    except DiagnosticException as exc:
        return str(exc)
    for op in module.ops:
        if op.name == "tile.cuda_kernel":
            cached_compile(op.properties["source"].data, op.properties["sym_name"].data, ARCH)
    inputs, device_inputs = check.device_inputs(graph, input_seed)
    types = [str(check.element_type(t)) for t in graph.function_type.outputs]
    references = run_reference(graph, *inputs)
    rounded = run_reference(graph, *inputs, dtype=None)
    return Prepared(str(module), device_inputs, references, rounded, types)


def prepare_in_worker(case: tuple[str, str, int]) -> Prepared | str | Exception:
    """`prepare` for the pool: an exception is returned with its traceback as its message."""
    try:
        return prepare(*case)
    except Exception:  # every exception but a refusal is a bug to report
        return RuntimeError(traceback.format_exc())


_TYPES = {str(t): t for t in (*check.TOLERANCES, graph.BOOL, i32, i64)}
"""Output element types by name (`Prepared` carries names across processes)."""


def run_on_gpu(prepared: Prepared) -> str | None:
    """Run a prepared program on the GPU; return None when it matches, else why not."""
    from tinyopt.backends.cuda.runtime import compile_module

    compiled = compile_module(parse(prepared.lowered))
    outputs = compiled["fuzz"](*prepared.device_inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    types = [_TYPES[name] for name in prepared.output_types]
    problems = output_problems(outputs, prepared.references, prepared.rounded, types)
    return "; ".join(problems) or None


def outcome(result: Prepared | str | Exception) -> tuple[str, str | None]:
    """Return ("passed" | "refused" | "failed", why it failed) for one pool result."""
    if isinstance(result, str):
        return "refused", None
    if isinstance(result, Exception):
        return "failed", str(result)
    try:
        problem = run_on_gpu(result)
    except Exception:
        problem = traceback.format_exc()
    return ("failed", problem) if problem else ("passed", None)


def fails(text: str, pipeline: str, input_seed: int) -> bool:
    """Return whether a program fails (not merely refused) when run in this process."""
    return outcome(prepare_in_worker((text, pipeline, input_seed)))[0] == "failed"


def draw_cases(n: int, draw_seed: int, gather: bool) -> list[tuple[str, str]]:
    """Draw `n` (program, pipeline) pairs, the same ones for the same seed."""
    cases: list[tuple[str, str]] = []

    @seed(draw_seed)
    @settings(
        max_examples=n,
        database=None,
        deadline=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(programs(gather=gather), pipelines())
    def collect(text: str, pipeline: str) -> None:
        cases.append((text, pipeline))

    collect()
    return cases


def main() -> int:
    """Runs the campaign, reduces and prints the failures; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "-n", type=int, default=500, help="programs to run (those a pass refuses are replaced)"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the programs and inputs")
    parser.add_argument("--jobs", type=int, default=16, help="processes lowering and compiling")
    parser.add_argument("--failures", type=Path, default=Path("fuzz_failures"))
    parser.add_argument("--reduce", type=int, default=5, help="failures to reduce (the first)")
    parser.add_argument("--gather", action="store_true", help="include graph.gather")
    args = parser.parse_args()
    if not gpu_available():
        print("run_gpu.py: no CUDA GPU available", file=sys.stderr)
        return 1
    start = time.monotonic()
    # About 5% of the drawn knob settings are refused by a pass (a diagnosed combination);
    # draw enough that `n` programs run, and stop once they have.
    cases = draw_cases(args.n + args.n // 5 + 20, args.seed, args.gather)
    stats: Counter[str] = Counter()
    failures: list[tuple[int, str, str, str]] = []
    context = multiprocessing.get_context("spawn")  # the parent holds a CUDA context
    with ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
        jobs = [(text, pipeline, args.seed) for text, pipeline in cases]
        for index, result in enumerate(pool.map(prepare_in_worker, jobs, chunksize=2)):
            kind, problem = outcome(result)
            stats[kind] += 1
            if problem is not None:
                failures.append((index, *cases[index], problem))
                print(f"FAIL case {index}: {problem.strip().splitlines()[-1]}", flush=True)
            if stats["passed"] + stats["failed"] == args.n:
                pool.shutdown(wait=False, cancel_futures=True)
                break
    ran = stats["passed"] + stats["failed"]
    print(
        f"fuzz on GPU: {ran} programs ran, {stats['passed']} passed, {stats['failed']} failed; "
        f"{stats['refused']} more refused by a pass ({time.monotonic() - start:.0f} s)"
    )
    if ran < args.n:
        print(f"run_gpu.py: only {ran} of the {args.n} programs asked for ran", file=sys.stderr)
    for index, text, pipeline, problem in failures[: args.reduce]:
        small = reduce_program(text, lambda t, p=pipeline: fails(t, p, args.seed), seconds=30)
        args.failures.mkdir(exist_ok=True)
        path = args.failures / f"case{index:04d}.mlir"
        comment = "\n".join(f"// {line}" for line in problem.strip().splitlines())
        path.write_text(f"// PIPELINE: {pipeline}\n{comment}\n{small}\n")
        print(
            f"\nminimal failing program {path} ({op_count(small)} ops, was "
            f"{op_count(text)}), pipeline {pipeline}:\n{small}"
        )
    return 1 if failures or ran < args.n else 0


if __name__ == "__main__":
    sys.exit(main())
