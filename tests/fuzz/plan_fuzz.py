"""Random programs under random schedule knobs: every plan `plan` prints, `tile` must emit.

    python tests/fuzz/plan_fuzz.py [-n 400] [--seed 0] [-v]

`fuse,plan{knobs}` resolves each kernel's knobs into a plan, or refuses the knobs with a
diagnostic; the plan it prints is IR a user may keep, edit and hand to `tile` (docs/ir.md). A
plan that `plan` prints and `tile` then refuses (or that either pass crashes on) is a bug: the
user was told the knobs hold when they do not. Each case is a program and a few knobs drawn
together: half the cases a GEMM program of tests/fuzz/wgmma_cpu_fuzz.py (`_budgeted_program`:
linears, matmuls, batches, MLPs, FP8, odd and ≡ 8 mod 16 sizes) under GEMM knobs
(`GEMM_KNOBS`), three in ten an attention program of tests/attention_programs.py (square,
causal, a decode step or a chunk against a cache, GQA, a runtime count of valid keys; head dims
32-256, f16, bf16 or f32) under attention knobs (`ATTENTION_KNOBS`), the rest a norm, softmax,
bias + GELU, reduction or small f32 linear of tests/programs.py under the other rules' knobs
(`ROW_KNOBS`). The case runs `fuse,plan` with the knobs (`decompose,fuse,flash-attention,plan`
for attention, `decompose,fuse,plan` for the rest), then `tile,to-cuda` on the printed
plan; a refusal by `plan` is counted, never a failure. Each failure prints the seed and index
that rebuild it (`case(seed, index)`); the exit status is 1 when any case failed.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(TESTS))
sys.path.insert(0, str(TESTS / "fuzz"))

from attention_programs import attention, decode_attention  # noqa: E402
from programs import (  # noqa: E402
    bias_gelu,
    layernorm,
    matmul_relu,
    reduction,
    rmsnorm,
    softmax,
)
from wgmma_cpu_fuzz import _budgeted_program  # noqa: E402
from xdsl.utils.exceptions import DiagnosticException  # noqa: E402

from tinyopt.compiler import apply_pipeline, parse  # noqa: E402

GEMM_KNOBS = {
    "mma": ("wgmma", "sync", "auto"),
    "bm": (64, 128, 192),
    "bn": (64, 80, 128, 144, 192, 208, 256),
    "stages": (2, 3, 4, 6),
    "persistent": (0, 1),
    "store": ("smem", "direct"),
    "multicast": ("off", "a", "b", "a4", "b4", "auto"),
    "streamk": ("tail", "off"),
    "splitk": (2, 4),
    "splitk_mode": ("cluster", "auto"),
    "evict": ("off", "b", "ab"),
    "l2promo": (0, 128, 256),
    "align": ("on", "off"),
    "ws": (0, 1),
    "group": (1, 8, 16),
    "promote": ("on", "off"),
    "poverlap": ("on", "off"),
    "swap": ("on", "off"),
    "skinny": ("on", "off"),
    "sms": (1, 3, 8, 132),
}
"""Knobs of the GEMM rules (wgmma, its staging, mma.sync, split-K, skinny) and the values
drawn."""

ATTENTION_KNOBS = {
    "attn": ("wgmma", "sync", "simt", "auto"),
    "akeys": (32, 64, 128, 192),
    "aconsumers": (2, 3),
    "apingpong": ("on", "off"),
    "aoverlap": ("on", "off"),
    "afma": (0, 2, 4),
    "atail": ("on", "off"),
    "persistent": (0, 1),
    "arows": (16, 32, 64, 128),
    "awarps": (2, 4, 8),
    "asplits": (1, 2, 4, 8),
    "aslots": (2, 3),
    "akwarps": (1, 2, 4),
    "abalance": ("on", "off"),
    "aswizzle": ("on", "off"),
    "sms": (1, 3, 8, 132),
}
"""Knobs of the attention rules (wgmma, mma.sync, SIMT, decode) and the values drawn."""

ROW_KNOBS = {
    "schedule": ("auto", "naive", "row", "tiled"),
    "threads": (32, 64, 128, 256, 512, 1024),
    "vec": (1, 2, 4, 8, 16),
    "rows": (1, 2, 4, 8, 16),
    "cols": (1, 2, 4),
    "cache": (0, 1),
    "bm": (16, 32, 64, 128),
    "bn": (16, 32, 64, 128),
    "bk": (8, 16, 32, 64),
    "tm": (1, 2, 4, 8),
    "tn": (1, 2, 4, 8),
    "pad": (0, 4, 8),
    "stages": (1, 2, 3, 4),
    "split": (1, 2, 4, 8),
    "kwarps": (1, 2, 4, 8),
    "copy": ("auto", "cp.async", "tma", "direct"),
    "store": ("smem", "direct"),
    "mma": ("none", "sync", "auto", "3xtf32"),
    "minblocks": (1, 2),
    "interleave": ("on", "off"),
    "prefetch": ("on", "off"),
    "skinny": ("on", "off"),
    "splitk": (2, 4),
    "fastmath": ("on", "off"),
}
"""Knobs of the elementwise, row, reduction, f32 contraction and skinny rules."""

MOST_KNOBS = 5


@dataclass(frozen=True)
class Case:
    name: str
    text: str
    knobs: str
    pipeline: str
    """The passes before `plan`."""


def _attention_program(rng: random.Random) -> tuple[str, str]:
    dtype = rng.choice(("bf16", "f16", "f32"))
    d = rng.choice((32, 48, 64, 80, 96, 128, 160, 256))
    causal = rng.random() < 0.5
    if rng.random() < 0.5:
        b, h, s = rng.choice((1, 2)), rng.choice((1, 2, 4)), rng.choice((17, 64, 100, 257, 512))
        return f"attention_{b}x{h}x{s}x{d}_{dtype}", attention(b, h, s, d, dtype, causal=causal)
    kv = rng.choice((1, 2))
    h = kv * rng.choice((1, 2, 4))
    b, sq, skv = rng.choice((1, 2)), rng.choice((1, 3, 16, 64)), rng.choice((64, 200, 1024))
    dtype = "bf16" if dtype == "f32" else dtype
    valid = rng.random() < 0.5
    text = decode_attention(b, h, kv, sq, skv, d, dtype=dtype, causal=causal, valid=valid)
    return f"decode_{b}x{h}/{kv}x{sq}x{skv}x{d}_{dtype}", text


def _row_program(rng: random.Random) -> tuple[str, str]:
    dtype = rng.choice(("f32", "bf16", "f16"))
    rows, cols = rng.choice((1, 7, 64, 129, 1000)), rng.choice((1, 5, 64, 255, 4096))
    form = rng.choice(("rmsnorm", "softmax", "layernorm", "bias_gelu", "reduction", "linear"))
    if form == "reduction":
        op = rng.choice(("reduce_sum", "reduce_max", "reduce_mean"))
        dims = rng.choice(((0,), (1,), (2,), (0, 2)))
        return f"{op}_{rows}x{cols}x3_{dims}_{dtype}", reduction(op, (rows, cols, 3), dims, dtype)
    if form == "linear":
        n = rng.choice((8, 33, 256))
        return f"matmul_relu_{rows}x{n}x{cols}_f32", matmul_relu(rows, n, cols, "f32")
    build = {"rmsnorm": rmsnorm, "softmax": softmax, "layernorm": layernorm, "bias_gelu": bias_gelu}
    return f"{form}_{rows}x{cols}_{dtype}", build[form]((rows, cols), dtype)


def case(seed: int, index: int) -> Case:
    """The `index`th case of `seed`'s run."""
    rng = random.Random(f"plan {seed} {index}")
    draw = rng.random()
    if draw < 0.5:
        name, text = _budgeted_program(rng, rng.random() < 0.7)
        table, pipeline = GEMM_KNOBS, "fuse"
    elif draw < 0.8:
        name, text = _attention_program(rng)
        table, pipeline = ATTENTION_KNOBS, "decompose,fuse,flash-attention"
    else:
        name, text = _row_program(rng)
        table, pipeline = ROW_KNOBS, "decompose,fuse"
    keys = rng.sample(sorted(table), rng.randint(1, MOST_KNOBS))
    knobs = " ".join(f"{key}={rng.choice(table[key])}" for key in keys)
    return Case(name, text, knobs, pipeline)


