"""Times FP32 SGEMM knob variants on the issue-3 target shapes against cuBLAS, in one run.

A hand-run search that informs the contraction heuristic (the autotuner will automate it).
Usage: python benchmarks/bench_sgemm_variants.py [--shape BATCHxN ...] [--variant KNOBS ...]
       [--out variants.md]
(defaults: the shapes and variants below; `--variant ""` is the heuristic's choice)
"""

from __future__ import annotations

import argparse
import os
import sys

import torch


sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import batched_matmul, matmul_plain  # noqa: E402
from harness import compile_program, median_ms, publish  # noqa: E402

SHAPES = [(1, 4096), (1, 1024), (256, 256), (64, 512)]
VARIANTS = [
    "",
    "bm=128 bn=128 tm=8 tn=8",
    "bm=128 bn=128 tm=8 tn=8 bk=16",
    "bm=128 bn=64 tm=8 tn=8",
    "bm=64 bn=128 tm=8 tn=8",
    "bm=64 bn=64 tm=8 tn=8",
    "bm=64 bn=64 tm=4 tn=4",
    "bm=64 bn=64 tm=8 tn=4",
    "bm=32 bn=64 tm=4 tn=4",
    "bm=128 bn=128 tm=8 tn=8 minblocks=1",
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    parser.add_argument("--shape", action="append", help="BATCHxN, e.g. 64x512")
    parser.add_argument("--variant", action="append", help="tile knobs, e.g. 'bm=64 bn=128'")
    args = parser.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shape] if args.shape else SHAPES
    variants = args.variant if args.variant is not None else VARIANTS
    torch.backends.cuda.matmul.allow_tf32 = False
    lines = ["| batch | n | knobs | TFLOP/s | × cuBLAS | rel err |", "|---|---|---|---|---|---|"]
    for batch, n in shapes:
        a = torch.randn(batch, n, n, device="cuda")
        b = torch.randn(batch, n, n, device="cuda")
        ref = a.double() @ b.double()
        flops = 2 * batch * n**3
        cublas = median_ms(lambda a=a, b=b: torch.bmm(a, b), warmup=20, rep=200)
        lines.append(f"| {batch} | {n} | cuBLAS | {flops / cublas / 1e9:.1f} | 1.00 | |")
        # Batch 1 is the 2-D program `x @ w` (whose operands TMA can copy as 2-D boxes).
        text = matmul_plain(n, n, n, "f32", relu=False) if batch == 1 else None
        operands = (a[0], b[0]) if batch == 1 else (a, b)
        expected = ref[0] if batch == 1 else ref
        for knobs in variants:
            pipeline = f"fuse,tile{{{knobs}}},to-cuda" if knobs else "fuse,tile,to-cuda"
            fn = compile_program(text or batched_matmul(batch, n, n, n), pipeline)
            err = ((fn(*operands).double() - expected).norm() / expected.norm()).item()
            ms = median_ms(fn.bind(*operands), warmup=20, rep=200)
            lines.append(
                f"| {batch} | {n} | `{knobs or '(defaults)'}` | {flops / ms / 1e9:.1f} | "
                f"{cublas / ms:.2f} | {err:.1e} |"
            )
            print(lines[-1], flush=True)
    publish(lines, args.out)


if __name__ == "__main__":
    main()
