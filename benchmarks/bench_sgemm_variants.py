"""Times FP32 SGEMM knob variants on the issue-3 target shapes against cuBLAS, in one run.

A hand-run search that informs the contraction heuristic (the autotuner will automate it).
Usage: python benchmarks/bench_sgemm_variants.py [--shape BATCHxN | BATCHxMxNxK ...]
       [--variant KNOBS ...] [--rounds R] [--out variants.md]
(defaults: the shapes and variants below; `--variant ""` is the heuristic's choice; with R
rounds every variant and cuBLAS are timed R times, interleaved, and the medians reported; a
variant the tile pass refuses is printed with its diagnostic and left out)
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch
from xdsl.utils.exceptions import DiagnosticException


sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import batched_matmul, matmul_plain  # noqa: E402
from harness import compile_program, median_ms, publish  # noqa: E402

SHAPES = [(1, 4096, 4096, 4096), (1, 1024, 1024, 1024), (256, 256, 256, 256), (64, 512, 512, 512)]
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
    parser.add_argument("--shape", action="append", help="BATCHxN or BATCHxMxNxK, e.g. 64x512")
    parser.add_argument("--variant", action="append", help="tile knobs, e.g. 'bm=64 bn=128'")
    parser.add_argument("--rounds", type=int, default=1, help="timing rounds (medians of)")
    parser.add_argument(
        "--layout", choices=("kn", "nk"), default="kn", help="nk: linear(x, w[N, K], bias)"
    )
    args = parser.parse_args()
    shapes = [parse_shape(s) for s in args.shape] if args.shape else SHAPES
    variants = args.variant if args.variant is not None else VARIANTS
    torch.backends.cuda.matmul.allow_tf32 = False
    lines = [
        "| batch | M×N×K | knobs | TFLOP/s | × cuBLAS | rel err |",
        "|---|---|---|---|---|---|",
    ]
    for batch, m, n, k in shapes:
        a = torch.randn(batch, m, k, device="cuda")
        b = torch.randn(batch, k, n, device="cuda")
        ref = a.double() @ b.double()
        flops = 2 * batch * m * n * k
        # Batch 1 is the 2-D program `x @ w` (whose operands TMA can copy as 2-D boxes).
        text = matmul_plain(m, n, k, "f32", relu=False) if batch == 1 else None
        operands = (a[0], b[0]) if batch == 1 else (a, b)
        expected = ref[0] if batch == 1 else ref
        cublas_call = lambda a=a, b=b: torch.bmm(a, b)  # noqa: E731
        if args.layout == "nk":  # torch's linear layout, as a model's layers hold weights
            w, bias = b[0].T.contiguous(), torch.randn(n, device="cuda")
            text = matmul_plain(m, n, k, "f32", b_layout="nk")
            operands, expected = (a[0], w, bias), ref[0] + bias.double()
            cublas_call = lambda a=a[0], w=w, bias=bias: torch.nn.functional.linear(a, w, bias)  # noqa: E731
        timed = {}
        for knobs in variants:
            pipeline = f"fuse,tile{{{knobs}}},to-cuda" if knobs else "fuse,tile,to-cuda"
            try:
                fn = compile_program(text or batched_matmul(batch, m, n, k), pipeline)
            except DiagnosticException as refusal:
                print(f"{batch}x{m}x{n}x{k} `{knobs}`: {refusal}", flush=True)
                continue
            err = ((fn(*operands).double() - expected).norm() / expected.norm()).item()
            timed[knobs] = (fn.bind(*operands), err, [])
        cublas = []
        for _ in range(args.rounds):  # interleaved, so a drifting clock moves every variant
            cublas.append(median_ms(cublas_call, warmup=20, rep=200))
            for call, _, times in timed.values():
                times.append(median_ms(call, warmup=20, rep=200))
        reference = statistics.median(cublas)
        shape = f"{m}×{n}×{k}"
        lines.append(f"| {batch} | {shape} | cuBLAS | {flops / reference / 1e9:.1f} | 1.00 | |")
        for knobs, (_, err, times) in timed.items():
            ms = statistics.median(times)
            lines.append(
                f"| {batch} | {shape} | `{knobs or '(defaults)'}` | {flops / ms / 1e9:.1f} | "
                f"{reference / ms:.3f} | {err:.1e} |"
            )
            print(lines[-1], flush=True)
    publish(lines, args.out)


def parse_shape(text: str) -> tuple[int, int, int, int]:
    """Returns (batch, M, N, K) of `BATCHxN` (M = N = K) or `BATCHxMxNxK`."""
    numbers = [int(v) for v in text.split("x")]
    return (numbers[0], *numbers[1:] * 3) if len(numbers) == 2 else tuple(numbers)


if __name__ == "__main__":
    main()
