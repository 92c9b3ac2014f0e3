"""The schedule knobs of the `tile` pass: names, domains, and the heuristic defaults."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields

AUTO = 0
"""A knob left at 0 is chosen by the heuristic for each kernel."""


@dataclass(frozen=True)
class Knobs:
    """Schedule choices; see docs/knobs.md for each knob's meaning and domain."""

    schedule: str = "auto"
    threads: int = AUTO
    vec: int = AUTO
    rows: int = AUTO
    cache: int = 1
    bm: int = AUTO
    bn: int = AUTO
    bk: int = AUTO
    tm: int = AUTO
    tn: int = AUTO
    pad: int = 4
    stages: int = AUTO
    split: int = AUTO
    group: int = AUTO
    mma: str = "auto"
    minblocks: int = AUTO
    splitk: int = 1
    splitk_mode: str = "auto"
    ws: int = 1
    attn: str = "auto"
    arows: int = AUTO
    awarps: int = AUTO
    copy: str = "auto"
    swizzle: int = 0
    store: str = "auto"
    persistent: int = 0
    fastmath: str = "auto"
    pairswap: int = 1
    dual: str = "auto"
    streamk: str = "auto"
    interleave: str = "auto"
    prefetch: str = "auto"

    def describe(self) -> str:
        """Returns the knobs that differ from their defaults, as pass options."""
        default = Knobs()
        return " ".join(
            f"{f.name}={getattr(self, f.name)}"
            for f in fields(Knobs)
            if getattr(default, f.name) != getattr(self, f.name)
        )


MMA = ("auto", "none", "sync", "wgmma", "tf32")
"""`auto`: the first of `wgmma`, `sync` whose limits the kernel (and the other knobs) meet, else
`none`; `none`: FMA on CUDA cores; `sync`: tensor cores through mma.sync with ldmatrix (f16/bf16);
`wgmma`: Hopper warpgroup MMA fed by TMA through a multi-stage mbarrier ring (f16/bf16);
`tf32`: f32 operands rounded to TF32 on tensor cores (mma.sync m16n8k8): opt-in only, `auto`
never takes it."""

COPIES = ("auto", "ld", "cp_async", "tma")
"""How the FP32 (SIMT) contraction fills shared memory: `ld` loads into registers (evaluating a
fused prologue) and stores; `cp_async` copies global → shared asynchronously (a `stages` ring);
`tma` copies whole tiles with TMA into an mbarrier ring (a producer warp with `ws=1`); `auto`:
`tma` with its own tile where the grid is small and the tile knobs are left to the heuristic
(`contraction.resolve_copy`), else `ld`."""

ATTN = ("auto", "sync", "wgmma", "none")
"""How a flash-attention kernel (the `flash-attention` rewrite) with f16/bf16 operands runs:
`wgmma`: the TMA + wgmma schedule of `passes/tile/attention/wgmma.py` (Hopper); `sync`: the
`mma.sync` schedule of `passes/tile/attention/mma_sync.py`; `auto`: wgmma where its limits
allow, else sync; `none`: the generic rules."""

STORES = ("auto", "direct", "smem")
"""How the wgmma GEMM's epilogue reaches its accumulators: `direct` runs it on the wgmma
fragments (4-byte accesses per lane); `smem` stages them through shared memory first, so each
thread runs it on 8 consecutive columns (16-byte loads and stores of bf16/f16); `auto`: `smem`
where the staging tiles fit in shared memory beside the ring, else `direct`."""

FASTMATH = ("auto", "off", "on")
"""Whether a wgmma GEMM's epilogue computes `exp` and `/` with CUDA's approximate `__expf` and
`__fdividef` (`fastmath<afn>`): `on`, `off`, or `auto`: where every value the epilogue stores
is f16/bf16, whose rounding (2^-9 or 2^-12) is far coarser than their few-ulp error."""

