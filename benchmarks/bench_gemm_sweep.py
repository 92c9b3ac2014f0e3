"""bf16 GEMM sweep against cuBLAS (issue 23): bf16 in, fp32 accumulate, bf16 out.

The shapes (69 in all, `--groups` picks a subset):

- squares: M = N = K ∈ {512, 1000, 1024, 2048, 3000, 4096, 5000, 8192}, as `x @ w` with
  w `[K, N]` (torch.matmul);
- llama8b, llama70b: the Llama-3 8B and 70B projections in torch's layout, `F.linear(x, w)`
  with w `[N, K]` and no bias (`graph.linear`, what the torch frontend emits), (K, N) =
  8B q/o (4096, 4096), k/v (4096, 1024), gate/up (4096, 14336), down (14336, 4096);
  70B q/o (8192, 8192), k/v (8192, 1024), gate/up (8192, 28672), down (28672, 8192);
  each at M ∈ {128, 1000, 2048, 16384} rows;
- batched: torch.bmm with batch ∈ {3, 7, 17} and M = N = K ∈ {127, 1000, 4095};
- random: 20 linears `F.linear(x, w)`, w `[N, K]`, from `random.Random(2026)`: for each shape
  M, N, K are drawn in that order, each `round(exp(uniform(ln 64, ln 8192)))` (log-uniform in
  [64, 8192]);
- small (not in the default set, not among the 69): 78 linears on small grids, 6 for each M in
  `SMALL_ROWS` (17-1000), N and K multiples of 8 log-uniform in [64, 16384] and [256, 16384]
  from `random.Random(5)`: the twenty-seventh session's sweep of shapes nobody named, where
  long K on a few blocks had run at 0.25-0.5x cuBLAS (benchmarks/RESULTS.md).

Each row gives tinyopt's time (the `fuse,tile,to-cuda` pipeline, heuristics only: no
`apply-tuned`; a bound call, L2 flushed by `do_bench` before each run), cuBLAS's time
(torch.matmul / F.linear / torch.bmm in bf16, same process), the TFLOP/s of both (2·batch·M·N·K
over the time), their ratio (> 1: tinyopt faster), the relative error of both against a float64
product and the plan of each kernel. The error is computed on a row slice of the output: the
first and the last `ERROR_ROWS` rows of every batch entry (all rows where M ≤ 2·ERROR_ROWS), so
the float64 reference of a 16384-row shape stays small and a partial last row tile is checked;
an output with a non-finite element anywhere gives NaN. A summary follows the table: the
geometric mean of the ratio, its minimum and shape, the 4096³ ratio, the shapes below 0.9×,
against the issue's bars (geomean ≥ 1.0, none below 0.9, ≥ 1.05 at 4096³).

With `--against KNOBS` each shape is also timed under those knobs in the same process (after
the first plan, before cuBLAS), and its row gains that time, its error and its ratio to the
first plan's time (> 1: the other knobs faster); the summary adds their geometric mean and
the shapes where the other knobs are faster by 3% or more.

Usage: python benchmarks/bench_gemm_sweep.py
       [--groups squares,llama8b,llama70b,batched,random,small] [--knobs "mma=sync"]
       [--against "swap=on"] [--only 3x1000x1000x1000,3000x3000x3000] [--out sweep.md]
       python benchmarks/bench_gemm_sweep.py --lower-only [--groups ...]   # no GPU, no torch:
           lowers each shape on the CPU, prints its kernels' plans and flags shapes that fail
           to lower or whose GEMM is not on tensor cores (no wgmma / mma_sync plan)
"""

from __future__ import annotations

import argparse
import math
import os
import random
import re
import sys
import time
from collections import defaultdict
from dataclasses import dataclass

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from programs import batched_matmul, matmul_plain  # noqa: E402

from tinyopt.compiler import apply_pipeline, lower, parse  # noqa: E402
from tinyopt.dialects import loop, tile  # noqa: E402
from tinyopt.passes.tile.gemm.skinny_split import PARTIAL  # noqa: E402

