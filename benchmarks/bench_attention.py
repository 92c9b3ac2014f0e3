"""Attention forward (bf16) against torch's SDPA flash and cuDNN backends, in one run.

For each shape, times torch.nn.functional.scaled_dot_product_attention under
`sdpa_kernel(FLASH_ATTENTION)` and `sdpa_kernel(CUDNN_ATTENTION)`, and tinyopt's
`decompose,fuse,flash-attention,tile,to-cuda` (the whole program: every kernel it launches),
and prints TFLOP/s (4·B·H·S²·D FLOPs, half when causal), the ratios to torch flash and cuDNN
(nan where a backend does not run the head dim) and the relative error of heads (0, 0) and
(0, 1) against float64. With `--rounds N` each backend and tinyopt are timed N times in turn
(flash, cuDNN, tinyopt, flash, ...) and each cell is the median of the N medians: a reference's
time moved 5% between two runs a minute apart (D 128 S 2048 cuDNN, H100, benchmarks/RESULTS.md
forty-eighth session), more than the margin the ratio is judged by.
Usage: python benchmarks/bench_attention.py [--shapes 4x32x4096x128 8x32x2048x64] [--rounds 1]
       [--out a.md]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.functional import scaled_dot_product_attention as sdpa

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from attention_programs import attention  # noqa: E402
from harness import compile_program, median_ms, publish, rel_error  # noqa: E402

PIPELINE = "decompose,fuse,flash-attention,tile{knobs},to-cuda"
CHECKED_HEADS = 2
"""Heads of the first batch entry compared with float64 (the whole tensor would not fit)."""


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """Returns attention of the first CHECKED_HEADS heads of batch entry 0 in float64."""
    q, k, v = (t[0, :CHECKED_HEADS].double() for t in (q, k, v))
    scores = q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5
    if causal:
        s = scores.shape[-1]
        scores.masked_fill_(torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1), -torch.inf)
    return torch.softmax(scores, -1) @ v


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", nargs="+", default=["4x32x4096x128", "8x32x2048x64"])
    parser.add_argument("--knobs", default="", help="extra tile knobs, e.g. 'attn=sync'")
    parser.add_argument("--rounds", type=int, default=1, help="timings of each, taken in turn")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    lines = [f"attention forward bf16 on {torch.cuda.get_device_name()}", ""]
    lines += [
        "| B×H×S×D | causal | schedule | ms | TFLOP/s | vs torch flash | vs cuDNN | rel err |",
        "|---|---|---|---|---|---|---|---|",
    ]
    knobs = f"{{{args.knobs}}}" if args.knobs else ""
    for shape in args.shapes:
        b, h, s, d = (int(x) for x in shape.split("x"))
        for causal in (False, True):
            q, k, v = (torch.randn(b, h, s, d, device="cuda").bfloat16() for _ in range(3))
            ref = reference(q, k, v, causal)
            flops = 4 * b * h * s * s * d / (2 if causal else 1)
            backends: dict[str, SDPBackend | None] = {}  # None: the backend refuses the shape
            errors: dict[str, float] = {}
            for name, backend in (
                ("torch flash", SDPBackend.FLASH_ATTENTION),
                ("torch cuDNN", SDPBackend.CUDNN_ATTENTION),
            ):
                try:
                    with sdpa_kernel(backend):
                        out = sdpa(q, k, v, is_causal=causal)
                except RuntimeError as error:  # the backend does not run this head dim
                    print(f"{name} {shape}: {str(error).splitlines()[0]}", flush=True)
                    backends[name], errors[name] = None, float("nan")
                    continue
                backends[name], errors[name] = backend, rel_error(out[0, :CHECKED_HEADS], ref)
            program = attention(b, h, s, d, "bf16", causal)
            fn = compile_program(program, PIPELINE.format(knobs=knobs))
            out = fn(q, k, v)
            torch.cuda.synchronize()
            errors["tinyopt"] = rel_error(out[0, :CHECKED_HEADS], ref)
            bound = fn.bind(q, k, v)
            times: dict[str, list[float]] = {name: [] for name in errors}
            for _ in range(args.rounds):
                for name, backend in backends.items():
                    if backend is None:
                        times[name].append(float("nan"))
                        continue
                    with sdpa_kernel(backend):
                        ms = median_ms(lambda c=causal: sdpa(q, k, v, is_causal=c))
                    times[name].append(ms)
                times["tinyopt"].append(median_ms(bound))
            if args.rounds > 1:
                print(f"{shape} causal={causal} rounds (ms): {times}", flush=True)
            rows = [(name, statistics.median(times[name]), errors[name]) for name in errors]
            flash_ms, cudnn_ms = rows[0][1], rows[1][1]
            for name, ms, err in rows:
                lines.append(
                    f"| {shape} | {'yes' if causal else 'no'} | {name} | {ms:.3f} | "
                    f"{flops / ms / 1e9:.0f} | {flash_ms / ms:.2f} | {cudnn_ms / ms:.2f} | "
                    f"{err:.1e} |"
                )
                print(lines[-1], flush=True)
    publish(lines, args.out)


if __name__ == "__main__":
    main()
