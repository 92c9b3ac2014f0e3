"""Tuner evaluation: the best latency found versus trials for SP-MCTS, random search and
(where the space allows) exhaustive search, on RMSNorm, softmax, fp32 GEMM 1024³ and 4096³ and
bf16 GEMM 4096³ and causal bf16 attention (examples/attention.mlir).

Usage: python benchmarks/bench_tuner.py --out DIR [--trials 64] [--cases rmsnorm,sgemm1024]

Every method starts from the default schedule (trial 1). All methods share one measurer, so a
candidate (or identical generated code) is built and timed once per run. Exhaustive search
runs where the kernel's space has at most --exhaustive-limit configurations; elsewhere the
tables compare with the best time any method found ("best known"). Each search also gets an
equal share of the time left before --deadline, so the whole run stays within a few minutes;
the tables say how many trials each search reached. Right after a case's searches, its PyTorch
equivalent (REFERENCES: cuBLAS for the GEMMs, eager F.rms_norm and softmax, SDPA's flash
backend for attention) is timed on the GPU with harness.median_ms, and the summary puts the
best tuned time next to it ("-" where torch with CUDA is not importable). Writes DIR/tuner.md
(the tables) and DIR/tuner.png (best latency / best known versus trials), and prints the
summary last.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from tinyopt.backends.cuda.nvrtc import arch_of_current_device
from tinyopt.dialects import loop
from tinyopt.passes.autotune.cache import Entry, TuningCache, db_path, gpu_model
from tinyopt.passes.autotune.measure import Program
from tinyopt.passes.autotune.search import Budget, space_size
from tinyopt.passes.autotune.space import KernelSpace
from tinyopt.passes.autotune.tuner import KernelResult, tune
from tinyopt.passes.autotune.workers import GpuMeasurer
from tinyopt.passes.tile.knobs import Knobs

EXAMPLES = Path(__file__).parent.parent / "examples"


def matmul(n: int, dtype: str) -> str:
    t = f"tensor<{n}x{n}x{dtype}>"
    return (
        f"func.func @matmul(%x: {t}, %w: {t}) -> {t} {{\n"
        f"  %y = graph.matmul %x, %w : ({t}, {t}) -> {t}\n"
        f"  func.return %y : {t}\n}}\n"
    )


CASES = {  # name: (label, MLIR text, the passes before `tile`)
    "rmsnorm": ("RMSNorm f32 1024×4096", (EXAMPLES / "rmsnorm.mlir").read_text(), "fuse"),
    "softmax": ("softmax f32 1×28×2048×2048", (EXAMPLES / "softmax.mlir").read_text(), "fuse"),
    "sgemm1024": ("fp32 GEMM 1024³", matmul(1024, "f32"), "fuse"),
    "sgemm4096": ("fp32 GEMM 4096³", matmul(4096, "f32"), "fuse"),
    "bf16gemm4096": ("bf16 GEMM 4096³", matmul(4096, "bf16"), "fuse"),
    "attention": (
        "causal attention bf16 2×8×1024×64",
        (EXAMPLES / "attention.mlir").read_text(),
        "decompose,fuse,flash-attention",
    ),
}
REFERENCES = {  # case: the PyTorch equivalent timed next to it (reference_call)
    "rmsnorm": "torch eager F.rms_norm",
    "softmax": "torch eager softmax",
    "sgemm1024": "cuBLAS",
    "sgemm4096": "cuBLAS",
    "bf16gemm4096": "cuBLAS",
    "attention": "torch SDPA flash",
}
METHODS = ("mcts", "random", "exhaustive")
CHECKPOINTS = (1, 8, 16, 32, 64)


def function_name(text: str) -> str:
    return text.split("func.func @", 1)[1].split("(", 1)[0]


def reference_call(case: str) -> Callable[[], object]:
    """Allocates the inputs of `case` on the GPU and returns its PyTorch equivalent as a call
    (the shapes, eps, scale and dtypes of CASES and the example files)."""
    import torch
    import torch.nn.functional as F

    def randn(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        return torch.randn(*shape, device="cuda", dtype=dtype)

    if case == "rmsnorm":
        x, weight = randn(1024, 4096), randn(4096)
        return lambda: F.rms_norm(x, (4096,), weight, eps=1e-6)
    if case == "softmax":
        scores = randn(1, 28, 2048, 2048)
        return lambda: torch.softmax(scores, dim=3)
    if case == "attention":
        q, k, v = (randn(2, 8, 1024, 64, dtype=torch.bfloat16) for _ in range(3))
        return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.125)
    n, dtype = {
        "sgemm1024": (1024, torch.float32),
        "sgemm4096": (4096, torch.float32),
        "bf16gemm4096": (4096, torch.bfloat16),
    }[case]
    a, b = randn(n, n, dtype=dtype), randn(n, n, dtype=dtype)
    return lambda: torch.mm(a, b)


def reference_ms(case: str) -> float | None:
    """The median time of `case`'s PyTorch equivalent (fp32 GEMMs without TF32, attention on
    SDPA's flash backend); None where torch with CUDA is not importable."""
    try:
        import torch
        from harness import median_ms
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        return median_ms(reference_call(case))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for tuner.md and tuner.png")
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    parser.add_argument("--trials", type=int, default=64, help="trials per method (64)")
    parser.add_argument("--exhaustive-limit", type=int, default=600)
    parser.add_argument(
        "--batch", type=int, help="candidates per search step (default: one per build process)"
    )
    parser.add_argument("--jobs", type=int, help="build processes (default: one per CPU)")
    parser.add_argument(
        "--deadline", type=float, default=400.0, help="seconds for all searches (400)"
    )
    parser.add_argument(
        "--store",
        action="store_true",
        help="store each case's best in the tuning cache (docs/tuning.md), so later "
        "compiles and benchmarks use it",
    )
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    arch = arch_of_current_device()
    start = time.monotonic()
    plan = []  # (case, program, space size, methods)
    for case in args.cases.split(","):
        _, text, prefix = CASES[case]
        program = Program(text, function_name(text), prefix, arch)
        (kernel,) = loop.kernels(program.loop_module())
        space = KernelSpace(kernel)
        size = space_size(space, limit=args.exhaustive_limit + 1)
        methods = [m for m in METHODS if m != "exhaustive" or size <= args.exhaustive_limit]
        plan.append((case, program, size, methods))
    left = sum(len(methods) for *_, methods in plan)
    runs: dict[str, tuple[int, dict[str, KernelResult]]] = {}
    references: dict[str, float | None] = {}
    with GpuMeasurer(args.jobs, timeout=30.0) as measurer:
        for case, program, size, methods in plan:
            results = {}
            for method in methods:
                seconds = max(10.0, (args.deadline - (time.monotonic() - start)) / left)
                left -= 1
                budget = Budget(size if method == "exhaustive" else args.trials, seconds)
                batch = args.batch or measurer.parallelism
                (results[method],) = tune(program, measurer, method, budget, batch=batch)
                best = results[method].best
                print(
                    f"[{time.monotonic() - start:6.1f}s] {case} {method}: "
                    f"{len(results[method].search.history)} trials in at most {seconds:.0f} s, "
                    f"best {best[1] if best else float('nan'):.4f} ms",
                    flush=True,
                )
            runs[case] = (size, results)
            references[case] = reference_ms(case)
            print(
                f"[{time.monotonic() - start:6.1f}s] {case} reference {REFERENCES[case]}: "
                f"{_ms(references[case], missing='-')} ms",
                flush=True,
            )
            if args.store:
                store_best(program, results)
    tables = write_tables(runs, references, args.trials, args.exhaustive_limit)
    (out / "tuner.md").write_text(tables + "\n")
    print(f"\ntotal {time.monotonic() - start:.0f} s; wrote {out / 'tuner.md'}")
    plot(runs, args.trials, out / "tuner.png")
    print(tables.split("\n\n")[-1])


