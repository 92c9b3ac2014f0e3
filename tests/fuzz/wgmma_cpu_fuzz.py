"""Random f16/bf16 GEMM programs under random wgmma planning knobs, run on the CPU with the
wgmma emulation (tests/cpu_wgmma.py) against float64.

    python tests/fuzz/wgmma_cpu_fuzz.py [-n 60] [--seed 0] [-v] [--multicast | --ragged |
        --tma-store | --swap]

Each case is one program (a linear `[N, K]` with or without a bias, a matmul `[K, N]` with or
without a ReLU, a batched matmul, a shared-A batched matmul as a 1×1 convolution runs, an MLP
linear → GELU → linear, a SwiGLU gate, a linear cast to f32, a linear times its SiLU, an FP8
`_scaled_mm`) with dims of 1..400 (K sometimes to 1600) drawn with a bias toward odd, prime,
≡ 8 mod 16 and tile-boundary sizes, M·N·K (summed over the GEMMs, times the batch) under
`BUDGET` so the emulator (a fiber per CUDA thread) keeps up; and knobs: `sms` of `SMS` (so the
planner takes the plans a 132-SM GPU takes at larger shapes: 192-row blocks, 128×192 blocks,
persistent grids) with some of `bm=192`, `bm=192 bn=128`, `bm=192 bn=64`, `bn=192`, `bm=128`,
`align=on`/`off`, `persistent=1`, `stages=2..4`, `store=direct` (`store=smem` with half of
`align=off`), `ws=0`, `splitk=2|4`,
`mma=wgmma`, and `poverlap=on` for two FP8 cases in five. The new planning paths it aims at:
192-row blocks (`wgmma_plan.TALL`, three
consumer warpgroups, persistent past `sms` tiles), 128×192 blocks between half a wave and a
wave of 128×256 ones, and the sector staging of rows 16 but not 32 bytes long
(`wgmma_staged.sector_staging`: `_pad_` copy kernels).

A planner refusal (`DiagnosticException`) is counted, never a failure; an error above the
program's tolerance (or one element off by more than `ELEMENT_TOLERANCE`), a NaN, a vector
access off its alignment (UBSan's check, `check_alignment`; `--no-alignment-check` skips it),
a plan with fewer wgmma kernels than the same knobs with `align=off` (a staging that leaves a
GEMM off the tensor cores) or with copies feeding a GEMM off wgmma, or any other exception
fails the case, printed with the seed and
index that rebuild it (`case(seed, index)`). The exit status is 1 when any case failed.

`--multicast` draws other cases (`multicast_case`): the same programs (and FP8 with block
scales) under `multicast=a` or `b` (two columns or rows of tiles sharing A or B tiles by TMA
multicast, `passes/tile/gemm/wgmma_multicast.py`) with two to five columns or rows of tiles of
the shared side, often odd, `sms` small enough for persistent pairs to walk
several pairs of tiles, and `group`, `evict`, `dual=off` among the knobs; or `multicast=auto`
on K-major B rows off 32-byte sectors with K loops either side of the automatic rule's 24
steps. It prints the multicast kernels that ran by operand and grid and the refusals by
reason. The emulation aborts a cluster whose blocks all wait (a deadlock; or none changed the
cluster for `CPU_CUDA_CLUSTER_TIMEOUT`, 60 s here), and a launch past `LAUNCH_TIMEOUT` seconds
fails as a hang; the kernels' IR rejected by its verifier fails too.

`--ragged` draws the same programs under `mma=wgmma` with a block width off 64-column chunks
(`RAGGED_WIDTHS`: an N-major B's last chunk copied whole, the staged epilogue's last chunk
partial) on 64-, 128- or 192-row blocks, with `persistent`, `store=direct`, `stages` and
`multicast=a|b` (about 3 in 10) among the knobs, and runs each launch's blocks last to first,
so a store past a block's own columns lands after its neighbour's and shows.

`--tma-store` draws the same programs under `mma=wgmma store=tma` (the TMA-store epilogue,
`passes/tile/gemm/wgmma_tma_store.py`) with a block shape, `persistent=1`, `ws=0`,
`streamk=tail`, `multicast=a|b` or `stages` among the knobs, blocks run last to first (but
under stream-K, whose blocks wait on flags that later blocks set): a box written past M or N,
or into a neighbour's columns, shows. f32 outputs and rows off 16 bytes
are refused, as the rule refuses them.

`--swap` draws the same programs (any rows: those off 16 bytes are staged first) under
`swap=on` (the sides exchanged, `passes/tile/gemm/wgmma_swap.py`) with `bm`, a width of
`RAGGED_WIDTHS` or a power of two, `persistent=1`, `stages`, `store=direct` (`auto` stages
the epilogue) or `splitk` among the knobs, blocks run last to first: the transposed
epilogue's stores past M or N, or into a neighbour's tile, show.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
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
from programs import _t, batched_matmul, block_scaled_matmul, matmul_plain, mlp  # noqa: E402
from programs import scaled_matmul, shared_a_matmul  # noqa: E402
from programs import swiglu  # noqa: E402
from programs import tile_with  # noqa: E402
from xdsl.dialects.builtin import f16  # noqa: E402
from xdsl.utils.exceptions import DiagnosticException, VerifyException  # noqa: E402

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
ROWS_OF_N = ("matmul", "matmul_relu", "bmm", "mlp", "shared_a")
"""The forms whose N is a contracted row: B `[K, N]` (N-major), or the MLP's first linear's K
(`mlp(m, n, k)`: x `[m, n]`)."""


def _program(
    rng: random.Random,
    dtype: str,
    aligned: bool,
    form: str | None = None,
    dims: tuple[int, int, int] | None = None,
) -> tuple[str, str, int]:
    """(name, text, M·N·K) of a random program (of `form`, else one of `FORMS`; of `dims`
    (M, N, K), else drawn); with `aligned`, its contracted rows (K, and N where B is `[K, N]`)
    whole 16 bytes, as the wgmma rule needs."""
    form = form or rng.choice(FORMS)
    if dims is None:
        # M mostly past 64 rows (the skinny rules' shapes are not what this aims at)
        m = dim(rng, low=rng.choice((1, 65, 65, 65)))
        n, k = dim(rng), dim(rng)
        if rng.random() < 0.15:  # a long K (grids the planner may split over K)
            k = rng.choice((k + 512, 2 * k + 512, rng.randint(401, 1600)))
    else:
        m, n, k = dims
    if aligned:
        k = _aligned(k)
        n = _aligned(n) if form in ROWS_OF_N else n
    if form in ("scaled_mm", "block_scaled"):  # 8-bit floats: B [N, K], K rows of bytes
        fp8, out = rng.choice(("f8E4M3FN", "f8E5M2")), rng.choice(("bf16", "f32"))
        k = -(-k // 16) * 16 if aligned else k
        if form == "block_scaled":  # one f32 scale per 1×128 (or 128×128) of A, 128×128 of B
            a_rows = rng.choice((1, 128))
            name = f"block_scaled_{m}x{n}x{k}_{fp8}_to_{out}_a{a_rows}"
            return name, block_scaled_matmul(m, n, k, fp8, out, a_rows), m * n * k
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


RAGGED_WIDTHS = (80, 96, 112, 144, 160, 176, 208, 224, 240)
"""The block widths of `--ragged` cases: multiples of 16 that are not of 64."""


def ragged_case(seed: int, index: int) -> Case:
    """The `index`th `--ragged` case of `seed`: a program of `case`'s (TMA-addressable rows)
    under `mma=wgmma` with a width of `RAGGED_WIDTHS`."""
    rng = random.Random(f"ragged {seed} {index}")
    name, text = _budgeted_program(rng, True)
    bn = rng.choice(RAGGED_WIDTHS)
    bm = rng.choice((64, 128, 128, 192) if bn <= 192 else (64, 128))
    knobs = [f"sms={rng.choice(SMS)}", "mma=wgmma", f"bm={bm}", f"bn={bn}"]
    if rng.random() < 0.3:
        knobs.append("persistent=1")
    if rng.random() < 0.2:
        knobs.append("store=direct")
    if rng.random() < 0.2:
        knobs.append(f"stages={rng.randint(2, 4)}")
    # A or B multicast over a pair of blocks, drawn apart from `rng` (a seed's other draws stay)
    shared = random.Random(f"ragged multicast {seed} {index}")
    if shared.random() < 0.3:
        knobs.append(f"multicast={shared.choice('ab')}")
    return Case(name, text, " ".join(knobs))


def swap_case(seed: int, index: int) -> Case:
    """The `index`th `--swap` case of `seed`: a program of `case`'s under `swap=on` with a
    block shape, a persistent grid or a ring depth drawn among the knobs."""
    rng = random.Random(f"swap {seed} {index}")
    name, text = _budgeted_program(rng, rng.random() < 0.8)
    knobs = [f"sms={rng.choice(SMS)}", "swap=on"]
    bm = rng.choice((0, 0, 64, 128, 192))
    bn = rng.choice((0, 0, 64, 128, 256, *RAGGED_WIDTHS))
    if bm == 192 and bn > 192:
        bn = 192
    if bm or bn % 64:  # a bm of 192 or a ragged width: mma=wgmma's domain
        knobs.append("mma=wgmma")
    knobs += [f"bm={bm}"] * bool(bm) + [f"bn={bn}"] * bool(bn)
    if rng.random() < 0.3:
        knobs.append("persistent=1")
    if rng.random() < 0.2:
        knobs.append(f"stages={rng.randint(2, 4)}")
    # the direct epilogue (`store=auto` stages) and a split of K, drawn apart from `rng` (a
    # seed's other draws stay)
    apart = random.Random(f"swap store {seed} {index}")
    if apart.random() < 0.4:
        knobs.append("store=direct")
    if "persistent=1" not in knobs and apart.random() < 0.2:
        knobs.append(f"splitk={apart.choice((2, 4))}")
    return Case(name, text, " ".join(knobs))


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
    # mma.sync's epilogue through shared memory, half the align=off cases (drawn apart from
    # `rng`, so a seed's other cases stay as they were)
    chosen = " ".join(knobs)
    if (
        "align=off" in knobs
        and "store=direct" not in knobs
        and random.Random(chosen).random() < 0.5
    ):
        knobs.append("store=smem")
    return " ".join(knobs)


def case(seed: int, index: int) -> Case:
    """The `index`th case of `seed`'s run."""
    rng = random.Random(seed * 1_000_003 + index)
    mode = rng.choices(list(WEIGHTS), list(WEIGHTS.values()))[0]
    # explicit wgmma needs TMA-addressable rows; the others mostly get them too (the staging
    # of misaligned rows, align=on, and mma.sync's plans take the rest)
    aligned = "mma=wgmma" in MODES[mode] or rng.random() < 0.7
    name, text = _budgeted_program(rng, aligned)
    knobs = _knobs(rng, mode)
    # FP8's promoted steps overlapped in two sets of products, two cases in five (drawn apart
    # from `rng`, so a seed's other cases stay as they were)
    if name.startswith(("scaled_mm", "block_scaled")) and random.Random(name).random() < 0.4:
        knobs += " poverlap=on"
    return Case(name, text, knobs)


