"""`swap=auto` on random f32 linears (`x @ wᵀ`, w `[N, K]`, a weight per batch entry for some):
the default plan against `swap=on` and `swap=off`, each × cuBLAS (TF32 off) in the same run.

The shapes (`--seed`, 34 by default, is the thirty-third session's run 2 in
benchmarks/RESULTS.md): 28 of more than 128 rows (M log-uniform in [129, 1500], N in [100,
3000], K in [256, 2048] rounded down to a multiple of 8, a batch of 2 or 3 for two in five),
then 12 of 17-128 rows (N in [16, 1024]). Each row gives cuBLAS's time, the three ratios
(> 1: tinyopt faster), whether the default swapped, and the three errors against float64.

Usage: python benchmarks/bench_swap_rule.py [--seed 34] [--out swap.md]
       python benchmarks/bench_swap_rule.py --lower-only   # no GPU: the default plan of each
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import skinny  # noqa: E402

from tinyopt.compiler import lower  # noqa: E402

VARIANTS = {"default": "", "swap=on": "swap=on", "swap=off": "swap=off"}


def shapes(seed: int) -> list[tuple[int, int, int, int]]:
    """(batch or 0, M, N, K) of the random linears (the module's docstring)."""
    rng = random.Random(seed)

    def drawn(low: int, high: int) -> int:
        return round(math.exp(rng.uniform(math.log(low), math.log(high))))

    groups = [((129, 1500), (100, 3000), (0, 0, 0, 2, 3))] * 28
    groups += [((17, 128), (16, 1024), (0, 0, 2))] * 12
    out = []
    for rows, columns, batches in groups:
        m, n, k = drawn(*rows), drawn(*columns), drawn(256, 2048) // 8 * 8
        out.append((rng.choice(batches), m, n, k))
    return out


def swapped(text: str, knobs: str) -> bool:
    return 'swap = "on"' in str(lower(text, f"fuse,plan{{{knobs}}}")[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seed", type=int, default=34)
    parser.add_argument("--lower-only", action="store_true", help="the default plans, no GPU")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    cases = shapes(args.seed)
    if args.lower_only:
        for batch, m, n, k in cases:
            text = skinny(m, n, k, "f32", batch=batch)
            print(f"{batch or ''}x{m}x{n}x{k} swapped: {swapped(text, '')}")
        return
    _measure(cases, args.out)


def _measure(cases: list[tuple[int, int, int, int]], out: str | None) -> None:
    import torch
    from harness import compile_program, median_ms, publish, rel_error

    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for batch, m, n, k in cases:
        lead = (batch,) if batch else ()
        torch.manual_seed(0)
        x = torch.randn(*lead, m, k, device="cuda")
        w = torch.randn(*lead, n, k, device="cuda") / k**0.5
        text = skinny(m, n, k, "f32", batch=batch)
        reference = x.double() @ w.double().transpose(-1, -2)
        cublas = median_ms(lambda x=x, w=w: x @ w.transpose(-1, -2), warmup=10, rep=100)
        ratios, errors = [], []
        for knobs in VARIANTS.values():
            fn = compile_program(text, f"fuse,tile{{{knobs}}},to-cuda")
            errors.append(f"{rel_error(fn(x, w), reference):.1e}")
            ratios.append(f"{cublas / median_ms(fn.bind(x, w), warmup=10, rep=100):.2f}")
        rows.append(
            f"| {batch or ''}x{m}x{n}x{k} | {cublas * 1e3:.1f} | {' | '.join(ratios)} | "
            f"{swapped(text, '')} | {' / '.join(errors)} |"
        )
        print(rows[-1], flush=True)
    publish(
        [
            f"swap=auto on random f32 linears, {torch.cuda.get_device_name()}; × cuBLAS (TF32 "
            "off) in the same run",
            "",
            "| batch x M x N x K | cuBLAS µs | default × | swap=on × | swap=off × | default "
            "swapped | errors |",
            "|---|---|---|---|---|---|---|",
            *rows,
        ],
        out,
    )


if __name__ == "__main__":
    main()
