"""The schedule knobs of the `tile` pass: names, domains, and the heuristic defaults.

What each knob and each of its values means is in docs/knobs.md.
"""

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
    cols: int = AUTO
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
    splitk: int = 0
    splitk_mode: str = "auto"
    ws: int = 1
    attn: str = "auto"
    arows: int = AUTO
    awarps: int = AUTO
    asplits: int = AUTO
    akwarps: int = AUTO
    akwarps_sync: str = "auto"
    aslots: int = AUTO
    abalance: str = "auto"
    aswizzle: str = "auto"
    aoverlap: str = "auto"
    apingpong: str = "auto"
    akeys: int = AUTO
    afma: int = AUTO
    aconsumers: int = AUTO
    atail: str = "auto"
    aqslots: int = AUTO
    kwarps: int = AUTO
    copy: str = "auto"
    swizzle: int = 0
    store: str = "auto"
    persistent: int | str = "auto"
    fastmath: str = "auto"
    promote: str = "auto"
    poverlap: str = "auto"
    pturns: str = "auto"
    pscales: str = "auto"
    swap: str = "auto"
    pairswap: int = 1
    dual: str = "auto"
    streamk: str = "auto"
    evict: str = "auto"
    interleave: str = "auto"
    prefetch: str = "auto"
    skinny: str = "auto"
    skinny_mma: str = "auto"
    align: str = "auto"
    multicast: str = "auto"
    l2promo: int | str = "auto"

    def describe(self) -> str:
        """Returns the knobs that differ from their defaults, as pass options."""
        default = Knobs()
        return " ".join(
            f"{f.name}={getattr(self, f.name)}"
            for f in fields(Knobs)
            if getattr(default, f.name) != getattr(self, f.name)
        )


@dataclass(frozen=True)
class Domain:
    """The values a knob accepts, in words for diagnostics, and the finite set the tuner tries;
    `accepts` (default: membership in `values`) may admit more (any multiple of 4 for `pad`)."""

    words: str
    values: tuple[int | str, ...]
    accepts: Callable[[int | str], bool] | None = None

    def admits(self, value: int | str) -> bool:
        """Returns whether a pass option may set the knob to `value`."""
        return self.accepts(value) if self.accepts else value in self.values


def powers(low: int, high: int, auto: bool = True) -> Domain:
    """Powers of two in [low, high], and 0 (auto) unless `auto` is false."""
    values = tuple(1 << e for e in range(low.bit_length() - 1, high.bit_length()))
    words = f"a power of two in [{low}, {high}]" + (" (or 0 for auto)" if auto else "")
    return Domain(words, (AUTO, *values) if auto else values)


def one_of(*values: int | str, words: str | None = None) -> Domain:
    """Exactly `values`; `words` defaults to "one of (...)"."""
    return Domain(words or f"one of {values}", values)


WGMMA_DEEPEST_STAGES = 16
"""The deepest ring `stages` takes with `mma=wgmma` (where shared memory holds it)."""


def _ring(most: int, setting: str) -> Domain:
    """The `stages` of a ring: 0 (auto) or 2 to `most`, while `setting` holds."""
    return one_of(AUTO, *range(2, most + 1), words=f"0 (auto) or in [2, {most}] with {setting}")


WGMMA_BLOCK_SIDE = Domain(
    "a power of two in [16, 256] or 192 with mma=wgmma (or 0 for auto)",
    (*powers(16, 256).values, 192),
)
"""`bm` under `mma=wgmma`: 192 too (three consumer warpgroups)."""

