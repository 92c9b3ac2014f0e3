"""Random bf16 linears (`F.linear`, w `[N, K]`, no bias) under the default plan against cuBLAS
in the same run: the check that a planning rule tuned on a few shapes holds on shapes nobody
named. M is drawn from 65-1000 or 1000-6000 (half each), N and K are multiples of 8 in 320-8000
(TMA-addressable rows; half of them start off 32-byte sectors), from a fixed seed.

Each row gives the plan's kernels (copies named `pad_a` / `pad_b`, the GEMM's rule and block),
tinyopt's time with L2 flushed (`do_bench`), cuBLAS's, the ratio and the error of the first 256
rows against float64; the last line the geometric mean. Two commits compare by running it
under each (`PYTHONPATH=<the other tree's site> python benchmarks/bench_random_linears.py`);
two knob settings by `--knobs` given once for each (each row then times every setting, in the
same process, and the last lines give each setting's geometric mean).

Usage: python benchmarks/bench_random_linears.py [--seed 3434] [--count 160]
       [--shapes MxNxK,...] [--knobs "multicast=off" ...] [--out table.md]
       python benchmarks/bench_random_linears.py --lower-only   # the plans, no GPU
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import skinny  # noqa: E402

from tinyopt.compiler import apply_pipeline, parse  # noqa: E402

ERROR_ROWS = 256
"""Rows of the output checked against float64 (a float64 product of all of them is slow)."""


def random_shapes(seed: int, count: int) -> list[tuple[int, int, int]]:
    """`count` (M, N, K) drawn as the module docstring says."""
    rng = random.Random(seed)
    shapes = []
    for _ in range(count):
        m = rng.choice([rng.randint(65, 1000), rng.randint(1000, 6000)])
        shapes.append((m, 8 * rng.randint(40, 1000), 8 * rng.randint(40, 1000)))
    return shapes


def plan_of(m: int, n: int, k: int, knobs: str = "") -> str:
    """The plan (default, or under `knobs`) in a few words: copy kernels, then each GEMM's
    rule and block."""
    text = str(apply_pipeline(parse(skinny(m, n, k, "bf16")), f"fuse,plan{{{knobs}}}"))
    copies = re.findall(r"loop.kernel @\w+_(pad_[ab])", text)
    gemms = [
        f"{rule} {bm}x{bn}" if bm else rule
        for rule, bm, bn in re.findall(r"plan<(\w+)(?:, bm = (\d+), bn = (\d+))?", text)
        if rule != "elementwise"
    ]
    shared = re.findall(r'multicast = "([ab])"', text)
    return " ".join([*copies, *gemms, *(f"multicast {o.upper()}" for o in shared)])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=3434)
    parser.add_argument("--count", type=int, default=160)
    parser.add_argument("--shapes", default="", help="MxNxK, comma-separated (no drawing)")
    parser.add_argument("--lower-only", action="store_true", help="the plans, no GPU")
    parser.add_argument("--knobs", action="append", help="a tile{...} setting (repeatable)")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.shapes:
        shapes = [tuple(map(int, s.split("x"))) for s in args.shapes.split(",")]
    else:
        shapes = random_shapes(args.seed, args.count)
    settings = args.knobs or [""]
    if args.lower_only:
        for m, n, k in shapes:
            print(f"{m}x{n}x{k}: " + " | ".join(plan_of(m, n, k, knobs) for knobs in settings))
        return
    _measure(shapes, settings, args.out)  # type: ignore[arg-type]


def _measure(shapes: list[tuple[int, int, int]], settings: list[str], out: str | None) -> None:
    import torch
    import torch.nn.functional as F
    from harness import compile_program, median_ms, publish, rel_error
    from xdsl.utils.exceptions import DiagnosticException

    torch.backends.cuda.matmul.allow_tf32 = False
    rows: list[str] = []
    logs: list[list[float]] = [[] for _ in settings]
    for m, n, k in shapes:
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(m, k, device="cuda", generator=gen).bfloat16()
        w = (torch.randn(n, k, device="cuda", generator=gen) / k**0.5).bfloat16()
        cublas = median_ms(lambda x=x, w=w: F.linear(x, w)) * 1e3
        checked = slice(0, min(m, ERROR_ROWS))
        exact = F.linear(x[checked].double(), w.double())
        cells = []
        for i, knobs in enumerate(settings):
            try:
                fn = compile_program(skinny(m, n, k, "bf16"), f"fuse,tile{{{knobs}}},to-cuda")
            except DiagnosticException as refusal:  # a setting this shape cannot take
                cells.append(f"refused: {str(refusal).splitlines()[0][:60]} | - | - | -")
                continue
            error = rel_error(fn(x, w)[checked], exact)
            ours = median_ms(fn.bind(x, w)) * 1e3
            logs[i].append(math.log(cublas / ours))
            cells.append(
                f"{plan_of(m, n, k, knobs)} | {ours:.1f} | {cublas / ours:.2f} | {error:.1e}"
            )
        rows.append(f"| {m}×{n}×{k} | {cublas:.1f} | " + " | ".join(cells) + " |")
        print(rows[-1], flush=True)
    named = [f"`{knobs}`" if knobs else "default" for knobs in settings]
    header = " | ".join(f"plan ({s}) | µs | × cuBLAS | rel err" for s in named)
    publish(
        [
            f"random bf16 linears, {torch.cuda.get_device_name()}; µs with L2 flushed, cuBLAS "
            "F.linear in the same run",
            "",
            f"| M×N×K | cuBLAS µs | {header} |",
            "|---|---|" + "---|---|---|---|" * len(settings),
            *rows,
            "",
            *(
                f"{s}: geometric mean {math.exp(sum(v) / len(v)):.3f}× cuBLAS over {len(v)} shapes"
                for s, v in zip(named, logs, strict=True)
            ),
        ],
        out,
    )


if __name__ == "__main__":
    main()
