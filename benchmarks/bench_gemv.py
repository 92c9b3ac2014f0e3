"""GEMVs and skinny linears (the skinny rules, passes/tile/gemm/skinny.py on CUDA cores and
skinny_mma.py on tensor cores for f16/bf16) against cuBLAS.

The Llama-3-8B decode linears in torch's layout (`y = x @ wᵀ`, w `[N, K]`, no bias) at M = 1,
8, 16 and 64 rows, f32 and bf16: q/o (K, N) = (4096, 4096), k/v (4096, 1024), gate/up (4096,
14336) and down (14336, 4096). Each row gives tinyopt's time (a bound call, L2 flushed by
`do_bench` before each run), the weights' bytes over it (GB/s: what a GEMV streams), cuBLAS's
`F.linear` (TF32 off) measured in the same process, their ratio (> 1: tinyopt faster), the
error against float64, and the kernels with their plans.

Usage: python benchmarks/bench_gemv.py [--m 1,8,16,64] [--dtype f32,bf16] [--knobs "skinny=off"]
       [--no-pdl] [--out table.md]
       python benchmarks/bench_gemv.py --lower-only    # no GPU: each case's kernels and plans
"""

from __future__ import annotations

import argparse
import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import skinny  # noqa: E402

from tinyopt.compiler import apply_pipeline, parse  # noqa: E402
from tinyopt.dialects import loop, tile  # noqa: E402
from tinyopt.passes.tile.gemm.skinny_split import PARTIAL  # noqa: E402

LINEARS = (
    ("q/o", 4096, 4096),
    ("k/v", 4096, 1024),
    ("gate/up", 4096, 14336),
    ("down", 14336, 4096),
)
"""(name, K, N) of the Llama-3-8B decoder's linears."""

ROWS = (1, 8, 16, 64)
BYTES = {"f32": 4, "bf16": 2}


def plans(text: str, knobs: str) -> list[str]:
    """`kernel: rule (knobs)` for each kernel the plan makes of `text`; a split's partial-sum
    kernel also shows its loop extents (K chunks × batch first)."""
    module = apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")
    out = []
    for kernel in loop.kernels(module):
        plan = kernel.attributes[tile.PLAN]
        described = re.sub(r"^#tile\.plan<|>$", "", str(plan))
        if PARTIAL in kernel.attributes:
            (nest,) = kernel.body.block.ops
            described += f", over {list(nest.extents)}"  # type: ignore[attr-defined]
        out.append(f"{kernel.sym_name.data}: {described}")
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--m", default=",".join(map(str, ROWS)), help="rows, comma-separated")
    parser.add_argument("--dtype", default="f32,bf16", help="f32 and/or bf16, comma-separated")
    parser.add_argument("--knobs", default="", help="a tile{...} setting, e.g. skinny=off")
    parser.add_argument("--lower-only", action="store_true", help="print the plans, no GPU")
    parser.add_argument(
        "--no-pdl",
        dest="pdl",
        action="store_false",
        help="no programmatic dependent launch (to-cuda{pdl=0}; it is on by default)",
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    cases = [
        (name, m, k, n, dtype)
        for dtype in args.dtype.split(",")
        for m in map(int, args.m.split(","))
        for name, k, n in LINEARS
    ]
    if args.lower_only:
        for name, m, k, n, dtype in cases:
            print(f"{name} {m}x{k}->{n} {dtype}")
            for line in plans(skinny(m, n, k, dtype), args.knobs):
                print(f"    {line}")
        return
    _measure(cases, args.knobs, args.out, args.pdl)


def _measure(
    cases: list[tuple[str, int, int, int, str]], knobs: str, out: str | None, pdl: bool = True
) -> None:
    import torch
    from harness import compile_program, median_ms, publish, rel_error

    torch.backends.cuda.matmul.allow_tf32 = False
    kinds = {"f32": torch.float32, "bf16": torch.bfloat16}
    pipeline = (f"fuse,tile{{{knobs}}}," if knobs else "fuse,tile,") + (
        "to-cuda" if pdl else "to-cuda{pdl=0}"
    )
    rows = []
    for name, m, k, n, dtype in cases:
        torch.manual_seed(0)
        x = torch.randn(m, k, device="cuda").to(kinds[dtype])
        w = (torch.randn(n, k, device="cuda") / k**0.5).to(kinds[dtype])
        text = skinny(m, n, k, dtype)
        fn = compile_program(text, pipeline)
        error = rel_error(fn(x, w), torch.nn.functional.linear(x.double(), w.double()))
        ours = median_ms(fn.bind(x, w), warmup=20, rep=200)
        cublas = median_ms(lambda x=x, w=w: torch.nn.functional.linear(x, w), warmup=20, rep=200)
        weight_bytes = n * k * BYTES[dtype]
        kernels = "; ".join(plans(text, knobs))
        rows.append(
            f"| {name} | {m} | {k}×{n} | {dtype} | {ours * 1e3:.1f} | "
            f"{weight_bytes / ours / 1e6:.0f} | {cublas * 1e3:.1f} | "
            f"{weight_bytes / cublas / 1e6:.0f} | {cublas / ours:.2f} | {error:.1e} | {kernels} |"
        )
        print(rows[-1], flush=True)
    lines = [
        f"GEMV / skinny linears (x @ wᵀ), {torch.cuda.get_device_name()}, "
        f"tile{{{knobs}}}{'' if pdl else ' to-cuda{pdl=0}'}; cuBLAS F.linear (TF32 off) in the "
        "same run; GB/s = weight bytes / time",
        "",
        "| linear | M | K×N | dtype | tinyopt µs | GB/s | cuBLAS µs | cuBLAS GB/s | × cuBLAS "
        "| rel err | kernels: plan |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
        *rows,
    ]
    publish(lines, out)


if __name__ == "__main__":
    main()