GROUPS = ("squares", "llama8b", "llama70b", "batched", "random")
"""The default groups: issue 23's 69 shapes."""
SMALL_SEED, SMALL_PER_ROW = 5, 6
SMALL_ROWS = (17, 24, 33, 48, 64, 80, 96, 128, 200, 256, 384, 512, 1000)
SQUARES = (512, 1000, 1024, 2048, 3000, 4096, 5000, 8192)
LLAMA = {
    "llama8b": (
        ("q/o", 4096, 4096),
        ("k/v", 4096, 1024),
        ("gate/up", 4096, 14336),
        ("down", 14336, 4096),
    ),
    "llama70b": (
        ("q/o", 8192, 8192),
        ("k/v", 8192, 1024),
        ("gate/up", 8192, 28672),
        ("down", 28672, 8192),
    ),
}
"""(name, K, N) of each model's projections."""
LLAMA_ROWS = (128, 1000, 2048, 16384)
BATCHES = (3, 7, 17)
BATCHED_SIZES = (127, 1000, 4095)
RANDOM_SEED, RANDOM_COUNT, RANDOM_LOW, RANDOM_HIGH = 2026, 20, 64, 8192
ERROR_ROWS = 256
"""Rows at each end of the output (per batch entry) checked against float64."""
TENSOR_CORE_RULES = ("wgmma", "mma_sync")
"""The GEMM rules on tensor cores (skinny_mma is too, but is a GEMV rule: flagged if chosen)."""
REFUSING_RULES = (*TENSOR_CORE_RULES, "wgmma_staged")
"""The rules whose refusals `--lower-only` lists (wgmma_staged: why misaligned operands are not
copied for wgmma); a kernel that is no contraction (a staging copy) lists none."""
SQUARE_BAR = "4096³"


@dataclass(frozen=True)
class Shape:
    group: str
    name: str
    form: str
    """"matmul" (x @ w, w [K, N]), "linear" (F.linear, w [N, K]) or "bmm"."""
    m: int
    n: int
    k: int
    batch: int = 0

    @property
    def dims(self) -> str:
        lead = f"{self.batch}×" if self.batch else ""
        return f"{lead}{self.m}×{self.n}×{self.k}"

    @property
    def flops(self) -> int:
        return 2 * max(self.batch, 1) * self.m * self.n * self.k

    def operands(self):  # -> tuple[torch.Tensor, torch.Tensor]
        """Random bf16 x and w on the GPU in the shape's form (w scaled by 1/√K), seed 0."""
        import torch

        gen = torch.Generator(device="cuda").manual_seed(0)
        lead = (self.batch,) if self.batch else ()
        w_shape = (*lead, self.n, self.k) if self.form == "linear" else (*lead, self.k, self.n)
        bf16 = {"device": "cuda", "dtype": torch.bfloat16, "generator": gen}
        x = torch.randn((*lead, self.m, self.k), **bf16)
        return x, torch.randn(w_shape, **bf16) / self.k**0.5

    def text(self) -> str:
        if self.form == "bmm":
            return batched_matmul(self.batch, self.m, self.n, self.k, "bf16")
        if self.form == "matmul":
            return matmul_plain(self.m, self.n, self.k, "bf16", "kn", relu=False)
        return linear(self.m, self.n, self.k)


def linear(m: int, n: int, k: int) -> str:
    """`F.linear(x, w)` without bias, bf16 x [m, k] and w [n, k]: the op the frontend emits."""
    x, w, y = (f"tensor<{a}x{b}xbf16>" for a, b in ((m, k), (n, k), (m, n)))
    return f"""func.func @linear(%x: {x}, %w: {w}) -> {y} {{
  %y = graph.linear %x, %w : ({x}, {w}) -> {y}
  func.return %y : {y}
}}"""


