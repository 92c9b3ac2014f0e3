"""bf16 GEMM on tensor cores against cuBLAS: `x @ w` (bf16 in, fp32 accumulate, bf16 out).

For each size, times torch.matmul (cuBLAS) and each knob variant of the `tile` pass in the same
run, and prints TFLOP/s, the ratio to cuBLAS and the relative error against float64 on a
subset of rows. Usage: python benchmarks/bench_bf16.py [--sizes 4096 8192] [--out bf16.md]
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
    ("wgmma 128x256 stages=3 (default)", "mma=wgmma"),
    ("wgmma 128x256 stages=3 store=direct", "mma=wgmma store=direct"),
    ("wgmma 128x256 stages=4", "mma=wgmma stages=4"),
    ("wgmma 128x256 stages=4 ws=0", "mma=wgmma stages=4 ws=0"),
    ("wgmma 128x256 stages=3 persistent=1", "mma=wgmma persistent=1"),
    ("wgmma 128x256 stages=4 persistent=1", "mma=wgmma stages=4 persistent=1"),
    ("wgmma 128x256 stages=3 group=8", "mma=wgmma group=8"),
    ("wgmma 128x256 stages=3 group=16", "mma=wgmma group=16"),
    ("wgmma 128x256 stages=4 persistent=1 group=8", "mma=wgmma stages=4 persistent=1 group=8"),
    ("wgmma 128x128 stages=6", "mma=wgmma bn=128 stages=6"),
]
ROWS = 256
"""Rows of the output checked against the float64 product."""


def matmul(n: int) -> str:
    """Returns `x @ w` on n×n bf16 matrices (no epilogue: the rules' raw GEMM)."""
    t = f"tensor<{n}x{n}xbf16>"
    return f"""func.func @mm(%x: {t}, %w: {t}) -> {t} {{
  %y = graph.matmul %x, %w : ({t}, {t}) -> {t}
  func.return %y : {t}
}}"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", type=int, nargs="+", default=[4096, 8192])
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    lines = [f"bf16 GEMM on {torch.cuda.get_device_name()}", ""]
    lines += [
        "| size | schedule | ms | TFLOP/s | vs cuBLAS | rel err |",
        "|---|---|---|---|---|---|",
    ]
    for n in args.sizes:
        x = torch.randn(n, n, device="cuda").bfloat16()
        w = torch.randn(n, n, device="cuda").bfloat16()
        ref = x[:ROWS].double() @ w.double()
        flops = 2 * n**3
        cublas = median_ms(lambda: x @ w)
        err = ((x[:ROWS] @ w).double() - ref).norm() / ref.norm()
        lines.append(
            f"| {n} | cuBLAS | {cublas:.3f} | {flops / cublas / 1e9:.0f} | 1.00 | {err:.1e} |"
        )
        for name, knobs in VARIANTS:
            fn = compile_program(matmul(n), tile_with(knobs))
            out = fn(x, w)
            torch.cuda.synchronize()
            err = ((out[:ROWS].double() - ref).norm() / ref.norm()).item()
            ms = median_ms(fn.bind(x, w))
            lines.append(
                f"| {n} | {name} | {ms:.3f} | {flops / ms / 1e9:.0f} | {cublas / ms:.2f} | "
                f"{err:.1e} |"
            )
            print(lines[-1], flush=True)
    publish(lines, args.out)


if __name__ == "__main__":
    main()