def store_best(program: Program, results: dict[str, KernelResult]) -> None:
    """Stores the best configuration any method found in the tuning cache."""
    path, gpu = db_path(), gpu_model()
    found = [(r.best, r) for r in results.values() if r.best]
    if path is None or gpu is None or not found:
        return
    (config, ms), result = min(found, key=lambda f: f[0][1])
    trials = sum(len(r.search.history) for r in results.values())
    with TuningCache(path) as cache:
        cache.store(result.key, gpu, Entry(config, ms, result.default_ms, trials, "bench_tuner"))
    print(f"stored {Knobs(**config).describe() or '(defaults)'} in {path}")


def best_known(results: dict[str, KernelResult]) -> float | None:
    """The best time any method found, None when every candidate failed."""
    return min((r.best[1] for r in results.values() if r.best), default=None)


def _ms(value: KernelResult | float | None, missing: str = "failed") -> str:
    if isinstance(value, KernelResult):
        value = value.best[1] if value.best else None
    return missing if value is None else f"{value:.4f}"


def write_tables(
    runs: dict[str, tuple[int, dict[str, KernelResult]]],
    references: dict[str, float | None],
    trials: int,
    limit: int,
) -> str:
    """The trial-curve table and the summary; `references` maps each case to its PyTorch
    equivalent's time (None: not measured)."""
    curve = [
        "| case | space | method | "
        + " | ".join(f"best @{t}" for t in CHECKPOINTS if t <= trials)
        + " | trials | failed | refused |",
        "|---|---|---|" + "---|" * len([t for t in CHECKPOINTS if t <= trials]) + "---|---|---|",
    ]
    summary = [
        "| case | default ms | SP-MCTS ms | random ms | exhaustive / best known ms | "
        "SP-MCTS vs default | SP-MCTS % of best | reference | reference ms | "
        "best tuned vs reference | best knobs |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for case, (size, results) in runs.items():
        known, reference = best_known(results), references[case]
        versus = "-" if known is None or reference is None else f"{reference / known:.2f}×"
        against = f"{REFERENCES[case]} | {_ms(reference, missing='-')} | {versus}"
        space = f"{size}" if size <= limit else f"> {limit}"
        for method, r in results.items():
            points = " | ".join(
                f"{r.search.best_after(t):.4f}" if r.search.best_after(t) else "-"
                for t in CHECKPOINTS
                if t <= trials
            )
            curve.append(
                f"| {CASES[case][0]} | {space} | {method} | {points} | "
                f"{len(r.search.history)} | {len(r.failures)} | {len(r.refusals)} |"
            )
        tree, rand = results["mcts"], results["random"]
        if known is None or tree.best is None or tree.default_ms is None:
            summary.append(
                f"| {CASES[case][0]} | {_ms(tree.default_ms)} | {_ms(tree)} | "
                f"{_ms(rand)} | {_ms(known)} | - | - | {against} | - |"
            )
            continue
        best_config = min((r.best for r in results.values() if r.best), key=lambda b: b[1])[0]
        complete = "exhaustive" in results and len(results["exhaustive"].search.history) == size
        label = "exhaustive" if complete else "best known"
        summary.append(
            f"| {CASES[case][0]} | {tree.default_ms:.4f} | {_ms(tree)} | {_ms(rand)} | "
            f"{known:.4f} ({label}) | {tree.default_ms / tree.best[1]:.2f}× | "
            f"{100 * known / tree.best[1]:.0f}% | {against} | "
            f"{Knobs(**best_config).describe()} |"
        )
    return "\n".join(curve) + "\n\n" + "\n".join(summary)


def plot(runs: dict[str, tuple[int, dict[str, KernelResult]]], trials: int, path: Path) -> None:
    try:
        import matplotlib
    except ImportError:
        print(f"matplotlib is not installed: no {path} (pip install matplotlib)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(4 * len(runs), 3.6), squeeze=False)
    for ax, (case, (_, results)) in zip(axes[0], runs.items(), strict=True):
        reference = best_known(results) or float("nan")
        for method, r in results.items():
            xs = range(1, min(trials, len(r.search.history)) + 1)
            ys = [(r.search.best_after(t) or float("nan")) / reference for t in xs]
            ax.plot(list(xs), ys, label=method)
        ax.set_title(CASES[case][0], fontsize=9)
        ax.set_xlabel("trials")
        ax.set_yscale("log")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("best latency / best known")
    axes[0][0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