def _budgeted_program(rng: random.Random, aligned: bool) -> tuple[str, str]:
    """(name, text) of the first program `_program` draws under `BUDGET`, in f16 or bf16 (its
    element type in the name, but for FP8's)."""
    while True:
        dtype = rng.choice(("bf16", "bf16", "f16"))
        name, text, work = _program(rng, dtype, aligned)
        if work <= BUDGET:
            break
    return (name if name.startswith("scaled_mm") else f"{name}_{dtype}"), text


MULTICAST_WEIGHTS = {"a": 4, "b": 5, "auto": 2}
"""The `multicast` knob of a `--multicast` case (`multicast_case`)."""

MULTICAST_FORMS = (
    "linear_bias", "linear", "matmul", "matmul_relu", "bmm", "mlp", "shared_a", "swiglu",
    "linear_f32", "linear_silu", "scaled_mm", "block_scaled", "linear", "linear_bias",
    "matmul", "bmm", "scaled_mm", "block_scaled",
)  # fmt: skip
"""The programs of `multicast=a|b` cases: every form of `FORMS`, and FP8 with block scales
(`block_scaled`, 1×128 or 128×128 scales of A, 128×128 of B)."""

AUTO_FORMS = ("linear_bias", "linear", "linear_f32", "linear_silu", "mlp", "swiglu")
"""The programs of `multicast=auto` cases: K-major B (`[N, K]`), whose rows off 32-byte
sectors the automatic rule may pair blocks for."""
AUTO_N_MAJOR_FORMS = ("matmul", "matmul_relu", "bmm")
"""The `multicast=auto` cases' programs of an N-major B (`[K, N]`), paired from 8 K steps."""