def random_shapes() -> list[tuple[int, int, int]]:
    """RANDOM_COUNT (M, N, K), each dim log-uniform in [RANDOM_LOW, RANDOM_HIGH], fixed seed."""
    rng = random.Random(RANDOM_SEED)
    lo, hi = math.log(RANDOM_LOW), math.log(RANDOM_HIGH)
    out = []
    for _ in range(RANDOM_COUNT):
        m, n, k = (round(math.exp(rng.uniform(lo, hi))) for _ in range(3))
        out.append((m, n, k))
    return out


def small_shapes() -> list[tuple[int, int, int]]:
    """SMALL_PER_ROW (M, N, K) for each M of SMALL_ROWS: N and K multiples of 8, log-uniform in
    [64, 16384] and [256, 16384], fixed seed."""
    rng = random.Random(SMALL_SEED)
    out = []
    for m in SMALL_ROWS:
        for _ in range(SMALL_PER_ROW):
            n = 8 * round(math.exp(rng.uniform(math.log(64), math.log(16384))) / 8)
            k = 8 * round(math.exp(rng.uniform(math.log(256), math.log(16384))) / 8)
            out.append((m, n, k))
    return out


def shapes(groups: list[str]) -> list[Shape]:
    out: list[Shape] = []
    for group in groups:
        if group == "squares":
            out += [Shape(group, f"{s}³", "matmul", s, s, s) for s in SQUARES]
        elif group in LLAMA:
            model = group.removeprefix("llama").upper()
            out += [
                Shape(group, f"{model} {name} M={m}", "linear", m, n, k)
                for m in LLAMA_ROWS
                for name, k, n in LLAMA[group]
            ]
        elif group == "batched":
            out += [
                Shape(group, f"{b}×{s}³", "bmm", s, s, s, b) for b in BATCHES for s in BATCHED_SIZES
            ]
        elif group == "random":
            out += [
                Shape(group, f"r{i:02d}", "linear", m, n, k)
                for i, (m, n, k) in enumerate(random_shapes())
            ]
        elif group == "small":
            out += [
                Shape(group, f"s{i:02d}", "linear", m, n, k)
                for i, (m, n, k) in enumerate(small_shapes())
            ]
        else:
            raise SystemExit(f"unknown group {group!r} (groups: {', '.join(GROUPS)}, small)")
    return out


def plans(text: str, knobs: str, why: bool = False) -> list[tuple[str, str, list[str]]]:
    """(kernel, `rule, knobs`, refusals) for each kernel the plan makes of `text`: refusals are
    the rules tried before the chosen one and why they refused (with `why`). A split's
    partial-sum kernel also shows its loop extents."""
    options = " ".join(o for o in (knobs, "why=1" if why else "") if o)
    module = apply_pipeline(parse(text), f"fuse,plan{{{options}}}")
    out = []
    for kernel in loop.kernels(module):
        described = re.sub(r"^#tile\.plan<|>$", "", str(kernel.attributes[tile.PLAN]))
        if PARTIAL in kernel.attributes:
            (nest,) = kernel.body.block.ops
            described += f", over {list(nest.extents)}"  # type: ignore[attr-defined]
        refused = kernel.attributes.get(tile.REFUSALS)
        reasons = [r.data for r in refused.data] if refused else []  # type: ignore[attr-defined]
        out.append((kernel.sym_name.data, described, reasons))
    return out


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


def _rule(described: str) -> str:
    return described.split(",", 1)[0]


