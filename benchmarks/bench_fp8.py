"""FP8 GEMMs against `torch._scaled_mm` in the same run (issue 23): per-tensor scales, a bf16
output, the weights `[N, K]` as `_scaled_mm` takes them.

Each row: tinyopt's `_scaled_mm` form (`tests/programs.py: scaled_matmul`, one f32 scale, the
product of the two per-tensor scales) under the default pipeline with the `tile` knobs given
(`--knobs`), its plan's rule and `promote`, its time and TFLOP/s, torch's time
(`torch._scaled_mm`, `use_fast_accum` off and on), the ratio to each, and both results'
relative error against the float64 product of the dequantized operands. `promote=on` (the
default) matches torch's `use_fast_accum=False` (K steps summed in f32), `promote=off` its
`use_fast_accum=True` (all of K in the tensor cores).
Usage: python benchmarks/bench_fp8.py [--shape M,N,K ...] [--format e4m3|e5m2]
       [--knobs "promote=off"] [--out f.md]
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import scaled_matmul  # noqa: E402
from harness import compile_program, median_ms, publish, rel_error  # noqa: E402

from tinyopt.compiler import lower  # noqa: E402

SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 4096, 14336), (1000, 4096, 4096))
FORMATS = {"e4m3": ("f8E4M3FN", torch.float8_e4m3fn), "e5m2": ("f8E5M2", torch.float8_e5m2)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", action="append", help="M,N,K (repeatable)")
    parser.add_argument("--format", default="e4m3", choices=sorted(FORMATS))
    parser.add_argument("--knobs", default="", help="tile knobs, e.g. promote=off")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    shapes = [tuple(map(int, s.split(","))) for s in args.shape] if args.shape else SHAPES
    element, dtype = FORMATS[args.format]
    rows = []
    for m, n, k in shapes:
        generator = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(m, k, device="cuda", generator=generator).to(dtype)
        w = torch.randn(n, k, device="cuda", generator=generator).to(dtype)
        scale_a = torch.tensor(0.5, device="cuda")
        scale_w = torch.tensor(1.0 / k**0.5, device="cuda")
        scale = (scale_a * scale_w).reshape(1)
        exact = (a.double() @ w.double().t()) * scale.double()

        def scaled_mm(fast: bool) -> torch.Tensor:
            return torch._scaled_mm(
                a, w.t(), scale_a, scale_w, out_dtype=torch.bfloat16, use_fast_accum=fast
            )

        torch_ms = median_ms(lambda: scaled_mm(False))
        fast_ms = median_ms(lambda: scaled_mm(True))
        torch_error = rel_error(scaled_mm(False), exact)
        text = scaled_matmul(m, n, k, element, "bf16")
        fn = compile_program(text, f"fuse,tile{{{args.knobs}}},to-cuda")
        plan = str(lower(text, f"fuse,tile{{{args.knobs}}}")[1])
        rule = re.search(r"#tile.plan<(\w+)", plan)[1]
        if promote := re.search(r'promote = "(\w+)"', plan):
            rule += f" promote={promote[1]}"
        out = fn(a, w, scale)
        ours = median_ms(fn.bind(a, w, scale), warmup=20, rep=200)
        flops = 2 * m * n * k
        rows.append(
            f"| {m}×{n}×{k} | {rule} | {ours * 1e3:.1f} | {flops / ours / 1e9:.0f} | "
            f"{torch_ms * 1e3:.1f} | {fast_ms * 1e3:.1f} | {torch_ms / ours:.3f} | "
            f"{fast_ms / ours:.3f} | "
            f"{rel_error(out, exact):.1e} | {torch_error:.1e} |"
        )
        print(rows[-1], flush=True)
    lines = [
        f"FP8 {args.format} GEMM, bf16 output, per-tensor scales, "
        f"{torch.cuda.get_device_name()}, torch._scaled_mm in the same run",
        "",
        f"tile knobs: `{args.knobs or 'defaults'}`",
        "",
        "| M×N×K | rule | tinyopt µs | TFLOP/s | _scaled_mm µs | fast accum µs | × _scaled_mm "
        "| × fast accum | rel err | torch rel err |",
        "|---|---|---|---|---|---|---|---|---|---|",
        *rows,
    ]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