MULTICAST_BUDGET = 40_000_000
"""M·N·K of a multicast case at most: fewer, larger cases than `BUDGET` (two rows or columns
of tiles at least, up to five; 40M products emulate in a second or two on the 2-core VM,
g++ included)."""

MULTICAST_DRAWS = 50
"""Shapes a multicast case draws for one under its budget before it takes a small one."""

MULTICAST_SMS = (1, 2, 3, 4, 4, 6, 8, 16)
"""`sms` of a multicast case: small, so that a persistent grid's pairs walk several pairs of
tiles (1: one pair of blocks)."""


def _tiles_of(rng: random.Random, block: int, more: int = 0) -> int:
    """An extent of 2-5 tiles of `block` (an odd count three times in five), `more` tiles
    more, its last tile ragged seven times in ten."""
    count = rng.choice((2, 3, 3, 4, 5)) + more
    return count * block - (rng.randrange(block) if rng.random() < 0.7 else 0)


def multicast_case(seed: int, index: int) -> Case:
    """The `index`th case of `seed`'s `--multicast` run: `multicast=a`, `b` or `auto` with the
    knobs `case` draws (explicit blocks more often) and `group`, `evict`, `dual=off`, and
    rarely `ws=0`, `streamk=tail` or a cluster split (refused with `a` or `b`); a fifth of the
    `a` and `b` cases over four blocks (`a4`, `b4`); for `a` or `b`
    two to five columns or rows of tiles of the shared operand's side (odd counts three times
    in five: the last pair's second block past N or M; four to seven for four blocks), for
    `auto` a K-major B with
    K ≡ 8 mod 16 (off 32-byte sectors) of 24 K steps or more (or 22-23: the rule's edge), or
    an N-major B with N ≡ 8 mod 16 and K of 5-12 steps (the rule's edge at 8)."""
    rng = random.Random(f"multicast {seed} {index}")
    knob = rng.choices(list(MULTICAST_WEIGHTS), list(MULTICAST_WEIGHTS.values()))[0]
    # a fifth of the explicit ones over four blocks (drawn apart: the seeds' other draws stay)
    if knob != "auto" and random.Random(f"multicast four {seed} {index}").random() < 0.2:
        knob += "4"
    dtype = rng.choice(("bf16", "bf16", "f16"))
    knobs = [f"multicast={knob}"]
    if knob == "auto":
        form = rng.choice(AUTO_FORMS)
        # a third of them on an N-major B instead (drawn apart: the seeds' K-major cases stay)
        n_major = random.Random(f"multicast n-major {seed} {index}")
        if n_major.random() < 0.3:
            form = n_major.choice(AUTO_N_MAJOR_FORMS)
        # few SMs: blocks 128 columns wide or more, at most two waves of them (many SMs get
        # 64×64 blocks, which the rule leaves unpaired)
        knobs.append(f"sms={rng.choice((2, 4, 4, 8, 8, 16, 132))}")
        bm, bn = 64, 128
        if rng.random() < 0.3:
            bm, bn = rng.choice(((64, 128), (128, 128), (64, 256), (128, 256), (192, 192)))
            knobs += ["mma=wgmma", f"bm={bm}", f"bn={bn}"]
        draws = 0
        while True:
            m = rng.choice((2, 2, 4, 3)) * bm - rng.randrange(bm // 2)
            n = rng.randint(1, 3) * bn - rng.randrange(bn // 2)
            # K ≡ 8 mod 16 of 24-34 K steps (1480: 23.1 steps), 20% of 22-23 (the rule's edge)
            k = 1480 + 16 * rng.randrange(41) if rng.random() < 0.8 else rng.choice((1416, 1448))
            if form in AUTO_N_MAJOR_FORMS:  # B's rows of N off sectors, 5-12 K steps
                n, k = max(n // 16, 1) * 16 + 8, 8 * rng.randint(36, 96)
            name, text, work = _program(rng, dtype, True, form, (m, n, k))
            if work <= 2 * MULTICAST_BUDGET:
                break
            if (draws := draws + 1) == MULTICAST_DRAWS:  # two rows, one column: past the budget
                m, n, k = 2 * bm - bm // 4, bn, 1480
                name, text, work = _program(rng, dtype, True, form, (m, n, k))
                break
    else:
        form = rng.choice(MULTICAST_FORMS)
        explicit = rng.random() < 0.6
        bm, bn = 128, 128  # a guess at what the planner takes
        if explicit:
            bm = rng.choice((64, 64, 128, 128, 192))
            bn = rng.choice((64, 128, 128, 192, 256))
            knobs += ["mma=wgmma", f"bm={bm}", f"bn={bn}"]
        elif rng.random() < 0.3:
            knobs.append("mma=wgmma")
        knobs.append(f"sms={rng.choice(MULTICAST_SMS)}")
        draws = 0
        while True:
            by_a = knob.startswith("a")
            more = 2 if knob.endswith("4") else 0  # four blocks: 4-7 rows or columns of tiles
            shared = _tiles_of(rng, bn if by_a else bm, more)  # N for a, M for b
            other = dim(rng, low=65 if by_a else 1)
            m, n = (other, shared) if by_a else (shared, other)
            k = dim(rng)
            if rng.random() < 0.15:
                k = rng.randint(401, 1200)
            if form == "block_scaled":  # more than one 128-element K block of scales
                k = max(k, rng.randint(129, 400))
            name, text, work = _program(rng, dtype, True, form, (m, n, k))
            if work <= MULTICAST_BUDGET:
                break
            if (draws := draws + 1) == MULTICAST_DRAWS:  # the shortest K instead
                k = 136 if form == "block_scaled" else 8
                name, text, work = _program(rng, dtype, True, form, (m, n, k))
                break
    if rng.random() < 0.4:
        knobs.append("persistent=1")
    if "mma=wgmma" in knobs and rng.random() < 0.3:
        knobs.append(f"stages={rng.randint(2, 4)}")
    if rng.random() < 0.3:
        knobs.append(f"group={rng.choice((1, 2, 8, 16))}")
    if rng.random() < 0.3:
        knobs.append(f"evict={rng.choice(('off', 'once', 'a', 'b', 'ab'))}")
    if rng.random() < 0.1:
        knobs.append("store=direct")
    if "mma=wgmma" in knobs and rng.random() < 0.15:
        knobs.append(f"splitk={rng.choice((2, 4))}")
    if form == "swiglu" and rng.random() < 0.7:  # two plain GEMMs, else a dual one (refused)
        knobs.append("dual=off")
    if rng.random() < 0.1:
        knobs.append(rng.choice(("align=on", "align=off")))
    if rng.random() < 0.06:  # refused with multicast=a|b
        knobs.append(rng.choice(("ws=0", "streamk=tail", "splitk_mode=cluster")))
        if "splitk_mode=cluster" in knobs and not any(w.startswith("splitk=") for w in knobs):
            knobs.append("splitk=2")
    name = name if name.startswith(("scaled_mm", "block_scaled")) else f"{name}_{dtype}"
    return Case(name, text, " ".join(knobs))


def multicast_plans(text: str, knobs: str) -> list[tuple[str, bool, bool, bool]]:
    """The wgmma kernels of the plan of `text` under `knobs` that multicast: (the `multicast`
    value, "a", "b", "a4" or "b4"; a persistent grid; rows or columns of tiles that are not
    whole clusters, the last cluster's last blocks past M or N; a persistent grid's clusters
    walking more than one cluster of tiles)."""
    from tinyopt.passes.tile.gemm.contraction_match import match_contraction
    from tinyopt.passes.tile.target import Target

    sms = next((int(w[4:]) for w in knobs.split() if w.startswith("sms=")), 132)
    module = apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")
    found = []
    for kernel in loop.kernels(module):
        plan = kernel.attributes[tile.PLAN]
        if plan.rule.data != "wgmma":  # type: ignore[union-attr]
            continue
        values = plan.values  # type: ignore[union-attr]
        if values["multicast"] == "off":
            continue
        c = match_contraction(kernel)
        assert c is not None, kernel.sym_name.data
        batch, m, n, _ = c.extents
        rows, columns = -(-m // values["bm"]), -(-n // values["bn"])
        shared = values["multicast"]
        sharers = 4 if shared.endswith("4") else 2
        by_b = shared.startswith("b")
        clusters = -(-rows // sharers) * columns if by_b else rows * -(-columns // sharers)
        slots = max(Target(sms=sms).cluster_slots(sharers), 1)
        walks = bool(values["persistent"]) and batch * clusters > slots
        odd = (rows if by_b else columns) % sharers != 0
        found.append((shared, bool(values["persistent"]), odd, walks))
    return found


def plan_paths(text: str, knobs: str) -> set[str]:
    """The new planning paths the plan of `text` under `knobs` takes: "tall" (a 192-row
    block), "tall_persistent", "128x192", "pad" (a staging copy), "wgmma" (any wgmma kernel),
    "splitk" (a split-K partial kernel), "multicast_a" and "multicast_b" (a pair of blocks
    sharing A or B tiles), "poverlap" (FP8's promoted steps overlapped).
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
        if values["bn"] % 64:
            paths.add("ragged")
        if values["multicast"] != "off":
            paths.add(f"multicast_{values['multicast']}")
        if values["poverlap"] == "on":
            paths.add("poverlap")
        if values["swap"] == "on":
            paths.add("swap_persistent" if values["persistent"] else "swap")
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


LAUNCH_TIMEOUT = 300
"""Seconds an emulated launch may run before it is killed and the case fails as a hang (the
emulation itself aborts a cluster whose blocks all wait, or that changes nothing for
`CLUSTER_TIMEOUT` seconds, as a deadlock)."""

CLUSTER_TIMEOUT = "60"
"""`CPU_CUDA_CLUSTER_TIMEOUT` of the fuzz's runs, where it is not set: a cluster's blocks
spinning outside the emulation's waits this long with nothing changed is a deadlock."""


def errors_on_cpu(
    text: str, knobs: str, seed: int, reverse: bool = False
) -> tuple[float, float, float]:
    """The output's relative error ‖out − ref‖ / ‖ref‖ against float64 and its bound (as
    `cpu_wgmma.error_on_cpu`), and its worst element's error relative to the element's
    magnitude plus the output's RMS (`ELEMENT_TOLERANCE`); `reverse` runs each launch's blocks
    last to first."""
    program, module = lower(text, tile_with(knobs))
    graph = graph_function(program)
    inputs, arrays = device_inputs(graph, seed=seed)
    arrays = [a.view(np.uint16) if a.dtype == np.float16 else a for a in arrays]
    (result,) = run_program_on_cpu(module, arrays, timeout=LAUNCH_TIMEOUT, reverse=reverse)
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


def wgmma_kernels(text: str, knobs: str) -> tuple[int, list[str]]:
    """The kernels the wgmma rule takes in the plan of `text` under `knobs`, and the GEMM
    kernels fed by staging copies (`X_pad_a` / `X_pad_b` for GEMM `X`) that it does not."""
    module = apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")
    rules = {
        k.sym_name.data: k.attributes[tile.PLAN].rule.data  # type: ignore[union-attr]
        for k in loop.kernels(module)
    }
    fed = {name.rsplit("_pad_", 1)[0] for name in rules if "_pad_" in name}
    return sum(r == "wgmma" for r in rules.values()), sorted(
        f"{name}: {rules.get(name)}" for name in fed if rules.get(name) != "wgmma"
    )


def unaligned(knobs: str) -> str:
    """`knobs` with `align=off`: no staging, rows off sectors left to the wgmma rule."""
    return " ".join([*(w for w in knobs.split() if not w.startswith("align=")), "align=off"])


def run_case(c: Case, seed: int, reverse: bool = False) -> tuple[str, set[str], str]:
    """("ok" | "refused" | "refused_late" | "failed", the plan's paths, a note). Besides the
    output's errors, a plan with fewer wgmma kernels than under `align=off`, or with staging
    copies feeding a GEMM the wgmma rule does not take, fails: staging only ever moves a GEMM
    onto wgmma."""
    try:
        paths = plan_paths(c.text, c.knobs)
        (wgmma, copied_for_nothing), wgmma_unaligned = wgmma_kernels(c.text, c.knobs), 0
        if "align=off" not in c.knobs.split():
            wgmma_unaligned = wgmma_kernels(c.text, unaligned(c.knobs))[0]
    except VerifyException:
        return "failed", set(), traceback.format_exc()
    except DiagnosticException as e:
        return "refused", set(), str(e).splitlines()[0][:400]
    if wgmma < wgmma_unaligned:
        return "failed", paths, f"{wgmma} wgmma kernels, {wgmma_unaligned} with align=off"
    if copied_for_nothing:
        return "failed", paths, f"staging copies feed GEMMs off wgmma: {copied_for_nothing}"
    try:
        error, bound, worst = errors_on_cpu(c.text, c.knobs, seed, reverse)
    except VerifyException:  # IR the passes made and the verifier rejects: a defect
        return "failed", paths, traceback.format_exc()
    except DiagnosticException as e:  # planned, then refused by `tile` or `to-cuda`
        return "refused_late", paths, str(e).splitlines()[0][:400]
    except subprocess.TimeoutExpired:
        return "failed", paths, f"hang: a launch ran past {LAUNCH_TIMEOUT} s"
    except subprocess.CalledProcessError as e:  # the emulation aborted: its stderr says why
        return "failed", paths, f"the emulated launch failed (exit {e.returncode}): {e}"
    except Exception:  # noqa: BLE001 - every other exception is a failure
        return "failed", paths, traceback.format_exc()
    note = f"error {error:.3g} (bound {bound:.3g}), worst element {worst:.3g}"
    if not (error <= bound and worst <= ELEMENT_TOLERANCE):  # NaN fails too
        return "failed", paths, note
    return "ok", paths, note


def run(
    seed: int,
    count: int,
    verbose: bool = False,
    multicast: bool = False,
    ragged: bool = False,
    tma_store: bool = False,
    swap: bool = False,
) -> tuple[Counter, Counter, list[str]]:
    """Runs `count` cases of `seed` (`multicast_case`'s with `multicast`, `ragged_case`'s with
    `ragged`, `tma_store_case`'s with `tma_store`, `swap_case`'s with `swap`, else `case`'s);
    returns the outcomes, the paths exercised (by the cases that ran) and the failures'
    reports. With `multicast`, the outcomes also count the multicast kernels of the cases that
    ran ("kernels a" ...: `multicast_tally`) and the refusals by reason ("refused: ...")."""
    outcomes: Counter = Counter()
    exercised: Counter = Counter()
    failures = []
    for index in range(count):
        draw = (
            multicast_case
            if multicast
            else ragged_case
            if ragged
            else tma_store_case
            if tma_store
            else swap_case
            if swap
            else case
        )
        c = draw(seed, index)
        start = time.monotonic()
        # Stream-K's blocks wait on flags later blocks set: those run in launch order.
        backwards = ragged or swap or (tma_store and "streamk=tail" not in c.knobs.split())
        outcome, paths, note = run_case(c, seed + index, reverse=backwards)
        outcomes[outcome] += 1
        if multicast and outcome in ("refused", "refused_late"):
            outcomes[f"{outcome}: {refusal_reason(note)}"] += 1
        elif multicast:
            outcomes.update(multicast_tally(c, outcome))
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


def refusal_reason(note: str) -> str:
    """A refusal's diagnostic without its pass, kernel and numbers (each `#`): the reasons it
    gives."""
    reason = re.sub(r"@\w+", "@kernel", note.split(": ", 1)[-1])
    if "; not with " in reason:
        reason = "multicast not with " + reason.split("; not with ", 1)[1]
    return re.sub(r"\d+", "#", reason)[:120]


def multicast_tally(c: Case, outcome: str) -> Counter:
    """The multicast kernels of a case that ran, counted by operand and grid ("kernels b
    persistent"), those of an odd number of rows or columns of tiles ("odd b"), those whose
    persistent pairs walk several pairs of tiles ("walks b"), the cases that ran with none
    ("no multicast": `auto` where the rule does not take it, a refusal the planner falls back
    from), and "kernels failed" for the multicast kernels of failed cases."""
    tally: Counter = Counter()
    plans = multicast_plans(c.text, c.knobs)
    for shared, persistent, odd, walks in plans:
        tally[f"kernels {shared} {'persistent' if persistent else 'one tile'}"] += 1
        tally[f"odd {shared}"] += odd
        tally[f"walks {shared}"] += walks
        tally["kernels failed"] += outcome == "failed"
    if "multicast=auto" in c.knobs.split():
        tally["auto cases"] += 1
        tally["auto cases paired"] += bool(plans)
    if not plans:
        tally["no multicast"] += 1
    return +tally


def tma_store_case(seed: int, index: int) -> Case:
    """The `index`th `--tma-store` case of `seed`: a program of `case`'s (TMA-addressable rows)
    under `mma=wgmma store=tma` with a block shape, a persistent grid, ring depth, no producer
    warpgroup, stream-K or a multicast pair drawn among the knobs."""
    rng = random.Random(f"tma store {seed} {index}")
    name, text = _budgeted_program(rng, True)
    knobs = [f"sms={rng.choice(SMS)}", "mma=wgmma", "store=tma"]
    bm = rng.choice((0, 64, 128, 192))
    if bm:
        knobs.append(f"bm={bm}")
    bn = rng.choice((0, 0, 64, 128, 192, 256) if bm != 192 else (0, 64, 128, 192))
    if bn:
        knobs.append(f"bn={bn}")
    extra = rng.random()
    if extra < 0.3:
        knobs.append("persistent=1")
    elif extra < 0.4:
        knobs.append("ws=0")
    elif extra < 0.5:
        knobs.append("streamk=tail")
    elif extra < 0.6:
        knobs.append(f"multicast={rng.choice('ab')}")
    if rng.random() < 0.2:
        knobs.append(f"stages={rng.randint(2, 4)}")
    return Case(name, text, " ".join(knobs))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=60, help="cases")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case")
    parser.add_argument(
        "--multicast",
        action="store_true",
        help="multicast=a|b|auto cases (multicast_case) with their kernels counted",
    )
    parser.add_argument(
        "--ragged",
        action="store_true",
        help="mma=wgmma cases with a block width off 64-column chunks (ragged_case)",
    )
    parser.add_argument(
        "--tma-store",
        action="store_true",
        help="mma=wgmma store=tma cases (tma_store_case), blocks run last to first",
    )
    parser.add_argument(
        "--swap",
        action="store_true",
        help="swap=on cases (swap_case), blocks run last to first",
    )
    parser.add_argument(
        "--no-alignment-check",
        action="store_true",
        help="let misaligned vector accesses pass (as x86 does; the GPU faults)",
    )
    args = parser.parse_args()
    if not args.no_alignment_check:
        import tempfile

        check_alignment(Path(tempfile.gettempdir()) / "wgmma_cpu_fuzz")
    os.environ.setdefault("CPU_CUDA_CLUSTER_TIMEOUT", CLUSTER_TIMEOUT)
    start = time.monotonic()
    outcomes, exercised, failures = run(
        args.seed, args.n, args.verbose, args.multicast, args.ragged, args.tma_store, args.swap
    )
    took = time.monotonic() - start
    if args.multicast:
        print(f"seed {args.seed}: {args.n} cases in {took:.0f}s")
        for key, value in sorted(outcomes.items()):
            print(f"  {key}: {value}")
    else:
        print(f"seed {args.seed}: {args.n} cases in {took:.0f}s: {dict(outcomes)}")
    print(f"paths: {dict(sorted(exercised.items()))}")
    for report in failures:
        print(f"\nFAILED {report}")
    if args.multicast or args.ragged or args.tma_store or args.swap:
        return 1 if failures else 0
    ran = outcomes["ok"] + outcomes["failed"] + outcomes["refused_late"]
    if ran and exercised["tall_or_pad"] < ran // 5:
        print(f"too few cases took a 192-row block or a staging copy: {exercised['tall_or_pad']}")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