def check(c: Case) -> str:
    """The outcome: "ok", "refused" (by `plan`), or a failure's report."""
    try:
        planned = apply_pipeline(parse(c.text), f"{c.pipeline},plan{{{c.knobs}}}")
    except DiagnosticException:
        return "refused"
    except Exception as e:  # noqa: BLE001 - a crash of plan is the failure reported
        return f"plan crashed: {type(e).__name__}: {e}"
    try:
        apply_pipeline(parse(str(planned)), "tile,to-cuda")
    except DiagnosticException as e:
        return f"tile refused the printed plan: {str(e).splitlines()[0]}"
    except Exception as e:  # noqa: BLE001 - a crash of tile is the failure reported
        return f"tile crashed: {type(e).__name__}: {e}"
    return "ok"


def run(seed: int, count: int, verbose: bool = False) -> tuple[Counter, list[str]]:
    """The outcomes of `count` cases of `seed`, and a report for each failed one."""
    outcomes: Counter = Counter()
    failures = []
    for index in range(count):
        c = case(seed, index)
        outcome = check(c)
        if outcome in ("ok", "refused"):
            outcomes[outcome] += 1
        else:
            outcomes["failed"] += 1
            failures.append(f"[{seed}:{index}] {c.name} {{{c.knobs}}}: {outcome}")
        if verbose:
            print(f"[{seed}:{index}] {c.name} {{{c.knobs}}} {outcome}", flush=True)
    return outcomes, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=400, help="cases")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case")
    args = parser.parse_args()
    start = time.monotonic()
    outcomes, failures = run(args.seed, args.n, args.verbose)
    took = time.monotonic() - start
    print(f"seed {args.seed}: {args.n} cases in {took:.0f}s: {dict(outcomes)}")
    for report in failures:
        print(f"\nFAILED {report}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