DUALS = ("auto", "on", "off")
"""How a paired contraction (two K loops over one A operand, `passes/tile/gemm/paired.py`) runs:
`on`: one dual GEMM (the wgmma rule: both products from each A tile, the epilogue combining
the two accumulators in registers), else a diagnostic saying why not; `off`: split into two
kernels, the second product going through an f32 workspace; `auto`: `on` where the wgmma rule
takes the kernel, else `off`."""

INTERLEAVE = ("auto", "on", "off")
"""How the register-staged double-buffered K loop (`copy=ld`, `stages=2`) copies the next K
step: `off`: both sides' global loads at the step's start, stored to shared memory after the
step's FMAs; `on`: A's at the start, stored after the first half of the step's FMAs, then B's,
stored after the second half (half the registers in flight); `auto`: `on` for an unbatched
kernel with one block per tile whose tiles divide M, N and K and for a kernel that prefetches
the next tile (`prefetch`), `off` elsewhere (`contraction.interleaves`)."""

PREFETCH = ("auto", "on", "off")
"""Whether the register-staged K loop (`copy=ld`, `stages=2`, one block per tile) asks L2, at
the start of its last iteration, for the first two K steps of the tile the block launched one
wave later will run, so that block's first copies hit L2 instead of DRAM: `on`, `off`, or
`auto`: `on` for batched kernels of more than one wave of blocks
(`passes/tile/gemm/next_tile_prefetch.py`)."""

STREAMK = ("auto", "on", "tail", "off")
"""Whether the FP32 contraction (`copy=ld`, `stages=2`) shares its K steps evenly among one
wave of blocks (`passes/tile/gemm/stream_k.py`): `on`, every tile's; `tail`, only those of the
tiles past the last whole wave, the others one block each; `off`; or `auto`: `on` where the
tiles make only a few waves of blocks, the last of them partly idle, and each tile has enough
K steps to pay for the partial-sum handoffs (`stream_k.AUTO_WAVES`, `AUTO_LOSS`,
`AUTO_STEPS`)."""

SPLITK_MODES = ("auto", "atomic", "twopass")
"""How split-K sums its chunks: `atomic` adds them into the zeroed output (red.global.add);
`twopass` writes a workspace that a fold kernel sums; `auto`: atomic where the epilogue allows."""

SCHEDULES = ("auto", "sequential")
"""`auto` picks the best rule that matches a kernel; `sequential` forces one thread per point."""


@dataclass(frozen=True)
class Domain:
    """The values a knob accepts, in words for diagnostics, and the finite set the tuner tries.

    `values` is every value the tuner may try; `accepts` (default: membership in `values`)
    may admit more, e.g. any multiple of 4 for `pad`.
    """

    words: str
    values: tuple[int | str, ...]
    accepts: Callable[[int | str], bool] | None = None

    def admits(self, value: int | str) -> bool:
        """Returns whether a pass option may set the knob to `value`."""
        return self.accepts(value) if self.accepts else value in self.values


def _is_power_of_two(value: int | str) -> bool:
    return isinstance(value, int) and value > 0 and not value & (value - 1)


def powers(low: int, high: int, auto: bool = True) -> Domain:
    """Powers of two in [low, high], and 0 (auto) unless `auto` is false."""
    values = tuple(1 << e for e in range(low.bit_length() - 1, high.bit_length()))
    words = f"a power of two in [{low}, {high}]" + (" (or 0 for auto)" if auto else "")
    return Domain(words, (AUTO, *values) if auto else values)


def one_of(*values: int | str, words: str | None = None) -> Domain:
    """Exactly `values`; `words` defaults to "one of (...)"."""
    return Domain(words or f"one of {values}", values)


@dataclass(frozen=True)
class Knob:
    """One row of the knob table: a name, its domain, and its default (the `Knobs` field)."""

    name: str
    domain: Domain
    when: tuple[tuple[str, int | str, Domain], ...] = ()
    """(other knob, value, domain): the domain that applies while the other knob has that value."""

    @property
    def default(self) -> int | str:
        """The value the knob has when no pass option sets it."""
        return getattr(Knobs(), self.name)

    def domain_in(self, knobs: Knobs) -> Domain:
        """Returns the knob's domain given the other knobs' values."""
        for other, value, domain in self.when:
            if getattr(knobs, other) == value:
                return domain
        return self.domain


