"""Compile time (issue 21): each program built cold (empty caches) and warm, each build in a
fresh process, timed from the entry of the build (`CompiledModel(...)`, or for IR text
`compile_text(...)`) to its first result, with the interpreter's start and the imports
reported apart, and the time of each phase: capture, each pass, NVRTC, load, launch.

    python benchmarks/bench_compile.py [--cases llama,examples,zoo] [--seq 2048] [--out F]

The programs: the Llama block of bench_llama.py (bf16, seq 2048, hidden 4096, 32 heads, 8 KV
heads, MLP 14336), every examples/*.mlir, and the zoo's models at 1 × 16 tokens in bf16
(ResNet-50: a 128 × 128 image). Cold runs get empty cubin and build caches
(`TINYOPT_CACHE_DIR`, `TINYOPT_BUILD_CACHE`), warm runs reuse what the cold run left; the
tuning cache is off. Without a GPU a build stops at the cubins: a torch module is captured,
lowered and compiled (no `CompiledModel`, which needs a device), and the load and launch phases
are left out (the table says so).

Every program's inputs are on the device before the build is timed, as a model's are: the torch
cases' tensors, and for IR text random arrays uploaded as torch CUDA tensors (which creates the
CUDA context, as the torch cases' inputs do). `load` binds them (no copy) and loads the
kernels; `launch` runs the kernels and waits for them. Until the eleventh session (2026-12-03)
the IR text cases bound numpy arrays, so `load` and `launch` also copied the inputs to the
device and the results back (softmax.mlir: 235 MB each way, 0.2 s of its 0.42 s warm build).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
ZOO = ("gpt2", "bert", "t5", "vit", "llama3", "resnet")
PHASE_ORDER = ("capture", "parse", "pass", "verify", "nvrtc", "cache", "load", "launch")


def cases(names: list[str]) -> list[str]:
    """Return the case ids: `llama`, `example:NAME.mlir`, `zoo:MODEL`."""
    ids = []
    for name in names:
        if name == "llama":
            ids.append("llama")
        elif name == "examples":
            ids += [f"example:{p.name}" for p in sorted(EXAMPLES.glob("*.mlir"))]
        elif name == "zoo":
            ids += [f"zoo:{model}" for model in ZOO]
        else:
            ids.append(name)
    return ids


# ------------------------------------------------------------------------ the measured process


def _torch_case(case: str, seq: int) -> tuple[object, tuple[object, ...]]:
    """Return the module and example inputs of a torch case, on the GPU when there is one."""
    import torch

    sys.path.insert(0, str(ROOT / "tests"))
    from programs import load_example

    if case == "llama":
        llama = load_example("llama_block.py")
        torch.manual_seed(0)
        module = llama.LlamaBlock(4096, 32, 8, 14336, seq)
        inputs: tuple[object, ...] = (torch.randn(1, seq, 4096),)
    else:
        module, inputs = load_example(f"zoo/{case.removeprefix('zoo:')}.py").example(1, 16)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    module = module.to(device, torch.bfloat16).eval()
    inputs = tuple(
        x.to(device, torch.bfloat16) if x.is_floating_point() else x.to(device) for x in inputs
    )
    return module, inputs


def child(case: str, seq: int) -> None:
    """Build one case once, print its phases as JSON on stdout."""
    started = time.perf_counter()
    torch_case = not case.startswith("example:")
    if torch_case:
        import torch
    from tinyopt.backends.cuda.nvrtc import gpu_available
    from tinyopt.compile_timer import phase, timing
    from tinyopt.compiler import compile_text
    from tinyopt.frontends.compiled_model import PIPELINE, CompiledModel, build_kernels

    from tinyopt.universe import TINYOPT_UNIVERSE

    for get_pass in TINYOPT_UNIVERSE.all_passes.values():  # what a build imports, counted here
        get_pass()
    if torch_case:  # torch's tracer, which its first `torch.export` call would import (~1 s)
        import torch._dynamo  # noqa: F401
        import torch.export._trace  # noqa: F401
    gpu = gpu_available()
    if gpu:  # the IR text cases' inputs are torch CUDA tensors
        import torch
    imported = time.perf_counter()
    module = inputs = text = None
    arrays: list[object] = []
    if torch_case:
        module, inputs = _torch_case(case, seq)
    else:
        text = (EXAMPLES / case.removeprefix("example:")).read_text()
        arrays = _random_inputs(text) if gpu else []
    prepared = time.perf_counter()
    with timing(True, report=False) as timer:
        assert timer is not None
        if torch_case and gpu:
            model = CompiledModel(module, *inputs)
            with phase("launch"):
                model(*inputs)
                torch.cuda.synchronize()
        elif torch_case:
            build_kernels(module, inputs, PIPELINE, poison=False, sync=False)
        else:
            compiled = compile_text(text, PIPELINE, poison=False, sync=False)
            if gpu:
                function = next(iter(compiled.functions.values()))
                with phase("load"):
                    call = function.bind(*arrays)
                with phase("launch"):
                    call()
                    call.results()
                    torch.cuda.synchronize()
    finished = time.perf_counter()
    result = {
        "imports": imported - started,
        "build": finished - prepared,
        "phases": timer.phases,
        "gpu": gpu,
    }
    print("BENCH " + json.dumps(result))


def _random_inputs(text: str) -> list[object]:
    """Return random arrays for a program's arguments, in their storage types, as torch CUDA
    tensors, made before the build is timed (softmax.mlir's 470 MB took 2.5 s to draw, run 4
    of 2026-12-03)."""
    import torch

    from tinyopt.backends.check import device_inputs, graph_function
    from tinyopt.compiler import parse

    arrays = device_inputs(graph_function(parse(text)), 0)[1]
    tensors = [torch.from_numpy(a).cuda() for a in arrays]
    torch.cuda.synchronize()
    return tensors


# ------------------------------------------------------------------------------- the driver


def measure(case: str, seq: int, env: dict[str, str]) -> dict[str, object]:
    """Run one build in a fresh process; return its phases, imports and interpreter start."""
    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, __file__, "--child", case, "--seq", str(seq)],
        env=env,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    wall = time.perf_counter() - start
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("BENCH ")), None)
    if out.returncode != 0 or line is None:
        tail = (out.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": tail}
    result = json.loads(line.removeprefix("BENCH "))
    result["process"] = wall
    return result


def _phase_key(name: str) -> tuple[int, str]:
    head = name.split(" ")[0]
    return (PHASE_ORDER.index(head) if head in PHASE_ORDER else len(PHASE_ORDER), "")


def table(rows: list[tuple[str, str, dict[str, object]]]) -> str:
    """Return the markdown table: one row per (case, cold/warm), one column per phase."""
    phases: list[str] = []
    for _, _, result in rows:
        for name in result.get("phases", {}):
            if name not in phases:
                phases.append(name)
    phases.sort(key=_phase_key)  # stable: passes keep their pipeline order
    head = ["case", "caches", "process", "imports", "build", *phases, "other"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case, mode, result in rows:
        if "error" in result:
            lines.append(f"| {case} | {mode} | error: {result['error']} |")
            continue
        measured = result["phases"]
        cells = [case, mode, f"{result['process']:.2f}", f"{result['imports']:.2f}"]
        cells.append(f"**{result['build']:.3f}**")
        cells += [f"{measured[p]:.3f}" if p in measured else "" for p in phases]
        cells.append(f"{result['build'] - sum(measured.values()):.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cases", default="llama,examples,zoo")
    parser.add_argument("--seq", type=int, default=2048, help="the Llama block's tokens")
    parser.add_argument("--out", help="also write the table to this file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.seq)
        return
    rows = []
    gpu = None
    for case in cases(args.cases.split(",")):
        with tempfile.TemporaryDirectory(prefix="bench-compile-") as caches:
            env = dict(
                os.environ,
                TINYOPT_CACHE_DIR=str(Path(caches, "cubins")),
                TINYOPT_BUILD_CACHE=str(Path(caches, "builds")),
                TINYOPT_TUNING_DB="off",
            )
            for mode in ("cold", "warm"):
                result = measure(case, args.seq, env)
                gpu = result.get("gpu", gpu)
                rows.append((case, mode, result))
                print(case, mode, f"{result.get('build', float('nan')):.3f} s", file=sys.stderr)
    note = (
        "process: the whole process (interpreter start, imports, building the torch module and "
        "its inputs or an example's inputs, the build); imports: tinyopt's and torch's, with "
        "torch's tracer (torch._dynamo, torch.export, which the first capture would otherwise "
        "import); build: "
        "from the entry to the first result; the columns after it are its phases, and what no "
        "phase covers (seconds)."
    )
    if not gpu:
        note += " No GPU: builds stop at the cubins; the load and launch phases are skipped."
    text = table(rows) + "\n\n" + note
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