WGMMA_BLOCK_WIDTH = Domain(
    "a power of two in [16, 256] or a multiple of 16 in [64, 256] with mma=wgmma (or 0 for auto)",
    WGMMA_BLOCK_SIDE.values,
    lambda v: (
        v in WGMMA_BLOCK_SIDE.values or (isinstance(v, int) and v % 16 == 0 and 64 <= v <= 256)
    ),
)
"""`bn` under `mma=wgmma`: any multiple of 16 from 64 to 256 columns (a wgmma's N); the tuner
tries the powers of two and 192."""


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
    Knob("schedule", one_of("auto", "sequential")),
    Knob("threads", powers(32, 1024)),
    Knob("vec", powers(1, 16)),
    Knob("rows", powers(1, 32)),
    Knob("cols", powers(1, 8)),
    Knob("bm", powers(16, 256), when=(("mma", "wgmma", WGMMA_BLOCK_SIDE),)),
    Knob("bn", powers(16, 256), when=(("mma", "wgmma", WGMMA_BLOCK_WIDTH),)),
    Knob("bk", powers(4, 64)),
    Knob("tm", powers(1, 16)),
    Knob("tn", powers(1, 16)),
    Knob("mma", one_of("auto", "none", "sync", "wgmma", "tf32", "3xtf32")),
    Knob("copy", one_of("auto", "ld", "cp_async", "tma")),
    Knob(
        "stages",
        one_of(AUTO, 1, 2, words="0 (auto), 1 or 2"),
        when=(
            ("mma", "wgmma", _ring(WGMMA_DEEPEST_STAGES, "mma=wgmma")),
            (
                "mma",
                "sync",
                one_of(*range(0, 9), words="0 (auto), 1 or in [2, 8] with mma=sync"),
            ),
            ("mma", "3xtf32", _ring(4, "mma=3xtf32")),
            ("copy", "cp_async", _ring(4, "copy=cp_async")),
            ("copy", "tma", _ring(6, "copy=tma")),
        ),
    ),
    Knob("ws", one_of(0, 1, words="0 or 1")),
    Knob("attn", one_of("auto", "decode", "sync", "wgmma", "simt", "none")),
    Knob("arows", one_of(AUTO, 16, 32, words="0 (auto: 32), 16 or 32")),
    Knob("awarps", one_of(AUTO, 4, 8, words="0 (auto: 4), 4 or 8")),
    Knob(
        "asplits",
        Domain(
            "in [0, 256] (0 for auto)",
            (AUTO, 1, 4, 16, 64),
            lambda v: isinstance(v, int) and 0 <= v <= 256,
        ),
    ),
    Knob("akwarps", powers(1, 8)),
    Knob("akwarps_sync", one_of("auto", "block", "warp")),
    Knob("aslots", one_of(AUTO, 2, 3, 4, words="0 (auto: 2), 2, 3 or 4")),
    Knob("abalance", one_of("auto", "on", "off")),
    Knob("aswizzle", one_of("auto", "on", "off")),
    Knob("aoverlap", one_of("auto", "on", "off")),
    Knob("apingpong", one_of("auto", "on", "off")),
    Knob("akeys", one_of(AUTO, 64, 128, 192, words="0 (auto), 64, 128 or 192")),
    Knob("afma", one_of(AUTO, 1, 2, 3, 4, words="0 (auto: none), 1, 2, 3 or 4")),
    Knob("aconsumers", one_of(AUTO, 2, 3, words="0 (auto: 2), 2 or 3")),
    Knob("atail", one_of("auto", "on", "off")),
    Knob("aqslots", one_of(AUTO, 1, 2, words="0 (auto), 1 or 2")),
    Knob("kwarps", powers(1, 32)),
    Knob("split", one_of(AUTO, 1, 2, words="0 (auto), 1 or 2")),
    Knob("pairswap", one_of(0, 1, words="0 or 1")),
    Knob(
        "group",
        Domain(
            "0 (off) or a power of two",
            (AUTO, 4, 8, 16),
            lambda v: v == 0 or (isinstance(v, int) and v > 0 and not v & (v - 1)),
        ),
    ),
    Knob("splitk", powers(1, 64)),
    Knob("splitk_mode", one_of("auto", "atomic", "twopass", "cluster")),
    Knob(
        "minblocks",
        Domain(
            "in [0, 32] (0 for auto)",
            (AUTO, 1, 2, 4),
            lambda v: isinstance(v, int) and 0 <= v <= 32,
        ),
    ),
    Knob("cache", one_of(0, 1, 2, words="0, 1 or 2")),
    Knob("swizzle", one_of(0, 1, words="0 or 1")),
    Knob("store", one_of("auto", "direct", "smem", "tma")),
    Knob("persistent", one_of("auto", 0, 1, words="auto, 0 or 1")),
    Knob("fastmath", one_of("auto", "off", "on")),
    Knob("promote", one_of("auto", "on", "off")),
    Knob("poverlap", one_of("auto", "on", "off")),
    Knob("pturns", one_of("auto", "on", "off")),
    Knob("pscales", one_of("auto", "step", "pair")),
    Knob("swap", one_of("auto", "on", "off")),
    Knob("dual", one_of("auto", "on", "off")),
    Knob("streamk", one_of("auto", "on", "tail", "off")),
    Knob("evict", one_of("auto", "off", "once", "a", "b", "ab")),
    Knob("interleave", one_of("auto", "on", "off")),
    Knob("prefetch", one_of("auto", "on", "off")),
    Knob("skinny", one_of("auto", "on", "off")),
    Knob("skinny_mma", one_of("auto", "on", "off")),
    Knob("align", one_of("auto", "on", "off")),
    Knob("multicast", one_of("auto", "off", "a", "b", "a4", "b4")),
    Knob("l2promo", one_of("auto", 0, 64, 128, 256, words="auto, 0 (none), 64, 128 or 256")),
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
    """Raises ValueError naming the first knob outside its domain, and the other knobs'
    settings under which the value would be taken (`stages=4` with `mma=wgmma`, ...)."""
    for knob in KNOBS:
        value = getattr(knobs, knob.name)
        domain = knob.domain_in(knobs)
        if not domain.admits(value):
            settings = [f"{o}={v}" for o, v, d in knob.when if d is not domain and d.admits(value)]
            hint = f" (taken with {' or '.join(settings)})" if settings else ""
            raise ValueError(f"tile: {knob.name} must be {domain.words}, got {value!r}{hint}")


assert {k.name for k in KNOBS} == {f.name for f in fields(Knobs)}, "every Knobs field needs a row"