KNOBS: tuple[Knob, ...] = (
    Knob("schedule", one_of(*SCHEDULES)),
    Knob("threads", powers(32, 1024)),
    Knob("vec", powers(1, 16)),
    Knob("rows", powers(1, 32)),
    Knob("bm", powers(16, 256)),
    Knob("bn", powers(16, 256)),
    Knob("bk", powers(4, 64)),
    Knob("tm", powers(1, 16)),
    Knob("tn", powers(1, 16)),
    Knob("mma", one_of(*MMA)),
    Knob("copy", one_of(*COPIES)),
    Knob(
        "stages",
        one_of(AUTO, 1, 2, words="0 (auto), 1 or 2"),
        when=(
            (
                "mma",
                "wgmma",
                one_of(AUTO, 2, 3, 4, 5, 6, words="0 (auto) or in [2, 6] with mma=wgmma"),
            ),
            (
                "copy",
                "cp_async",
                one_of(AUTO, 2, 3, 4, words="0 (auto) or in [2, 4] with copy=cp_async"),
            ),
            (
                "copy",
                "tma",
                one_of(AUTO, 2, 3, 4, 5, 6, words="0 (auto) or in [2, 6] with copy=tma"),
            ),
        ),
    ),
    Knob("ws", one_of(0, 1, words="0 or 1")),
    Knob("attn", one_of(*ATTN)),
    Knob("arows", one_of(AUTO, 16, 32, words="0 (auto: 32), 16 or 32")),
    Knob("awarps", one_of(AUTO, 4, 8, words="0 (auto: 4), 4 or 8")),
    Knob("split", one_of(AUTO, 1, 2, words="0 (auto), 1 or 2")),
    Knob("pairswap", one_of(0, 1, words="0 or 1")),
    Knob(
        "group",
        Domain(
            "0 (off) or a power of two", (AUTO, 4, 8, 16), lambda v: v == 0 or _is_power_of_two(v)
        ),
    ),
    Knob("splitk", powers(1, 64, auto=False)),
    Knob("splitk_mode", one_of(*SPLITK_MODES)),
    Knob(
        "minblocks",
        Domain(
            "in [0, 32] (0 for auto)",
            (AUTO, 1, 2, 4),
            lambda v: isinstance(v, int) and 0 <= v <= 32,
        ),
    ),
    Knob("cache", one_of(0, 1, words="0 or 1")),
    Knob("swizzle", one_of(0, 1, words="0 or 1")),
    Knob("store", one_of(*STORES)),
    Knob("persistent", one_of(0, 1, words="0 or 1")),
    Knob("fastmath", one_of(*FASTMATH)),
    Knob("dual", one_of(*DUALS)),
    Knob("streamk", one_of(*STREAMK)),
    Knob("interleave", one_of(*INTERLEAVE)),
    Knob("prefetch", one_of(*PREFETCH)),
    Knob(
        "pad",
        Domain(
            "a non-negative multiple of 4",
            (0, 4, 8),
            lambda v: isinstance(v, int) and v >= 0 and v % 4 == 0,
        ),
    ),
)
"""Every knob of the `tile` pass, checked in this order. Adding a knob: a `Knobs` field and a row
here (and a line in docs/knobs.md); each rule's `reads` (passes/tile/rule.py) says whether it
reads it."""

KNOB = {k.name: k for k in KNOBS}


def check(knobs: Knobs) -> None:
    """Raises ValueError naming the first knob outside its domain."""
    for knob in KNOBS:
        value = getattr(knobs, knob.name)
        domain = knob.domain_in(knobs)
        if not domain.admits(value):
            raise ValueError(f"tile: {knob.name} must be {domain.words}, got {value!r}")


assert {k.name for k in KNOBS} == {f.name for f in fields(Knobs)}, "every Knobs field needs a row"