def _pipeline(knobs: str) -> str:
    return f"fuse,tile{{{knobs}}},to-cuda" if knobs else "fuse,tile,to-cuda"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--groups", default=",".join(GROUPS), help="comma-separated groups")
    parser.add_argument("--knobs", default="", help="a tile{...} setting, e.g. 'mma=sync'")
    parser.add_argument("--against", default=None, help="knobs each shape is also timed under")
    parser.add_argument("--lower-only", action="store_true", help="lower and print plans, no GPU")
    parser.add_argument(
        "--only",
        default="",
        help="the groups' shapes of these dims, e.g. 3x1000x1000x1000,512x512x512",
    )
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    cases = shapes([g for g in args.groups.split(",") if g])
    if args.only:
        wanted = set(args.only.split(","))
        cases = [c for c in cases if c.dims.replace("×", "x") in wanted]
        if not cases:
            raise SystemExit(f"no shape of groups {args.groups} has dims in {args.only}")
    if args.lower_only:
        _lower_only(cases, args.knobs)
    else:
        _measure(cases, args.knobs, args.out, args.against)


def _lower_only(cases: list[Shape], knobs: str) -> None:
    """Lowers each shape to CUDA C on the CPU: its kernels' plans, each CUDA kernel's launch and
    the tensor-core instruction in its source; then which shapes got which plan, and the shapes
    that failed to lower or are not on tensor cores (with the refusals of the rules before)."""
    start = time.perf_counter()
    by_plan: dict[str, list[str]] = defaultdict(list)
    failed: list[tuple[Shape, str]] = []
    not_tc: list[tuple[Shape, list[str]]] = []
    refusals: dict[str, list[str]] = defaultdict(list)
    for shape in cases:
        print(f"{shape.group} {shape.name} {shape.dims} {shape.form}", flush=True)
        t0 = time.perf_counter()
        try:
            planned = plans(shape.text(), knobs, why=True)
            _, module = lower(shape.text(), _pipeline(knobs))
        except Exception as e:  # noqa: BLE001 - a sweep reports every failure and goes on
            message = _first_line(e)
            print(f"    FAILED to lower: {message}")
            failed.append((shape, message))
            continue
        for name, described, refused in planned:
            print(f"    {name}: {described}")
            by_plan[described].append(shape.name)
            for reason in refused:
                if reason.endswith(": not a contraction"):
                    break
                if reason.split(":", 1)[0] in REFUSING_RULES:
                    print(f"      refused: {reason}")
                    refusals[reason.split(",", 1)[0]].append(shape.name)
        instructions = []
        for op in module.ops:
            if isinstance(op, tile.CudaKernelOp):
                src = op.source.data
                instr = next((i for i in ("wgmma.mma_async", "mma.sync") if i in src), "no mma")
                instructions.append(instr)
                grid, block = list(op.grid.get_values()), list(op.block.get_values())
                print(
                    f"    cuda {op.sym_name.data}: grid {grid} block {block} "
                    f"smem {op.smem.value.data} ({instr})"
                )
        print(f"    lowered in {time.perf_counter() - t0:.2f} s")
        on_tc = any(_rule(d) in TENSOR_CORE_RULES for _, d, _ in planned) and any(
            i != "no mma" for i in instructions
        )
        if not on_tc:
            not_tc.append((shape, [f"{n}: {r}" for n, _, rs in planned for r in rs]))
    elapsed = time.perf_counter() - start
    print()
    print(f"{len(cases)} shapes lowered in {elapsed:.1f} s (tile{{{knobs}}})")
    print("plans (kernel plan: shapes):")
    for described, names in sorted(by_plan.items(), key=lambda kv: -len(kv[1])):
        print(f"  [{len(names)}] {described}")
        print(f"      {', '.join(names)}")
    print("refusals by a tensor-core rule tried before the chosen one (up to the first comma):")
    for reason, names in refusals.items():
        print(f"  [{len(names)}] {reason}")
        print(f"      {', '.join(names)}")
    print(f"failed to lower: {len(failed)}")
    for shape, message in failed:
        print(f"  {shape.name} {shape.dims}: {message}")
    rules = "/".join(TENSOR_CORE_RULES)
    print(f"not on tensor cores (no {rules} plan with an mma in its source): {len(not_tc)}")
    for shape, reasons in not_tc:
        print(f"  {shape.name} {shape.dims}")
        for reason in reasons:
            print(f"      refused: {reason}")


