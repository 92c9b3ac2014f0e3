"""The Llama-style decoder block (examples/llama_block.py) in bf16: tinyopt vs eager and
torch.compile in one run, and where tinyopt's time goes, kernel by kernel.

Defaults are issue 6's shape: batch 1, seq 2048, hidden 4096, 32 heads, 8 KV heads, MLP 14336.
tinyopt runs as a `CompiledModel` (weights bound once, intermediates in one arena, kernels
launched on the caller's tensors with packed parameters); torch.compile in its default mode.
The error of each is against the same block in float64.
Usage: python benchmarks/bench_llama.py [--seq 2048 --dim 4096 --heads 32 --kv-heads 8
       --hidden 14336] [--pipeline P [--pipeline P2 ...]] [--out llama.md]
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
import time

import torch

from harness import median_ms, publish, rel_error
from tinyopt.frontends.compiled_model import PIPELINE, CompiledModel

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import load_example  # noqa: E402

llama = load_example("llama_block.py")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--dim", type=int, default=4096)
    parser.add_argument("--heads", type=int, default=32)
    parser.add_argument("--kv-heads", type=int, default=8)
    parser.add_argument("--hidden", type=int, default=14336)
    parser.add_argument(
        "--pipeline", action="append", help=f"tinyopt pipeline (repeatable; default {PIPELINE})"
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    pipelines = args.pipeline or [PIPELINE]
    torch.manual_seed(0)
    block = llama.LlamaBlock(args.dim, args.heads, args.kv_heads, args.hidden, args.seq)
    block = block.to("cuda", torch.bfloat16).eval()
    x = torch.randn(1, args.seq, args.dim, device="cuda").bfloat16()
    with torch.no_grad():
        exact = copy.deepcopy(block).double()(x.double())
        eager_out = block(x)
        compiled = torch.compile(block)
        compiled_out = compiled(x)
        rows = [
            ("torch eager", median_ms(lambda: block(x)), rel_error(eager_out, exact)),
            ("torch.compile", median_ms(lambda: compiled(x)), rel_error(compiled_out, exact)),
        ]
        models = []
        for pipeline in pipelines:
            start = time.perf_counter()
            model = CompiledModel(block, x, pipeline=pipeline)
            build_s = time.perf_counter() - start
            ours = model(x)
            name = f"tinyopt `{pipeline}` (built in {build_s:.1f} s)"
            rows.append((name, median_ms(lambda m=model: m(x)), rel_error(ours, exact)))
            models.append((pipeline, model))
    shape = f"seq {args.seq}, hidden {args.dim}, {args.heads} heads, {args.kv_heads} KV heads"
    lines = [
        f"Llama block bf16 ({shape}, MLP {args.hidden}) on {torch.cuda.get_device_name()}",
        "",
        "| implementation | ms | vs torch.compile | rel err vs float64 |",
        "|---|---|---|---|",
    ]
    compile_ms = rows[1][1]
    for name, ms, err in rows:
        lines.append(f"| {name} | {ms:.3f} | {compile_ms / ms:.2f}x | {err:.1e} |")
    for pipeline, model in models:
        lines += ["", f"Kernels of `{pipeline}`:", ""]
        lines += ["| # | kernel | grid | block | ms | share |", "|---|---|---|---|---|---|"]
        stream = torch.cuda.current_stream().cuda_stream
        timed = [
            (launch, median_ms(lambda lc=launch: lc(stream), 10, 50))
            for launch in model.call.launches
        ]
        total = sum(ms for _, ms in timed)
        for i, (launch, ms) in enumerate(timed):
            lines.append(
                f"| {i} | {launch.name} | {launch.kernel.grid} | "
                f"{launch.kernel.block} | {ms:.3f} | {ms / total:.0%} |"
            )
        lines.append(f"| | sum of kernels | | | {total:.3f} | |")
    publish(lines, args.out)


if __name__ == "__main__":
    main()
