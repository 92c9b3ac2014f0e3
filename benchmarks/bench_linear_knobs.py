"""One torch-layout linear (`x @ w^T + b`, optionally followed by tanh-GELU) under several
`tile` knob settings against cuBLAS (`F.linear`, TF32 off) in the same run.

It is the probe behind the GEMM tile heuristics: each row names the shape, the knobs, the
grid's waves (blocks over the SM count) and the time, so a heuristic change can be decided
from measured wave-quantization effects rather than from one model's shapes.
Usage: python benchmarks/bench_linear_knobs.py [--shape M,N,K ...] [--dtype f32|bf16]
       [--knobs "bm=128 bn=128" ...] [--gelu] [--out table.md]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import _t  # noqa: E402
from harness import compile_program, median_ms, publish, rel_error  # noqa: E402

SHAPES = ((4240, 3072, 768), (4240, 768, 3072), (4000, 4096, 1024), (4000, 1024, 4096))
KNOBS = ("", "bm=128 bn=128", "bm=128 bn=64 tm=8 tn=8", "bm=64 bn=64", "streamk=on")
TORCH = {"f32": torch.float32, "bf16": torch.bfloat16}


def linear(m: int, n: int, k: int, dtype: str, gelu: bool) -> str:
    x, w, b, y = _t((m, k), dtype), _t((n, k), dtype), _t((n,), dtype), _t((m, n), dtype)
    body = f"  %y = graph.linear %x, %w, %b : ({x}, {w}, {b}) -> {y}\n"
    result = "%y"
    if gelu:
        body += f"  %g = graph.gelu_tanh %y : {y}\n"
        result = "%g"
    return (
        f"func.func @linear(%x: {x}, %w: {w}, %b: {b}) -> {y} {{\n{body}"
        f"  func.return {result} : {y}\n}}"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", action="append", help="M,N,K (repeatable)")
    parser.add_argument("--dtype", default="f32", choices=sorted(TORCH))
    parser.add_argument("--knobs", action="append", help="a tile{...} setting (repeatable)")
    parser.add_argument("--gelu", action="store_true", help="tanh-GELU after the linear")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    shapes = [tuple(map(int, s.split(","))) for s in args.shape] if args.shape else SHAPES
    settings = args.knobs or list(KNOBS)
    dt = TORCH[args.dtype]
    rows = []
    for m, n, k in shapes:
        torch.manual_seed(0)
        x = torch.randn(m, k, device="cuda").to(dt)
        w = (torch.randn(n, k, device="cuda") / k**0.5).to(dt)
        b = torch.randn(n, device="cuda").to(dt)

        def reference(x=x, w=w, b=b) -> torch.Tensor:
            y = torch.nn.functional.linear(x, w, b)
            return torch.nn.functional.gelu(y, approximate="tanh") if args.gelu else y

        exact = torch.nn.functional.linear(x.double(), w.double(), b.double())
        if args.gelu:
            exact = torch.nn.functional.gelu(exact, approximate="tanh")
        cublas = median_ms(reference)
        flops = 2 * m * n * k
        for knobs in settings:
            pipeline = f"fuse,tile{{{knobs}}},to-cuda" if knobs else "fuse,tile,to-cuda"
            try:
                fn = compile_program(linear(m, n, k, args.dtype, args.gelu), pipeline)
            except Exception as exc:  # a refused knob setting: the row says why
                rows.append(f"| {m}×{n}×{k} | `{knobs or 'default'}` | refused: {exc} |||||")
                continue
            out = fn(x, w, b)
            error = rel_error(out, exact)
            ours = median_ms(fn.bind(x, w, b), warmup=20, rep=200)
            grids = [s.kernel.grid for s in fn.steps if hasattr(s, "kernel")]
            blocks = max(g[0] * g[1] * g[2] for g in grids)
            waves = blocks / torch.cuda.get_device_properties(0).multi_processor_count
            rows.append(
                f"| {m}×{n}×{k} | `{knobs or 'default'}` | {blocks} ({waves:.2f}) | "
                f"{ours * 1e3:.1f} | {flops / ours / 1e9:.1f} | {cublas * 1e3:.1f} | "
                f"{cublas / ours:.3f} | {error:.1e} |"
            )
            print(rows[-1], flush=True)
    lines = [
        f"linear {'+ gelu_tanh ' if args.gelu else ''}{args.dtype}, "
        f"{torch.cuda.get_device_name()}, cuBLAS F.linear (TF32 off) in the same run",
        "",
        "| M×N×K | knobs | blocks (per SM) | tinyopt µs | TFLOP/s | cuBLAS µs | × cuBLAS "
        "| rel err |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