def _measure(cases: list[Shape], knobs: str, out: str | None, against: str | None) -> None:
    import torch
    import torch.nn.functional as F
    from harness import compile_program, median_ms, publish, rel_error

    torch.backends.cuda.matmul.allow_tf32 = False
    pipeline = _pipeline(knobs)
    rows: list[str] = []
    ratios: dict[Shape, float] = {}
    speedups: dict[Shape, float] = {}  # the `against` knobs' time against the first plan's
    failed: list[tuple[Shape, str]] = []
    start = time.perf_counter()

    def cublas(shape: Shape, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        if shape.form == "linear":
            return F.linear(x, w)
        return torch.bmm(x, w) if shape.form == "bmm" else torch.matmul(x, w)

    for shape in cases:
        x, w = shape.operands()
        # The rows checked against float64: the first and last ERROR_ROWS (all where M is small).
        if shape.m <= 2 * ERROR_ROWS:
            idx = torch.arange(shape.m, device="cuda")
        else:
            idx = torch.cat(
                [
                    torch.arange(ERROR_ROWS, device="cuda"),
                    torch.arange(shape.m - ERROR_ROWS, shape.m, device="cuda"),
                ]
            )
        ref = cublas(shape, x.index_select(-2, idx).double(), w.double())
        theirs_out = cublas(shape, x, w)
        theirs_err = rel_error(theirs_out.index_select(-2, idx), ref)
        del theirs_out
        fn = bound = ours_out = None
        try:
            t0 = time.perf_counter()
            fn = compile_program(shape.text(), pipeline)
            compile_s = time.perf_counter() - t0
            ours_out = fn(x, w)
            torch.cuda.synchronize()
            finite = bool(torch.isfinite(ours_out).all())
            ours_err = rel_error(ours_out.index_select(-2, idx), ref) if finite else float("nan")
            ours_out = None
            bound = fn.bind(x, w)
            ours = median_ms(bound, warmup=25, rep=200)
            other = _timed_under(against, shape, x, w, idx, ref) if against is not None else ""
        except Exception as e:  # noqa: BLE001 - a sweep reports every failure and goes on
            message = _first_line(e)
            failed.append((shape, message))
            rows.append(
                f"| {shape.group} | {shape.name} | {shape.dims} | {shape.form} | "
                f"FAILED: {message} |"
            )
            print(rows[-1], flush=True)
            del x, w, ref, fn, bound, ours_out
            torch.cuda.empty_cache()
            continue
        theirs = median_ms(lambda s=shape, x=x, w=w: cublas(s, x, w), warmup=25, rep=200)
        ratios[shape] = theirs / ours
        if against is not None and not other.startswith("FAILED"):
            speedups[shape] = ours / float(other.split()[0])
            other += f" | {speedups[shape]:.3f}"
        kernels = "; ".join(f"{n}: {d}" for n, d, _ in plans(shape.text(), knobs))
        rows.append(
            f"| {shape.group} | {shape.name} | {shape.dims} | {shape.form} | {ours:.4f} | "
            f"{shape.flops / ours / 1e9:.0f} | {theirs:.4f} | {shape.flops / theirs / 1e9:.0f} | "
            f"{theirs / ours:.2f} | {ours_err:.1e} | {theirs_err:.1e} | {compile_s:.1f} | "
            + (f"{other} | " if against is not None else "")
            + f"{kernels} |"
        )
        print(rows[-1], flush=True)
        del x, w, ref, fn, bound
        torch.cuda.empty_cache()

    lines = [
        f"bf16 GEMM sweep, {torch.cuda.get_device_name()}, {time.strftime('%Y-%m-%d')}, "
        f"{pipeline}; cuBLAS (torch.matmul / F.linear / torch.bmm, bf16) in the same run; "
        f"TFLOP/s = 2·batch·M·N·K / time; rel err vs float64 on the first and last "
        f"{ERROR_ROWS} rows of each batch entry; {time.perf_counter() - start:.0f} s",
        "",
        "| group | shape | (batch×)M×N×K | form | tinyopt ms | TFLOP/s | cuBLAS ms "
        "| cuBLAS TFLOP/s | × cuBLAS | rel err | cuBLAS rel err | compile s | "
        + (f"{{{against}}} ms, rel err | × tinyopt | " if against is not None else "")
        + "kernels: plan |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
        + "---|---|" * (against is not None),
        *rows,
        "",
        *_summary(ratios, failed),
        *_against_summary(against, speedups),
    ]
    publish(lines, out)


def _timed_under(knobs: str, shape: Shape, x, w, idx, ref) -> str:  # noqa: ANN001 - tensors
    """The shape's time (ms) and error under `knobs`, "FAILED: why" where it does not run."""
    from harness import compile_program, median_ms, rel_error

    try:
        fn = compile_program(shape.text(), _pipeline(knobs))
        out = fn(x, w)
        error = rel_error(out.index_select(-2, idx), ref)
        del out
        return f"{median_ms(fn.bind(x, w), warmup=25, rep=200):.4f} {error:.1e}"
    except Exception as e:  # noqa: BLE001 - a sweep reports every failure and goes on
        return f"FAILED: {_first_line(e)} | "


def _against_summary(against: str | None, speedups: dict[Shape, float]) -> list[str]:
    """The `--against` knobs' time against the first plan's: geometric mean, and the shapes
    where they ran 3% faster or more."""
    if against is None or not speedups:
        return []
    mean = math.exp(sum(map(math.log, speedups.values())) / len(speedups))
    faster = [s for s, r in speedups.items() if r >= 1.03]
    return [
        f"- {{{against}}} against the first plan, × its speed: geometric mean {mean:.3f} over "
        f"{len(speedups)} shapes; 3% faster or more at {len(faster)}"
        + (": " + ", ".join(f"{s.name} {speedups[s]:.2f}" for s in faster) if faster else ""),
    ]


def _summary(ratios: dict[Shape, float], failed: list[tuple[Shape, str]]) -> list[str]:
    def verdict(ok: bool) -> str:
        return "FAIL (shapes failed)" if failed else "PASS" if ok else "FAIL"

    def geomean(values: list[float]) -> float:
        return math.exp(sum(map(math.log, values)) / len(values))

    lines = [f"Summary: {len(ratios)} shapes measured, {len(failed)} failed."]
    for shape, message in failed:
        lines.append(f"- failed: {shape.name} {shape.dims}: {message}")
    if not ratios:
        return lines
    values = list(ratios.values())
    g = geomean(values)
    worst = min(ratios, key=ratios.__getitem__)
    below = [s for s, r in ratios.items() if r < 0.9]
    square = next(
        (r for s, r in ratios.items() if s.group == "squares" and s.name == SQUARE_BAR), None
    )
    lines += [
        f"- geometric mean × cuBLAS: {g:.3f} (bar ≥ 1.00: {verdict(g >= 1.0)})",
        f"- minimum: {ratios[worst]:.3f} at {worst.name} ({worst.dims}) "
        f"(bar ≥ 0.90 everywhere: {verdict(not below)})",
        (
            f"- {SQUARE_BAR}: {square:.3f} (bar ≥ 1.05: {'PASS' if square >= 1.05 else 'FAIL'})"
            if square is not None
            else f"- {SQUARE_BAR}: not run (the squares group was not selected or failed)"
        ),
        f"- below 0.9×: {len(below)}"
        + (": " + ", ".join(f"{s.name} {ratios[s]:.2f}" for s in below) if below else ""),
        "- geometric mean per group: "
        + ", ".join(
            f"{group} {geomean([r for s, r in ratios.items() if s.group == group]):.3f}"
            for group in GROUPS
            if any(s.group == group for s in ratios)
        ),
    ]
    return lines


if __name__ == "__main__":
    main()
