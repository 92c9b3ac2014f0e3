"""The SGEMM ladder: one row per optimization step, each a knob setting of the `tile` pass.

Every step compiles the same graph program, `relu(matmul(x + bias, w))` at 4096³ fp32 (bias
zero), checks it against a float64 torch result, and times it against cuBLAS in the same run.
Usage: python benchmarks/bench_ladder.py [--size N] [--out ladder.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch


sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import matmul_relu  # noqa: E402

from ladder import LADDER, TALL_K  # noqa: E402
from harness import compile_program, median_ms, publish  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--out", default=None)
    parser.add_argument("--steps", default=None, help="comma-separated step numbers (from 0)")
    args = parser.parse_args()
    wanted = {int(i) for i in args.steps.split(",")} if args.steps else None
    n = args.size
    torch.backends.cuda.matmul.allow_tf32 = False
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    bias = torch.zeros(n, device="cuda")
    ref = torch.relu(a.double() @ b.double())
    flops = 2 * n**3
    cublas_ms = median_ms(lambda: torch.relu(a @ b))
    rows = []
    for number, (step, knobs) in enumerate(LADDER):
        if wanted is not None and number not in wanted:
            continue
        pipeline = f"fuse,tile{{{knobs}}},to-cuda" if knobs else "fuse,tile,to-cuda"
        fn = compile_program(matmul_relu(n, n, n), pipeline)
        out = fn(a, bias, b)
        err = ((out.double() - ref).norm() / ref.norm()).item()
        rep = 100 if "sequential" in knobs else 300
        ms = median_ms(fn.bind(a, bias, b), warmup=20, rep=rep)
        rows.append((step, knobs or "(none)", flops / ms / 1e9, cublas_ms / ms, err))
        print(rows[-1], flush=True)
    m = k = 512
    tall = 32768
    a = torch.randn(m, tall, device="cuda")
    b = torch.randn(tall, k, device="cuda")
    bias = torch.zeros(tall, device="cuda")
    ref = torch.relu(a.double() @ b.double())
    cublas_tall = median_ms(lambda: torch.relu(a @ b), warmup=20, rep=200)
    flops_tall = 2 * m * k * tall
    for step, knobs in TALL_K:
        fn = compile_program(matmul_relu(m, k, tall), f"fuse,tile{{{knobs}}},to-cuda")
        err = ((fn(a, bias, b).double() - ref).norm() / ref.norm()).item()
        ms = median_ms(fn.bind(a, bias, b), warmup=20, rep=200)
        rows.append((step, knobs, flops_tall / ms / 1e9, cublas_tall / ms, err))
        print(rows[-1], flush=True)
    lines = [
        f"SGEMM ladder, fp32 {n}³, {torch.cuda.get_device_name()}, {time.strftime('%Y-%m-%d')}; "
        f"cuBLAS (TF32 off) {flops / cublas_ms / 1e9:.1f} TFLOP/s in the same run; tall-K rows: "
        f"cuBLAS {flops_tall / cublas_tall / 1e9:.1f} TFLOP/s, ratios against that",
        "",
        "| step | knobs (`tile{...}`) | TFLOP/s | × cuBLAS | rel err |",
        "|---|---|---|---|---|",
        *(f"| {s} | `{k}` | {t:.1f} | {r:.2f} | {e:.1e} |" for s, k, t, r, e in rows),
    ]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
