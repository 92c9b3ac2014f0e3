"""bf16 GEMM on tensor cores against cuBLAS: `x @ w` (bf16 in, fp32 accumulate, bf16 out).

For each size, times torch.matmul (cuBLAS) and each knob variant of the `tile` pass in the same
run, and prints TFLOP/s, the ratio to cuBLAS and the relative error against float64 on a
subset of rows. A shape is N (N×N×N) or MxNxK; `--knobs` replaces the variant list.
Usage: python benchmarks/bench_bf16.py [--sizes 4096 8192 2048x1024x4096] [--knobs K ...]
       [--out bf16.md]
"""

from __future__ import annotations

import argparse
import os
import sys

import torch


sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import tile_with  # noqa: E402
from harness import compile_program, median_ms, publish  # noqa: E402

VARIANTS = [
    ("mma=sync", "mma=sync"),
    ("wgmma 128x256 stages=3 group=16 (default)", "mma=wgmma"),
    ("wgmma 128x256 stages=3 group=1 (row-major)", "mma=wgmma group=1"),
    ("wgmma 128x256 stages=3 group=8", "mma=wgmma group=8"),
    ("wgmma 128x256 stages=3 store=direct", "mma=wgmma store=direct"),
    ("wgmma 128x256 stages=4", "mma=wgmma stages=4"),
    ("wgmma 128x256 stages=4 persistent=1", "mma=wgmma stages=4 persistent=1"),
    ("wgmma 128x128 stages=6", "mma=wgmma bn=128 stages=6"),
]
ROWS = 256
"""Rows of the output checked against the float64 product."""


def matmul(m: int, n: int, k: int) -> str:
    """Returns `x @ w` with bf16 x [m, k] and w [k, n] (no epilogue: the rules' raw GEMM)."""
    x, w, y = (f"tensor<{a}x{b}xbf16>" for a, b in ((m, k), (k, n), (m, n)))
    return f"""func.func @mm(%x: {x}, %w: {w}) -> {y} {{
  %y = graph.matmul %x, %w : ({x}, {w}) -> {y}
  func.return %y : {y}
}}"""


def shape(text: str) -> tuple[int, int, int]:
    """Parses N or MxNxK."""
    sizes = [int(s) for s in text.split("x")]
    return (sizes[0],) * 3 if len(sizes) == 1 else (sizes[0], sizes[1], sizes[2])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=shape, nargs="+", default=[shape("4096"), shape("8192")])
    parser.add_argument("--knobs", action="append", help="a tile knob string (repeatable)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    variants = [(k, k) for k in args.knobs] if args.knobs else VARIANTS
    lines = [f"bf16 GEMM on {torch.cuda.get_device_name()}", ""]
    lines += [
        "| M×N×K | schedule | ms | TFLOP/s | vs cuBLAS | rel err |",
        "|---|---|---|---|---|---|",
    ]
    for m, n, k in args.sizes:
        size = f"{m}×{n}×{k}"
        x = torch.randn(m, k, device="cuda").bfloat16()
        w = torch.randn(k, n, device="cuda").bfloat16()
        ref = x[:ROWS].double() @ w.double()
        flops = 2 * m * n * k
        cublas = median_ms(lambda: x @ w)
        err = ((x[:ROWS] @ w).double() - ref).norm() / ref.norm()
        lines.append(
            f"| {size} | cuBLAS | {cublas:.3f} | {flops / cublas / 1e9:.0f} | 1.00 | {err:.1e} |"
        )
        for name, knobs in variants:
            fn = compile_program(matmul(m, n, k), tile_with(knobs))
            out = fn(x, w)
            torch.cuda.synchronize()
            err = ((out[:ROWS].double() - ref).norm() / ref.norm()).item()
            ms = median_ms(fn.bind(x, w))
            lines.append(
                f"| {size} | {name} | {ms:.3f} | {flops / ms / 1e9:.0f} | {cublas / ms:.2f} | "
                f"{err:.1e} |"
            )
            print(lines[-1], flush=True)
    publish(lines, args.out)


if __name__ == "__main__":
    main()
