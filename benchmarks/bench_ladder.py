"""The matmul ladder: one row per optimization step, each a knob setting of the `tile` pass.

Every step compiles `relu(x @ w)` (`x @ w` for atomic split-K; fp32 at size³, the split-K
steps at 512×512×32768, the tensor-core steps in bf16), checks it against a float64 torch
result, and times it against cuBLAS on the same shape and type in the same run (TF32 off,
except for the TF32 step).
Usage: python benchmarks/bench_ladder.py [--size N] [--steps 0,3,9] [--out ladder.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import matmul_plain  # noqa: E402

from harness import compile_program, median_ms, publish, rel_error  # noqa: E402
from ladder import LADDER  # noqa: E402

TORCH_TYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--out", default=None)
    parser.add_argument("--steps", default=None, help="comma-separated step numbers (from 0)")
    args = parser.parse_args()
    wanted = {int(i) for i in args.steps.split(",")} if args.steps else None
    torch.backends.cuda.matmul.allow_tf32 = False
    cases: dict[tuple[str, tuple[int, int, int]], tuple] = {}
    rows = []
    for number, step in enumerate(LADDER):
        if wanted is not None and number not in wanted:
            continue
        m, n, k = shape = step.shape(args.size)
        key = (step.dtype, shape, step.relu, step.tf32)
        if key not in cases:
            torch.backends.cuda.matmul.allow_tf32 = step.tf32  # cuBLAS in the step's precision
            x = torch.randn(m, k, device="cuda").to(TORCH_TYPES[step.dtype])
            w = torch.randn(k, n, device="cuda").to(TORCH_TYPES[step.dtype])
            act = torch.relu if step.relu else (lambda y: y)
            cublas = median_ms(lambda x=x, w=w, act=act: act(x @ w), warmup=20, rep=200)
            torch.backends.cuda.matmul.allow_tf32 = False
            cases[key] = (x, w, act(x.double() @ w.double()), cublas)
        x, w, ref, cublas = cases[key]
        program = matmul_plain(m, n, k, step.dtype, relu=step.relu)
        fn = compile_program(program, step.pipeline)
        err = rel_error(fn(x, w), ref)
        rep = 100 if "sequential" in step.knobs else 300
        ms = median_ms(fn.bind(x, w), warmup=20, rep=rep)
        tflops = 2 * m * n * k / ms / 1e9
        rows.append((number, step, shape, tflops, 2 * m * n * k / cublas / 1e9, cublas / ms, err))
        print(rows[-1][0], step.name, f"{tflops:.1f} TFLOP/s {cublas / ms:.2f}x", flush=True)
    lines = [
        f"Matmul ladder, `relu(x @ w)`, {torch.cuda.get_device_name()}, "
        f"{time.strftime('%Y-%m-%d')}; cuBLAS on the same shape and type, same run (TF32 off, "
        "except for the TF32 step: cuBLAS in TF32)",
        "",
        "| # | step | type | M×N×K | knobs (`tile{...}`) | TFLOP/s | cuBLAS TFLOP/s | × cuBLAS "
        "| rel err |",
        "|---|---|---|---|---|---|---|---|---|",
        *(
            f"| {i} | {s.name} | {s.dtype} | {'×'.join(map(str, shape))} | `{s.knobs or '(none)'}` "
            f"| {t:.1f} | {c:.1f} | {r:.2f} | {e:.1e} |"
            for i, s, shape, t, c, r, e in rows
        ),
    ]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
