"""FP8 GEMMs with block scales against `torch._scaled_mm` in the same run (issue 23): e4m3
operands, f32 scales per 1×128 of A (`[M, K/128]`) and per 128×128 of B (`[K/128, N/128]`,
DeepSeek-V3's recipe), a bf16 output.

Each row: tinyopt's form (`tests/programs.py: block_scaled_matmul`) under the default
pipeline, its plan, its time and TFLOP/s; torch's `_scaled_mm` with the same scales (the first
layout of the scales it accepts: as stored, or A's transposed in memory, "outer-dim-major"),
the ratio; and both results' relative error against the float64 product of the dequantized
operands. A shape torch refuses gets its message instead of a time.
`--knobs` times each shape under each `tile{...}` setting given (repeatable; "" the default).
Usage: python benchmarks/bench_fp8_blocks.py [--shape M,N,K ...] [--knobs "multicast=b" ...]
       [--out f.md]
"""

from __future__ import annotations

import argparse
import os
import re
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import block_scaled_matmul  # noqa: E402
from harness import compile_program, median_ms, publish, rel_error  # noqa: E402

from tinyopt.compiler import lower  # noqa: E402

SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (16384, 4096, 14336), (1000, 4096, 4096))


def _torch_block_scaled(a, w, scale_a, scale_w):
    """`_scaled_mm` of the block scales in the first layout torch takes, with its name; or
    (None, torch's message)."""
    layouts = {
        "as stored": (scale_a, scale_w),
        "A's scales outer-dim-major": (scale_a.t().contiguous().t(), scale_w),
        "both outer-dim-major": (scale_a.t().contiguous().t(), scale_w.t().contiguous().t()),
    }
    message = ""
    for name, (sa, sw) in layouts.items():
        try:
            torch._scaled_mm(a, w.t(), sa, sw, out_dtype=torch.bfloat16)
        except (RuntimeError, ValueError) as exc:
            message = str(exc).splitlines()[0][:160]
            continue
        return (lambda: torch._scaled_mm(a, w.t(), sa, sw, out_dtype=torch.bfloat16)), name
    return None, message


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shape", action="append", help="M,N,K (repeatable)")
    parser.add_argument("--knobs", action="append", help="a tile{...} setting (repeatable)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    settings = args.knobs or [""]
    shapes = [tuple(map(int, s.split(","))) for s in args.shape] if args.shape else SHAPES
    rows = []
    for m, n, k in shapes:
        generator = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(m, k, device="cuda", generator=generator).to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device="cuda", generator=generator).to(torch.float8_e4m3fn)
        kb, nb = -(-k // 128), -(-n // 128)
        scale_a = torch.rand(m, kb, device="cuda", generator=generator) + 0.5
        scale_w = (torch.rand(kb, nb, device="cuda", generator=generator) + 0.5) / k**0.5
        spread_a = scale_a.double().repeat_interleave(128, 1)[:, :k]
        spread_w = scale_w.double().t().repeat_interleave(128, 0)[:n].repeat_interleave(128, 1)
        exact = (a.double() * spread_a) @ (w.double() * spread_w[:, :k]).t()
        text = block_scaled_matmul(m, n, k)
        run, layout = _torch_block_scaled(a, w, scale_a, scale_w)
        torch_ms = median_ms(run) if run is not None else None
        for knobs in settings:
            pipeline = f"fuse,tile{{{knobs}}}" if knobs else "fuse,tile"
            fn = compile_program(text, f"{pipeline},to-cuda")
            plan = str(lower(text, pipeline)[1])
            rule = re.search(r"#tile.plan<(\w+), bm = (\d+), bn = (\d+)", plan)
            rule = f"{rule[1]} {rule[2]}×{rule[3]}" if rule else "?"
            rule += f" `{knobs}`" if knobs else ""
            out = fn(a, scale_a, w, scale_w)
            ours = median_ms(fn.bind(a, scale_a, w, scale_w), warmup=20, rep=200)
            flops = 2 * m * n * k
            if run is None or torch_ms is None:
                torch_cells = f"refused: {layout} | - | -"
            else:
                torch_cells = (
                    f"{torch_ms * 1e3:.1f} ({layout}) | {torch_ms / ours:.3f} | "
                    f"{rel_error(run(), exact):.1e}"
                )
            rows.append(
                f"| {m}×{n}×{k} | {rule} | {ours * 1e3:.1f} | {flops / ours / 1e9:.0f} | "
                f"{torch_cells} | {rel_error(out, exact):.1e} |"
            )
            print(rows[-1], flush=True)
    lines = [
        f"FP8 e4m3 GEMM with 1×128 / 128×128 block scales, bf16 output, "
        f"{torch.cuda.get_device_name()}, torch {torch.__version__} `_scaled_mm` in the same run",
        "",
        "| M×N×K | plan | tinyopt µs | TFLOP/s | `_scaled_mm` µs | × `_scaled_mm` | torch rel err "
        "| rel err |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
    ]
    publish(lines, args.out)


if __name__ == "__main__":
    main()
