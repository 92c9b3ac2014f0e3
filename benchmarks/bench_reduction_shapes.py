"""Reductions of awkward shapes against torch: few long rows, all of a tensor, several dims.

The shapes the row rule alone handled badly (`passes/tile/split_reduction.py`): a reduction
over a whole tensor or over fewer rows than SMs (split in a partial and a fold kernel), a
reduction over several dimensions (flattened to one), a prime length (no divisor to split by),
reductions over leading or middle dimensions (strided: neighbouring rows are neighbours in
memory). Each row gives tinyopt's time (default pipeline, a bound call), torch eager's and
torch.compile's, the effective bandwidth (bytes read / time), the ratio to the faster torch and
the relative error against float64, and tinyopt's kernels with their rules.

Usage: python benchmarks/bench_reduction_shapes.py [--out results.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
from harness import compile_program, median_ms, publish, rel_error

from tinyopt.compiler import apply_pipeline, parse
from tinyopt.dialects import loop, tile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import reduction  # noqa: E402

WORKLOADS = (
    ("reduce_sum", (1 << 24,), (0,), "f32"),
    ("reduce_sum", (64, 100000), (1,), "f32"),
    ("reduce_mean", (8, 1 << 20), (1,), "f32"),
    ("reduce_max", (4096, 4097), (0, 1), "f32"),
    ("reduce_sum", (3, 1000003), (1,), "f32"),
    ("reduce_mean", (32, 512, 7, 7), (2, 3), "f32"),
    ("reduce_mean", (8, 2048, 768), (0, 1), "f32"),
    ("reduce_sum", (1 << 24,), (0,), "bf16"),
    ("reduce_mean", (16, 3, 224, 224), (1, 2, 3), "bf16"),
    ("reduce_sum", (4096, 4096), (0,), "f32"),
    ("reduce_sum", (100000, 64), (0,), "f32"),
    ("reduce_mean", (16, 1 << 20), (0,), "f32"),
    ("reduce_max", (8, 4096, 1024), (1,), "bf16"),
    ("reduce_mean", (64, 768), (0,), "f32"),
    ("reduce_sum", (512, 768), (0,), "bf16"),
)
"""(op, input shape, reduced dims, element type)."""
TORCH_OPS = {"reduce_sum": torch.sum, "reduce_mean": torch.mean, "reduce_max": torch.amax}
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}


def plans(text: str) -> str:
    """tinyopt's kernels and their rules, `name: rule` joined by `; `."""
    module = apply_pipeline(parse(text), "fuse,plan")
    described = (
        (k.sym_name.data, str(k.attributes[tile.PLAN]).removeprefix("#tile.plan<"))
        for k in loop.kernels(module)
    )
    return "; ".join(f"{name}: {plan.split(',')[0]}" for name, plan in described)


def measure(op: str, shape: tuple[int, ...], dims: tuple[int, ...], element: str) -> str:
    """One table row: tinyopt against torch eager and torch.compile on fresh random data."""
    x = torch.randn(*shape, device="cuda", dtype=DTYPES[element])
    fn = TORCH_OPS[op]
    compiled = torch.compile(lambda a: fn(a, dim=dims))
    compiled(x)
    text = reduction(op, shape, dims, element)
    tiny = compile_program(text)
    err = rel_error(tiny(x), fn(x.double(), dim=dims))
    ms = median_ms(tiny.bind(x))
    eager_ms = median_ms(lambda: fn(x, dim=dims))
    compile_ms = median_ms(lambda: compiled(x))
    best = min(eager_ms, compile_ms)
    name = f"{op} {'x'.join(map(str, shape))} dims {list(dims)} {element}"
    return (
        f"| {name} | {ms:.4f} | {eager_ms:.4f} | {compile_ms:.4f} | "
        f"{x.numel() * x.element_size() / ms / 1e6:.0f} | {best / ms:.2f} | {err:.1e} | "
        f"{plans(text)} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    lines = [
        f"GPU: {torch.cuda.get_device_name()}; date: {time.strftime('%Y-%m-%d')}; "
        f"torch {torch.__version__}",
        "",
        "| reduction | tinyopt ms | eager ms | compile ms | GB/s | × faster torch | rel err | "
        "kernels |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for workload in WORKLOADS:
        lines.append(measure(*workload))
        print(lines[-1], flush=True)
    publish(lines, args.out)


if __name__ == "__main__":
    main()
