"""`streamk=tail` on the wgmma GEMM against its unshared default, bf16 linears (`F.linear`, w
`[N, K]`), × cuBLAS in the same run.

Each row gives cuBLAS's time, then for the default plan and for `streamk=tail` (each with
`--knobs` added): the bound call's time with L2 flushed before each run (`do_bench`), the main
kernel alone launched back to back (no flags kernel, L2 warm: where the shared kernel's own
time shows), the error against float64, and the shared tiles with the steps an owner runs
where the walk keeps K aligned (`wgmma_stream_k.aligned_head`; 0: contiguous shares).

Usage: python benchmarks/bench_stream_k.py [--shapes 1000x2544x6032,700x3000x4096]
       [--knobs "mma=wgmma bm=128 bn=256"] [--out streamk.md]
       python benchmarks/bench_stream_k.py --lower-only   # no GPU: the plans and the walk
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import skinny  # noqa: E402

from tinyopt.compiler import apply_pipeline, parse  # noqa: E402
from tinyopt.dialects import loop  # noqa: E402
from tinyopt.passes.tile.gemm.contraction_plan import stream_k_blocks  # noqa: E402
from tinyopt.passes.tile.gemm.wgmma_stream_k import aligned_head  # noqa: E402

SHAPES = "1000x2544x6032,700x3000x4096,512x4888x9440,1000x4704x4600,3000x3000x3000,64x1024x4096"
"""The thirty-third session's shapes (benchmarks/RESULTS.md runs 1 and 6): grids of fewer tiles
than SMs whose split over K does not fit one wave, and two of more tiles."""

K_STEP = 64
"""bf16 elements a wgmma K step takes."""


def walk(text: str, knobs: str, k: int) -> str:
    """`tiles (head / steps)` of the stream-K kernel `knobs` plans, or why there is none."""
    module = apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")
    for kernel in loop.kernels(module):
        blocks, tiles = stream_k_blocks(kernel)
        if blocks:
            steps = -(-k // K_STEP)
            return f"{tiles} on {blocks} ({aligned_head(tiles, blocks, steps)} / {steps})"
    return "none"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--shapes", default=SHAPES, help="MxNxK, comma-separated")
    parser.add_argument("--knobs", default="", help="a tile{...} setting added to both")
    parser.add_argument("--lower-only", action="store_true", help="the plans, no GPU")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")]
    shared = f"{args.knobs} streamk=tail".strip()
    if args.lower_only:
        for m, n, k in shapes:
            print(f"{m}x{n}x{k}: {walk(skinny(m, n, k, 'bf16'), shared, k)}")
        return
    _measure(shapes, args.knobs, shared, args.out)


def _back_to_back_us(launch: Callable[[], object], count: int = 50) -> float:
    """Microseconds a launch takes on average, queued `count` times back to back."""
    import torch

    for _ in range(5):
        launch()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(count):
        launch()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1e3 / count


def _measure(shapes: list[tuple[int, ...]], knobs: str, shared: str, out: str | None) -> None:
    import torch
    import torch.nn.functional as F
    from harness import compile_program, median_ms, publish, rel_error

    rows = []
    for m, n, k in shapes:
        torch.manual_seed(0)
        x = torch.randn(m, k, device="cuda").bfloat16()
        w = (torch.randn(n, k, device="cuda") / k**0.5).bfloat16()
        reference = F.linear(x.double(), w.double())
        cublas = median_ms(lambda x=x, w=w: F.linear(x, w), warmup=10, rep=100) * 1e3
        text = skinny(m, n, k, "bf16")
        cells = []
        for setting in (knobs, shared):
            fn = compile_program(text, f"fuse,tile{{{setting}}},to-cuda")
            error = rel_error(fn(x, w), reference)
            call = fn.bind(x, w)
            flushed = median_ms(call, warmup=10, rep=100) * 1e3
            main = call.launches[-1]
            alone = _back_to_back_us(lambda main=main, call=call: main(call.frame.stream))
            cells.append(f"{flushed:.1f} ({cublas / flushed:.2f}) | {alone:.1f} | {error:.0e}")
        rows.append(
            f"| {m}×{n}×{k} | {cublas:.1f} | {' | '.join(cells)} | {walk(text, shared, k)} |"
        )
        print(rows[-1], flush=True)
    publish(
        [
            f"streamk=tail against the default, bf16, {torch.cuda.get_device_name()}, "
            f"tile{{{knobs}}}; µs (× cuBLAS)",
            "",
            "| M×N×K | cuBLAS | default | main kernel back to back | error | streamk=tail | main "
            "kernel back to back | error | shared tiles (head / steps) |",
            "|---|---|---|---|---|---|---|---|---|",
            *rows,
        ],
        out,
    )


if __name__ == "__main__":
    main()
