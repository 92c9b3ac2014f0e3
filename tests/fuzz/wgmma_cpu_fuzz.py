"""Random f16/bf16 GEMM programs under random wgmma planning knobs, run on the CPU with the
wgmma emulation (tests/cpu_wgmma.py) against float64.

    python tests/fuzz/wgmma_cpu_fuzz.py [-n 60] [--seed 0] [-v]

Each case is one program (a linear `[N, K]` with or without a bias, a matmul `[K, N]` with or
without a ReLU, a batched matmul, a shared-A batched matmul as a 1×1 convolution runs, an MLP
linear → GELU → linear, a SwiGLU gate, a linear cast to f32, a linear times its SiLU, an FP8
`_scaled_mm`) with dims of 1..400 (K sometimes to 1600) drawn with a bias toward odd, prime,
≡ 8 mod 16 and tile-boundary sizes, M·N·K (summed over the GEMMs, times the batch) under
`BUDGET` so the emulator (a fiber per CUDA thread) keeps up; and knobs: `sms` of `SMS` (so the
planner takes the plans a 132-SM GPU takes at larger shapes: 192-row blocks, 128×192 blocks,
persistent grids) with some of `bm=192`, `bm=192 bn=128`, `bm=192 bn=64`, `bn=192`, `bm=128`,
`align=on`/`off`, `persistent=1`, `stages=2..4`, `store=direct`, `ws=0`, `splitk=2|4`,
`mma=wgmma`. The new planning paths it aims at: 192-row blocks (`wgmma_plan.TALL`, three
consumer warpgroups, persistent past `sms` tiles), 128×192 blocks between half a wave and a
wave of 128×256 ones, and the sector staging of rows 16 but not 32 bytes long
(`wgmma_staged.sector_staging`: `_pad_` copy kernels).

A planner refusal (`DiagnosticException`) is counted, never a failure; an error above the
program's tolerance (or one element off by more than `ELEMENT_TOLERANCE`), a NaN, a vector
access off its alignment (UBSan's check, `check_alignment`; `--no-alignment-check` skips it),
a plan with fewer wgmma kernels than the same knobs with `align=off` (a staging that leaves a
GEMM off the tensor cores), or any other exception fails the case, printed with the seed and
index that rebuild it (`case(seed, index)`). The exit status is 1 when any case failed.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import numpy as np  # noqa: E402
from cpu_wgmma import run_program_on_cpu  # noqa: E402
from programs import _t, batched_matmul, matmul_plain, mlp, scaled_matmul, shared_a_matmul  # noqa: E402
from programs import swiglu  # noqa: E402
from programs import tile_with  # noqa: E402
from xdsl.dialects.builtin import f16  # noqa: E402
from xdsl.utils.exceptions import DiagnosticException  # noqa: E402

from tinyopt.backends.check import device_inputs, element_type, from_storage  # noqa: E402
from tinyopt.backends.check import graph_function, relative_error, tolerance  # noqa: E402
from tinyopt.backends.reference import run_reference  # noqa: E402
from tinyopt.compiler import apply_pipeline, lower, parse  # noqa: E402
from tinyopt.dialects import loop, tile  # noqa: E402

ELEMENT_TOLERANCE = 2**-5
"""The largest error of one output element accepted, relative to its reference's magnitude
plus the output's RMS: a bf16 output rounds by 2^-9 of itself, an MLP's bf16 hidden values by
2^-9 of theirs, which the second GEMM sums to about 2^-9 of the output's RMS. The norm
‖out − ref‖ / ‖ref‖ (the tests' `tolerance`, 2e-2) misses a few wrong elements of a large
output: this bound catches a single element off by 4% of the RMS."""

BUDGET = 10_000_000
"""M·N·K of a case at most (summed over its GEMMs, times the batch)."""

SMS = (1, 2, 3, 4, 6, 8, 16)

BOUNDARY = (63, 64, 65, 127, 128, 129, 191, 192, 193, 200, 256, 257, 264)
PRIMES = (2, 3, 5, 7, 13, 31, 67, 71, 97, 101, 131, 137, 139, 197, 199, 211, 251, 263, 331, 397)
SECTOR_OFF = tuple(range(8, 401, 16))
"""Rows of 16 bytes past a multiple of 32 in bf16/f16: ≡ 8 mod 16."""


def dim(rng: random.Random, low: int = 1) -> int:
    kind = rng.random()
    if kind < 0.3:
        d = rng.choice(BOUNDARY)
    elif kind < 0.55:
        d = rng.choice(SECTOR_OFF)
    elif kind < 0.7:
        d = rng.choice(PRIMES)
    elif kind < 0.85:
        d = rng.randrange(1, 401, 2)
    else:
        d = rng.randint(1, 400)
    return max(d, low)


def linear(m: int, n: int, k: int, dtype: str) -> str:
    """`linear(x, w)` without a bias, w `[N, K]`."""
    x, w, y = _t((m, k), dtype), _t((n, k), dtype), _t((m, n), dtype)
    return f"""func.func @linear(%x: {x}, %w: {w}) -> {y} {{
  %y = graph.linear %x, %w : ({x}, {w}) -> {y}
  func.return %y : {y}
}}"""


def linear_to_f32(m: int, n: int, k: int, dtype: str) -> str:
    """`linear(x, w)` cast to an f32 output (the epilogue stores f32: 4 a 16-byte vector)."""
    x, w, y, y32 = _t((m, k), dtype), _t((n, k), dtype), _t((m, n), dtype), _t((m, n), "f32")
    return f"""func.func @linear_f32(%x: {x}, %w: {w}) -> {y32} {{
  %y = graph.linear %x, %w : ({x}, {w}) -> {y}
  %z = graph.cast %y : {y} -> {y32}
  func.return %z : {y32}
}}"""


def linear_silu_gate(m: int, n: int, k: int, dtype: str) -> str:
    """`silu(y) * y` for `y = linear(x, w, b)`: an epilogue reading the product twice."""
    x, w, y, b = _t((m, k), dtype), _t((n, k), dtype), _t((m, n), dtype), _t((n,), dtype)
    return f"""func.func @linear_silu(%x: {x}, %w: {w}, %b: {b}) -> {y} {{
  %y = graph.linear %x, %w, %b : ({x}, {w}, {b}) -> {y}
  %s = graph.silu %y : {y}
  %p = graph.mul %s, %y : {y}
  func.return %p : {y}
}}"""


@dataclass(frozen=True)
class Case:
    name: str
    text: str
    knobs: str


def _aligned(d: int) -> int:
    """`d` rounded up to whole 16 bytes of f16/bf16 (a row TMA addresses)."""
    return -(-d // 8) * 8


FORMS = (
    "linear_bias", "linear", "matmul", "matmul_relu", "bmm", "mlp", "linear_bias", "linear",
    "matmul", "bmm", "mlp", "shared_a", "swiglu", "linear_f32", "linear_silu", "scaled_mm",
)  # fmt: skip
"""The programs drawn, the ones the new paths aim at twice: `shared_a` is one A `[M, K]` for
every batch entry of B (a 1×1 convolution), `swiglu` two products over one A (a dual GEMM),
`linear_f32` an f32 output, `linear_silu` an epilogue reading the product twice, `scaled_mm`
8-bit float operands (its output bf16 or f32, whatever the case's dtype)."""


def _program(rng: random.Random, dtype: str, aligned: bool) -> tuple[str, str, int]:
    """(name, text, M·N·K) of a random program; with `aligned`, its contracted rows (K, and N
    where B is `[K, N]`) whole 16 bytes, as the wgmma rule needs."""
    form = rng.choice(FORMS)
    # M mostly past 64 rows (the skinny rules' shapes are not what this aims at)
    m = dim(rng, low=rng.choice((1, 65, 65, 65)))
    n, k = dim(rng), dim(rng)
    if rng.random() < 0.15:  # a long K (grids the planner may split over K)
        k = rng.choice((k + 512, 2 * k + 512, rng.randint(401, 1600)))
    if aligned:
        k = _aligned(k)
        n = _aligned(n) if form in ("matmul", "matmul_relu", "bmm", "mlp", "shared_a") else n
    if form == "scaled_mm":  # 8-bit floats, `_scaled_mm`'s form: B [N, K], K rows of bytes
        fp8, out = rng.choice(("f8E4M3FN", "f8E5M2")), rng.choice(("bf16", "f32"))
        k = -(-k // 16) * 16 if aligned else k
        name = f"scaled_mm_{m}x{n}x{k}_{fp8}_to_{out}"
        return name, scaled_matmul(m, n, k, fp8, out), m * n * k
    if form == "bmm":
        batch = rng.choice((1, 2, 3))
        text = batched_matmul(batch, m, n, k, dtype)
        return f"bmm_{batch}x{m}x{n}x{k}", text, batch * m * n * k
    if form == "shared_a":
        batch = rng.choice((1, 2, 3))
        text = shared_a_matmul(batch, m, n, k, dtype)
        return f"shared_a_{batch}x{m}x{n}x{k}", text, batch * m * n * k
    if form == "swiglu":  # a dual GEMM (two [N, K] weights over one x) where wgmma takes it
        return f"swiglu_{m}x{k}x{n}", swiglu(m, k, n, dtype), 2 * m * n * k
    if form == "mlp":
        # linear(gelu(linear(x [m, n], w1 [k, n])), w2 [n, k]): two GEMMs of m·n·k
        return f"mlp_{m}x{n}x{k}", mlp(m, n, k, dtype), 2 * m * n * k
    if form == "linear_f32":
        return f"linear_f32_{m}x{n}x{k}", linear_to_f32(m, n, k, dtype), m * n * k
    if form == "linear_silu":
        return f"linear_silu_{m}x{n}x{k}", linear_silu_gate(m, n, k, dtype), m * n * k
    if form == "linear_bias":
        text = matmul_plain(m, n, k, dtype, "nk")
    elif form == "linear":
        text = linear(m, n, k, dtype)
    else:
        text = matmul_plain(m, n, k, dtype, "kn", relu=form == "matmul_relu")
    return f"{form}_{m}x{n}x{k}", text, m * n * k


MODES = {
    "auto": [],
    "tall": ["mma=wgmma", "bm=192"],
    "tall128": ["mma=wgmma", "bm=192", "bn=128"],
    "align_on": ["align=on"],
    "align_off": ["align=off"],
    "wgmma": ["mma=wgmma"],
    "tall64": ["mma=wgmma", "bm=192", "bn=64"],
    "bn192": ["mma=wgmma", "bn=192"],
    "bm128": ["mma=wgmma", "bm=128"],
}
WEIGHTS = {
    "auto": 3, "tall": 2, "tall128": 1, "align_on": 3, "align_off": 1, "wgmma": 1, "tall64": 1,
    "bn192": 1, "bm128": 1,
}  # fmt: skip


def _knobs(rng: random.Random, mode: str) -> str:
    knobs = [f"sms={rng.choice(SMS)}", *MODES[mode]]
    if rng.random() < 0.25:
        knobs.append("persistent=1")
    if "mma=wgmma" in knobs and rng.random() < 0.3:  # deeper rings: wgmma's alone
        knobs.append(f"stages={rng.randint(2, 4)}")
    if rng.random() < 0.1:
        knobs.append("store=direct")
    if "persistent=1" not in knobs and rng.random() < 0.1:  # no producer warpgroup
        knobs.append("ws=0")
    if "mma=wgmma" in knobs and rng.random() < 0.15:  # whole 64-element chunks under wgmma
        knobs.append(f"splitk={rng.choice((2, 4))}")
    return " ".join(knobs)


def case(seed: int, index: int) -> Case:
    """The `index`th case of `seed`'s run."""
    rng = random.Random(seed * 1_000_003 + index)
    mode = rng.choices(list(WEIGHTS), list(WEIGHTS.values()))[0]
    # explicit wgmma needs TMA-addressable rows; the others mostly get them too (the staging
    # of misaligned rows, align=on, and mma.sync's plans take the rest)
    aligned = "mma=wgmma" in MODES[mode] or rng.random() < 0.7
    while True:
        dtype = rng.choice(("bf16", "bf16", "f16"))
        name, text, work = _program(rng, dtype, aligned)
        if work <= BUDGET:
            break
    name = name if name.startswith("scaled_mm") else f"{name}_{dtype}"
    return Case(name, text, _knobs(rng, mode))


def plan_paths(text: str, knobs: str) -> set[str]:
    """The new planning paths the plan of `text` under `knobs` takes: "tall" (a 192-row
    block), "tall_persistent", "128x192", "pad" (a staging copy), "wgmma" (any wgmma kernel),
    "splitk" (a split-K partial kernel).
    Raises the planner's `DiagnosticException`."""
    module = apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")
    paths = set()
    for kernel in loop.kernels(module):
        if "_pad_" in kernel.sym_name.data:
            paths.add("pad")
        if kernel.sym_name.data.endswith("_splitk"):
            paths.add("splitk")
        plan = kernel.attributes[tile.PLAN]
        if plan.rule.data != "wgmma":  # type: ignore[union-attr]
            continue
        values = plan.values  # type: ignore[union-attr]
        paths.add("wgmma")
        if values["bm"] == 192:
            paths.add("tall")
            if values["persistent"]:
                paths.add("tall_persistent")
        if (values["bm"], values["bn"]) == (128, 192):
            paths.add("128x192")
    return paths


def check_alignment(folder: Path) -> None:
    """Makes this process's emulated kernels abort on a vector access off its alignment, as the
    GPU faults on one (x86 does not): `tinyopt_vec` aligned as the CUDA printer declares it
    (`alignas(sizeof(T) * N)`), in a copy of the emulation header written to `folder`, and
    g++'s UBSan alignment check, fatal. Not for a pytest process: it changes `cpu_cuda`'s
    header and flags for every test after it."""
    import cpu_cuda

    plain = "template <typename T, int N> struct tinyopt_vec { T v[N]; };"
    aligned = "template <typename T, int N> struct alignas(sizeof(T) * N) tinyopt_vec { T v[N]; };"
    text = cpu_cuda.HEADER.read_text()
    assert plain in text, "the emulation header's tinyopt_vec changed"
    folder.mkdir(parents=True, exist_ok=True)
    header = folder / "cpu_cuda_aligned.h"
    header.write_text(text.replace(plain, aligned))
    cpu_cuda.HEADER = header
    cpu_cuda.FLAGS[:] = [*cpu_cuda.FLAGS, "-fsanitize=alignment", "-fno-sanitize-recover=alignment"]


def errors_on_cpu(text: str, knobs: str, seed: int) -> tuple[float, float, float]:
    """The output's relative error ‖out − ref‖ / ‖ref‖ against float64 and its bound (as
    `cpu_wgmma.error_on_cpu`), and its worst element's error relative to the element's
    magnitude plus the output's RMS (`ELEMENT_TOLERANCE`)."""
    program, module = lower(text, tile_with(knobs))
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=seed)
    arrays = [a.view(np.uint16) if a.dtype == np.float16 else a for a in arrays]
    (result,) = run_program_on_cpu(module, arrays)
    t = element_type(graph.function_type.outputs.data[0])
    if t == f16:
        result = result.view(np.float16)
    out = from_storage(result, t)
    (ref,) = run_reference(graph, *inputs)
    rms = float(np.sqrt(np.mean(np.square(ref)))) or 1.0
    worst = float(np.max(np.abs(out - ref) / (np.abs(ref) + rms)))
    if np.isnan(out).any():
        worst = float("nan")
    return relative_error(out, ref), tolerance(graph), worst


def wgmma_kernels(text: str, knobs: str) -> int:
    """The kernels the wgmma rule takes in the plan of `text` under `knobs`."""
    module = apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")
    plans = [k.attributes[tile.PLAN] for k in loop.kernels(module)]
    return sum(p.rule.data == "wgmma" for p in plans)  # type: ignore[union-attr]


def unaligned(knobs: str) -> str:
    """`knobs` with `align=off`: no staging, rows off sectors left to the wgmma rule."""
    return " ".join([*(w for w in knobs.split() if not w.startswith("align=")), "align=off"])


def run_case(c: Case, seed: int) -> tuple[str, set[str], str]:
    """("ok" | "refused" | "refused_late" | "failed", the plan's paths, a note). Besides the
    output's errors, a plan with fewer wgmma kernels than under `align=off` fails: staging
    only ever moves a GEMM onto wgmma."""
    try:
        paths = plan_paths(c.text, c.knobs)
        wgmma, wgmma_unaligned = wgmma_kernels(c.text, c.knobs), 0
        if "align=off" not in c.knobs.split():
            wgmma_unaligned = wgmma_kernels(c.text, unaligned(c.knobs))
    except DiagnosticException as e:
        return "refused", set(), str(e).splitlines()[0][:160]
    if wgmma < wgmma_unaligned:
        return "failed", paths, f"{wgmma} wgmma kernels, {wgmma_unaligned} with align=off"
    try:
        error, bound, worst = errors_on_cpu(c.text, c.knobs, seed)
    except DiagnosticException as e:  # planned, then refused by `tile` or `to-cuda`
        return "refused_late", paths, str(e).splitlines()[0][:160]
    except Exception:  # noqa: BLE001 - every other exception is a failure
        return "failed", paths, traceback.format_exc()
    note = f"error {error:.3g} (bound {bound:.3g}), worst element {worst:.3g}"
    if not (error <= bound and worst <= ELEMENT_TOLERANCE):  # NaN fails too
        return "failed", paths, note
    return "ok", paths, note


def run(seed: int, count: int, verbose: bool = False) -> tuple[Counter, Counter, list[str]]:
    """Runs `count` cases of `seed`; returns the outcomes, the paths exercised (by the cases
    that ran) and the failures' reports."""
    outcomes: Counter = Counter()
    exercised: Counter = Counter()
    failures = []
    for index in range(count):
        c = case(seed, index)
        start = time.monotonic()
        outcome, paths, note = run_case(c, seed + index)
        outcomes[outcome] += 1
        exercised.update(paths)
        if paths & {"tall", "pad"}:
            exercised["tall_or_pad"] += 1
        line = f"[{seed}:{index}] {c.name} {{{c.knobs}}} {outcome} {sorted(paths)} {note}"
        if outcome in ("failed", "refused_late"):
            if outcome == "failed":
                failures.append(f"case({seed}, {index}): {c.name} {{{c.knobs}}}\n{c.text}\n{note}")
            print(line, flush=True)
        elif verbose:
            print(f"{line} {time.monotonic() - start:.1f}s", flush=True)
    return outcomes, exercised, failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=60, help="cases")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case")
    parser.add_argument(
        "--no-alignment-check",
        action="store_true",
        help="let misaligned vector accesses pass (as x86 does; the GPU faults)",
    )
    args = parser.parse_args()
    if not args.no_alignment_check:
        import tempfile

        check_alignment(Path(tempfile.gettempdir()) / "wgmma_cpu_fuzz")
    start = time.monotonic()
    outcomes, exercised, failures = run(args.seed, args.n, args.verbose)
    print(f"seed {args.seed}: {args.n} cases in {time.monotonic() - start:.0f}s: {dict(outcomes)}")
    print(f"paths: {dict(sorted(exercised.items()))}")
    for report in failures:
        print(f"\nFAILED {report}")
    ran = outcomes["ok"] + outcomes["failed"] + outcomes["refused_late"]
    if ran and exercised["tall_or_pad"] < ran // 5:
        print(f"too few cases took a 192-row block or a staging copy: {exercised['tall_or_pad']}")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
