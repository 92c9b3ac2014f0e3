"""Reduction rewrites benchmark: softmax and LayerNorm with and without their rewrites.

Softmax with and without `online-softmax`, LayerNorm with and without `welford`, against
torch eager and torch.compile, in one GPU run.

Each tinyopt variant is a pipeline: the rewrite on or off, and the row cache of `tile` on
(`cache=1`, the default: a row that fits the register budget is read from memory once however
many passes go over it) or off (`cache=0`: every pass over the row reads memory, which is where
merging two reductions into one saves a read; rows of 131072 never fit). Rows: median time
(triton.testing.do_bench), effective bandwidth (bytes of inputs and outputs / time), the ratio
to the faster torch time, and the relative error against a float64 torch result.
Usage: python benchmarks/bench_reductions.py [--out results.md]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F


sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import layernorm, softmax  # noqa: E402
from harness import compile_program, median_ms, publish, rel_error  # noqa: E402

VARIANTS = {
    "two reductions": "fuse,tile,to-cuda",
    "rewritten": "fuse,{rewrite},tile,to-cuda",
    "two reductions, cache=0": "fuse,tile{{cache=0}},to-cuda",
    "rewritten, cache=0": "fuse,{rewrite},tile{{cache=0}},to-cuda",
}
"""Pipelines of the tinyopt variants; `{rewrite}` is the workload's rewrite pass."""


def run_workload(
    name: str,
    text: str,
    rewrite: str,
    args: tuple[torch.Tensor, ...],
    reference: torch.Tensor,
    torch_fn: Callable[..., torch.Tensor],
    nbytes: int,
) -> list[tuple[str, str, float, float, float, float]]:
    """Time torch eager, torch.compile and every tinyopt variant on one workload."""
    gbs = lambda ms: nbytes / ms / 1e6  # noqa: E731
    compiled = torch.compile(torch_fn)
    compiled(*args)
    torch_ms = {
        "torch eager": median_ms(lambda: torch_fn(*args)),
        "torch.compile": median_ms(lambda: compiled(*args)),
    }
    best = min(torch_ms.values())
    rows = []
    for label, ms in torch_ms.items():
        err = rel_error((torch_fn if label == "torch eager" else compiled)(*args), reference)
        rows.append((name, label, ms, gbs(ms), best / ms, err))
        print(rows[-1], flush=True)
    for label, pipeline in VARIANTS.items():
        fn = compile_program(text, pipeline.format(rewrite=rewrite))
        err = rel_error(fn(*args), reference)
        ms = median_ms(fn.bind(*args))
        rows.append((name, f"tinyopt {label}", ms, gbs(ms), best / ms, err))
        print(rows[-1], flush=True)
    return rows


def main() -> None:
    """Run the softmax and LayerNorm workloads and print (or write) a markdown table."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    rows = []

    for shape in ((1, 28, 2048, 2048), (224, 131072)):
        x = torch.randn(*shape, device="cuda")
        rows += run_workload(
            f"softmax f32 {'x'.join(map(str, shape))}",
            softmax(shape),
            "online-softmax",
            (x,),
            torch.softmax(x.double(), -1),
            lambda a: torch.softmax(a, -1),
            2 * x.numel() * 4,
        )
        del x

    rows_, cols = 32768, 4096
    x = torch.randn(rows_, cols, device="cuda")
    w = torch.randn(cols, device="cuda")
    b = torch.randn(cols, device="cuda")
    rows += run_workload(
        f"layernorm f32 {rows_}x{cols}",
        layernorm((rows_, cols)),
        "welford",
        (x, w, b),
        F.layer_norm(x.double(), (cols,), w.double(), b.double(), 1e-5),
        lambda a, ww, bb: F.layer_norm(a, (cols,), ww, bb, 1e-5),
        (2 * x.numel() + 2 * cols) * 4,
    )

    lines = [
        f"GPU: {torch.cuda.get_device_name()}; date: {time.strftime('%Y-%m-%d')}; "
        f"torch {torch.__version__}",
        "",
        "| workload | implementation | ms | GB/s | vs faster torch | rel err |",
        "|---|---|---|---|---|---|",
    ]
    for name, label, ms, bandwidth, ratio, err in rows:
        lines.append(
            f"| {name} | {label} | {ms:.4f} | {bandwidth:.0f} | {ratio:.2f}x | {err:.1e} |"
        )
    publish(lines, args.out)


if __name__ == "__main__":
    main()
