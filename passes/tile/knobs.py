"""The schedule knobs of the `tile` pass: names, domains, and the heuristic defaults."""

from __future__ import annotations

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
    mma: str = "none"
    minblocks: int = AUTO
    splitk: int = 1
    ws: int = 1

    def describe(self) -> str:
        """Returns the knobs that differ from their defaults, as pass options."""
        default = Knobs()
        return " ".join(
            f"{f.name}={getattr(self, f.name)}"
            for f in fields(Knobs)
            if getattr(default, f.name) != getattr(self, f.name)
        )


MMA = ("none", "sync", "wgmma")
"""`none`: FMA on CUDA cores; `sync`: tensor cores through mma.sync with ldmatrix (f16/bf16);
`wgmma`: Hopper warpgroup MMA fed by TMA through a multi-stage mbarrier ring (f16/bf16)."""

SCHEDULES = ("auto", "sequential")
"""`auto` picks the best rule that matches a kernel; `sequential` forces one thread per point."""


def check(knobs: Knobs) -> None:
    """Raises ValueError naming the first knob outside its domain."""
    if knobs.schedule not in SCHEDULES:
        raise ValueError(f"tile: schedule must be one of {SCHEDULES}, got '{knobs.schedule}'")
    powers = {
        "threads": (32, 1024),
        "vec": (1, 16),
        "rows": (1, 32),
        "bm": (16, 256),
        "bn": (16, 256),
        "bk": (4, 64),
        "tm": (1, 16),
        "tn": (1, 16),
    }
    for name, (low, high) in powers.items():
        value = getattr(knobs, name)
        if value != AUTO and (value < low or value > high or value & (value - 1)):
            raise ValueError(
                f"tile: {name} must be a power of two in [{low}, {high}] (or 0 for auto), "
                f"got {value}"
            )
    if knobs.mma not in MMA:
        raise ValueError(f"tile: mma must be one of {MMA}, got '{knobs.mma}'")
    if knobs.mma == "wgmma":
        if knobs.stages != AUTO and not 2 <= knobs.stages <= 6:
            raise ValueError(
                f"tile: stages must be 0 (auto) or in [2, 6] with mma=wgmma, got {knobs.stages}"
            )
    elif knobs.stages not in (AUTO, 1, 2):
        raise ValueError(f"tile: stages must be 0 (auto), 1 or 2, got {knobs.stages}")
    if knobs.ws not in (0, 1):
        raise ValueError(f"tile: ws must be 0 or 1, got {knobs.ws}")
    if knobs.split not in (AUTO, 1, 2):
        raise ValueError(f"tile: split must be 0 (auto), 1 or 2, got {knobs.split}")
    if knobs.group < 0 or knobs.group & (knobs.group - 1):
        raise ValueError(f"tile: group must be 0 (off) or a power of two, got {knobs.group}")
    if knobs.splitk < 1 or knobs.splitk > 64 or knobs.splitk & (knobs.splitk - 1):
        raise ValueError(f"tile: splitk must be a power of two in [1, 64], got {knobs.splitk}")
    if not 0 <= knobs.minblocks <= 32:
        raise ValueError(f"tile: minblocks must be in [0, 32] (0 for auto), got {knobs.minblocks}")
    if knobs.cache not in (0, 1):
        raise ValueError(f"tile: cache must be 0 or 1, got {knobs.cache}")
    if knobs.pad < 0 or knobs.pad % 4:
        raise ValueError(f"tile: pad must be a non-negative multiple of 4, got {knobs.pad}")
