"""The model zoo (examples/zoo/): tinyopt vs torch eager and torch.compile per model, size and
dtype, the table of issue 19.

Each row builds one model at its real size (one layer, seeded weights) for `batch × tokens`
(ViT: the square image nearest that many tokens, see examples/zoo/vit.py; ResNet-50: the image
whose last feature map has about that many pixels), and measures in the
same process torch eager, torch.compile in its default mode (dynamo reset first, so each row's
shapes are compiled static as in a process of its own) and tinyopt's `CompiledModel` (kernels
on the caller's tensors); the relative error ‖out − ref‖ / ‖ref‖ of each against the same model
in float64 on the GPU; and tinyopt's slowest kernel with its share of tinyopt's call. A model
tinyopt cannot capture or lower gets a row saying why. Log lines come as each row is measured,
the compact table last, then the geometric means over the rows at 8×512 and 8×2048 tokens
(issue 19's criterion; the rows of this run only, as the benchmark may run in parts).
`--dry-run` needs no GPU: it captures and lowers each model at its smallest size on the CPU.
`--backend` adds each model through `torch.compile(model, backend="tinyopt")` (Dynamo's graphs
compiled by tinyopt; a graph that falls back to eager says why in its cell).
Usage: python benchmarks/bench_zoo.py [--models gpt2,bert,t5,vit,llama3,resnet]
       [--sizes 1x16,1x512,8x512,8x2048] [--dtypes fp32,bf16] [--backend] [--out zoo.md]
       [--dry-run]
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import sys
import time
import warnings
from types import ModuleType

import torch

from tinyopt.compiler import apply_pipeline
from tinyopt.dialects import tile
from tinyopt.frontends.compiled_model import PIPELINE, CompiledModel
from tinyopt.frontends.torch_fx import capture

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import load_example  # noqa: E402

MODELS = ("gpt2", "bert", "t5", "vit", "llama3", "resnet")
ISSUE_19_MODELS = MODELS[:5]
"""The models run by default, whose geometric means issue 19 asked for; ResNet-50 (convolutions:
im2col and a GEMM each) runs when `--models` names it."""
SIZES = ("1x16", "1x512", "8x512", "8x2048")
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16}
GEOMEAN_SIZES = ("8x512", "8x2048")
"""The sizes over which issue 19 asks for a geometric mean of at least 1.1x torch.compile."""


def zoo(name: str) -> ModuleType:
    """Return examples/zoo/`name`.py as a module."""
    return load_example(f"zoo/{name}.py")


def batch_tokens(size: str) -> tuple[int, int]:
    """Parse `8x512` as (batch 8, 512 tokens)."""
    batch, tokens = size.split("x")
    return int(batch), int(tokens)


def reason(exc: Exception) -> str:
    """Return an exception as one table cell: its type and first line, `|` escaped."""
    lines = str(exc).strip().splitlines() or [""]
    return f"{type(exc).__name__}: {lines[0]}".replace("|", "\\|")


def through_backend(module: torch.nn.Module, inputs: tuple, exact: torch.Tensor) -> str:
    """Time `torch.compile(module, backend="tinyopt")` (dynamo reset first); return its table
    cells `ms / error`, or why it ran eagerly (the backend's warning)."""
    from harness import median_ms, rel_error

    torch._dynamo.reset()
    compiled = torch.compile(module, backend="tinyopt")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = compiled(*inputs)
    fallbacks = [str(w.message) for w in caught if "tinyopt" in str(w.message)]
    ms = median_ms(lambda: compiled(*inputs))
    note = f" (eager: {fallbacks[0].splitlines()[0]})" if fallbacks else ""
    return f"{ms:.3f}{note}".replace("|", "\\|") + f" / {rel_error(out, exact):.1e}"


def measure(name: str, size: str, dtype: str, backend: bool) -> tuple[str, float | None]:
    """Measure one model at one size and dtype; return its table row and tinyopt's speedup
    over torch.compile (None when tinyopt did not run). With `backend`, also the model
    through `torch.compile(backend="tinyopt")`."""
    from harness import median_ms, rel_error  # triton's do_bench: absent where --dry-run runs

    batch, tokens = batch_tokens(size)
    module, inputs = zoo(name).example(batch, tokens)
    module = module.to("cuda", DTYPES[dtype])
    inputs = tuple(x.to("cuda", DTYPES[dtype]) for x in inputs)
    with torch.no_grad():
        exact = copy.deepcopy(module).double()(*(x.double() for x in inputs))
        torch._dynamo.reset()
        compiled = torch.compile(module)
        start = time.perf_counter()
        compiled(*inputs)
        compile_s = time.perf_counter() - start
        eager_ms = median_ms(lambda: module(*inputs))
        compile_ms = median_ms(lambda: compiled(*inputs))
        errors = [f"{rel_error(f(*inputs), exact):.1e}" for f in (module, compiled)]
        print(
            f"{name} {dtype} {size}: eager {eager_ms:.3f} ms, torch.compile {compile_ms:.3f} ms "
            f"(compiled in {compile_s:.1f} s)",
            flush=True,
        )
        cells = [name, dtype, f"{size} ({exact.shape[1]} tokens)", f"{eager_ms:.3f}"]
        cells.append(f"{compile_ms:.3f}")
        try:
            start = time.perf_counter()
            ours = CompiledModel(module, *inputs)
            build_s = time.perf_counter() - start
            ours_ms = median_ms(lambda: ours(*inputs))
            errors.append(f"{rel_error(ours(*inputs), exact):.1e}")
        except Exception as exc:  # a capture, lowering or compile error: the row says which
            print(f"{name} {dtype} {size}: tinyopt failed: {type(exc).__name__}: {exc}")
            failed = [*cells, "-", "-", "-", " / ".join([*errors, "-"]), "-", "-", "-", reason(exc)]
            return "| " + " | ".join(failed) + " |", None
    stream = torch.cuda.current_stream().cuda_stream
    kernels = [
        (launch.name, median_ms(lambda lc=launch: lc(stream), 10, 50))
        for launch in ours.call.launches
    ]
    slowest, slowest_ms = max(kernels, key=lambda k: k[1])
    print(
        f"{name} {dtype} {size}: tinyopt {ours_ms:.3f} ms (built in {build_s:.1f} s, "
        f"{len(kernels)} kernels, slowest {slowest} {slowest_ms:.3f} ms)",
        flush=True,
    )
    each = ", ".join(f"{k} {ms:.3f}" for k, ms in sorted(kernels, key=lambda k: -k[1]))
    print(f"{name} {dtype} {size}: kernels alone, ms: {each}", flush=True)
    via_backend = "-"
    if backend:
        with torch.no_grad():
            via_backend = through_backend(module, inputs, exact)
        print(f"{name} {dtype} {size}: backend=tinyopt ms / error: {via_backend}", flush=True)
    cells += [
        f"{ours_ms:.3f}",
        f"{eager_ms / ours_ms:.2f}x",
        f"{compile_ms / ours_ms:.2f}x",
        " / ".join(errors),
        str(len(kernels)),
        f"{slowest} {slowest_ms / ours_ms:.0%}",
        via_backend,
        "",
    ]
    return "| " + " | ".join(cells) + " |", compile_ms / ours_ms


def geomeans(speedups: dict[tuple[str, str, str], float | None]) -> list[str]:
    """Return a line per size of GEOMEAN_SIZES: the geometric mean of tinyopt's speedup over
    torch.compile over this run's rows at that size (rows without one are named)."""
    lines = []
    for size in GEOMEAN_SIZES:
        rows = {key: s for key, s in speedups.items() if key[1] == size}
        if not rows:
            continue
        ran = [s for s in rows.values() if s is not None]
        failed = [f"{m} {d}" for (m, _, d), s in rows.items() if s is None]
        mean = math.exp(sum(map(math.log, ran)) / len(ran)) if ran else float("nan")
        lines.append(
            f"geometric mean vs torch.compile at {size}: {mean:.2f}x over {len(ran)} rows"
            + (f" (no tinyopt figure: {', '.join(failed)})" if failed else "")
        )
    return lines


def dry_run(models: list[str], sizes: list[str], dtypes: list[str]) -> list[str]:
    """Capture and lower each model at the smallest of `sizes` on the CPU (no GPU needed):
    the rows say how many kernels `CompiledModel`'s pipeline makes, or why it cannot."""
    size = min(sizes, key=lambda s: math.prod(batch_tokens(s)))
    lines = [
        f"Dry run: capture and lower ({PIPELINE}) at {size}, on the CPU",
        "",
        "| model | dtype | kernels | seconds | status |",
        "|---|---|---|---|---|",
    ]
    for name in models:
        for dtype in dtypes:
            module, inputs = zoo(name).example(*batch_tokens(size))
            module = module.to(DTYPES[dtype])
            inputs = tuple(x.to(DTYPES[dtype]) for x in inputs)
            start = time.perf_counter()
            try:
                lowered = apply_pipeline(capture(module, *inputs).module, PIPELINE)
            except Exception as exc:  # the row says why
                kernels, status = "-", reason(exc)
            else:
                kernels = str(sum(isinstance(op, tile.CudaKernelOp) for op in lowered.ops))
                status = "lowered"
            seconds = time.perf_counter() - start
            lines.append(f"| {name} | {dtype} | {kernels} | {seconds:.1f} | {status} |")
            print(f"{name} {dtype}: {status}, {kernels} kernels ({seconds:.1f} s)", flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default=",".join(ISSUE_19_MODELS), help="comma-separated")
    parser.add_argument("--sizes", default=",".join(SIZES), help="batch x tokens, comma-separated")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="fp32, bf16, comma-separated")
    parser.add_argument("--out", default=None, help="also write the table to this file")
    parser.add_argument("--dry-run", action="store_true", help="capture and lower on the CPU")
    parser.add_argument(
        "--backend", action="store_true", help='also time torch.compile(backend="tinyopt")'
    )
    args = parser.parse_args()
    models, sizes, dtypes = (getattr(args, a).split(",") for a in ("models", "sizes", "dtypes"))
    unknown = sorted(set(models) - set(MODELS)) + sorted(set(dtypes) - set(DTYPES))
    if unknown:
        parser.error(f"unknown models or dtypes: {', '.join(unknown)}")
    if args.dry_run:
        print("\n".join(dry_run(models, sizes, dtypes)))
        return
    from harness import publish  # triton's do_bench: absent where --dry-run runs

    lines = [
        f"Model zoo on {torch.cuda.get_device_name()}, torch {torch.__version__}, one layer "
        f"each; tinyopt `{PIPELINE}`",
        "",
        "| model | dtype | batch×tokens | eager ms | torch.compile ms | tinyopt ms | vs eager | "
        "vs torch.compile | rel err eager / compile / tinyopt | kernels | slowest kernel "
        "(share of call) | backend=tinyopt ms / rel err | tinyopt failed |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    speedups: dict[tuple[str, str, str], float | None] = {}
    for name in models:
        for dtype in dtypes:
            for size in sizes:
                try:
                    row, speedups[name, size, dtype] = measure(name, size, dtype, args.backend)
                except Exception as exc:  # e.g. out of memory in a reference: the row says so
                    row = f"| {name} | {dtype} | {size} |" + " - |" * 9 + f" {reason(exc)} |"
                    speedups[name, size, dtype] = None
                    print(f"{name} {dtype} {size}: failed: {type(exc).__name__}: {exc}")
                lines.append(row)
                torch.cuda.empty_cache()
    publish([*lines, "", *geomeans(speedups)], args.out)


if __name__ == "__main__":
    main()
