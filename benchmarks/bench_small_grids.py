"""bf16 GEMMs on small grids (fewer 64×64 output tiles than SMs) under several `tile` settings,
against cuBLAS in the same run: the data behind `splitk=0` (passes/tile/gemm/split_k_plan.py)
and the mma.sync rule's `stages`.

The shapes: every shape of bench_gemm_sweep.py whose 64×64 tiles are fewer than the SMs (its
random linears and batched 127³), and a few more drawn the same way from a second seed, plus
aligned ones (on wgmma at `splitk=1`), and the Llama-3-8B projections at M = 8 and 64 (decode
steps: the skinny rules' shapes, which `splitk=0` leaves to them). Each row gives the time of
each setting (ms) and its ratio to cuBLAS; the last column the setting the default picks.

Usage: python benchmarks/bench_small_grids.py [--settings "splitk=1 stages=1;splitk=1;;splitk=4"]
       [--names r19,a0] [--out small.md]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time

from bench_gemm_sweep import LLAMA, RANDOM_HIGH, RANDOM_LOW, Shape, shapes

from tinyopt.compiler import apply_pipeline, parse
from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.target import H200

SETTINGS = "splitk=1 stages=1;splitk=1;splitk=4;splitk=8;splitk=16;"
"""Knob settings timed for each shape, `;`-separated (an empty one: the defaults)."""

EXTRA_SEED, EXTRA_COUNT = 7, 60


def small(shape: Shape) -> bool:
    tiles = max(shape.batch, 1) * -(-shape.m // 64) * -(-shape.n // 64)
    return tiles < H200.sms and shape.m > 64


def small_shapes() -> list[Shape]:
    out = [s for s in shapes(["random", "batched"]) if small(s)]
    rng = random.Random(EXTRA_SEED)
    lo, hi = math.log(RANDOM_LOW), math.log(RANDOM_HIGH)
    extra = []
    for i in range(EXTRA_COUNT):
        m, n, k = (round(math.exp(rng.uniform(lo, hi))) for _ in range(3))
        extra.append(Shape("extra", f"e{i:02d}", "linear", m, n, k))
    out += [s for s in extra if small(s)][:12]
    out += [
        Shape("decode", f"d{m}_{name}", "linear", m, n, k)
        for m in (8, 64)
        for name, k, n in LLAMA["llama8b"]
    ]
    out += [
        Shape("aligned", "a0", "linear", 256, 256, 8192),
        Shape("aligned", "a1", "linear", 128, 1024, 8192),
        Shape("aligned", "a2", "matmul", 512, 512, 4096),
        Shape("aligned", "a3", "linear", 384, 128, 16384),
    ]
    return out


def chosen(shape: Shape) -> str:
    """The default plan's rules, with the split count where K is split."""
    module = apply_pipeline(parse(shape.text()), "fuse,plan")
    words = []
    for kernel in loop.kernels(module):
        rule = kernel.attributes[tile.PLAN].rule.data  # type: ignore[union-attr]
        if kernel.sym_name.data.endswith("_splitk"):
            nest = next(op for op in kernel.walk() if isinstance(op, loop.ParallelOp))
            rule += f" splitk={nest.extents[0] // max(shape.batch, 1)}"
        words.append(rule)
    return ", ".join(words)


def main() -> None:
    import torch
    import torch.nn.functional as F
    from harness import compile_program, median_ms, publish, rel_error

    parser = argparse.ArgumentParser()
    parser.add_argument("--settings", default=SETTINGS)
    parser.add_argument("--names", default="", help="comma-separated shape names (default all)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    settings = args.settings.split(";")
    rows = []
    start = time.perf_counter()
    names = set(args.names.split(",")) if args.names else None
    for shape in [s for s in small_shapes() if names is None or s.name in names]:
        x, w = shape.operands()

        def cublas(x=x, w=w, form=shape.form):
            if form == "linear":
                return F.linear(x, w)
            return torch.bmm(x, w) if form == "bmm" else torch.matmul(x, w)

        ref = cublas(x.double(), w.double())
        theirs = median_ms(cublas, warmup=10, rep=50)
        cells = []
        for knobs in settings:
            pipeline = f"fuse,tile{{{knobs}}},to-cuda" if knobs else "fuse,tile,to-cuda"
            try:
                t0 = time.perf_counter()
                fn = compile_program(shape.text(), pipeline)
                t1 = time.perf_counter()
                err = rel_error(fn(x, w), ref)
                ours = median_ms(fn.bind(x, w), warmup=10, rep=50)
                print(
                    f"  {shape.name} {knobs!r}: compile {t1 - t0:.1f} s, "
                    f"check and time {time.perf_counter() - t1:.1f} s",
                    file=sys.stderr,
                )
                bad = "" if err < 2e-2 else f" ERR {err:.1e}"
                cells.append(f"{ours:.4f} ({theirs / ours:.2f}){bad}")
            except Exception as e:  # noqa: BLE001 - a sweep reports every failure and goes on
                cells.append(f"FAILED {type(e).__name__}")
        default = chosen(shape)
        rows.append(
            f"| {shape.name} | {shape.dims} | {theirs:.4f} | "
            + " | ".join(cells)
            + f" | {default} |"
        )
        print(rows[-1], flush=True)
    header = " | ".join(s or "defaults" for s in settings)
    publish(
        [
            f"bf16 small-grid GEMMs, {torch.cuda.get_device_name()}, {time.strftime('%Y-%m-%d')}; "
            f"ms (× cuBLAS) per tile setting; cuBLAS in the same run; "
            f"{time.perf_counter() - start:.0f} s",
            "",
            f"| shape | (batch×)M×N×K | cuBLAS ms | {header} | default's kernels |",
            "|---|---|---|" + "---|" * len(settings) + "---|",
            *rows,
        ],
        args.out,
    )


if __name__ == "__main__":
    main()
