"""Knobs set by hand are planned as set or refused by name, never overridden without a word
(stages under a multicast pair, and persistent=0 under streamk=tail, had been): random
settings of the wgmma and mma.sync rules' knobs on bf16 GEMMs of several forms, each plan's
value of every knob set compared with the setting."""

from __future__ import annotations

import random
import re

import pytest
from programs import batched_matmul, matmul_plain
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.compiler import apply_pipeline, parse

RULES: dict[str, tuple[int, list[str], dict[str, list]]] = {
    "wgmma": (
        12,
        [
            matmul_plain(1000, 1000, 1000, "bf16"),
            matmul_plain(2048, 1024, 4392, "bf16", "nk"),
            matmul_plain(100, 2048, 4096, "bf16", "nk"),
            batched_matmul(3, 1000, 1000, 1000, "bf16"),
        ],
        {
            "bm": [64, 128, 192],
            "bn": [64, 128, 144, 192, 208, 256],
            "stages": [2, 3, 4, 5, 6, 8],
            "multicast": ["off", "a", "b"],
            "persistent": [0, 1],
            "store": ["direct", "smem", "tma"],
            "streamk": ["off", "tail"],
            "group": [1, 8, 16],
            "evict": ["off", "a", "b"],
            "ws": [0, 1],
            "l2promo": [0, 128],
        },
    ),
    "mma_sync": (
        30,
        [matmul_plain(790, 72, 190, "bf16", "nk"), matmul_plain(256, 200, 1001, "bf16")],
        {
            "bm": [16, 32, 64, 128],
            "bn": [32, 64, 128],
            "bk": [16, 32, 64],
            "stages": [1, 2, 3, 4, 8],
            "wm": [16, 32],
            "wn": [16, 32],
            "vec": [2, 4, 8],
            "store": ["direct", "smem"],
        },
    ),
}
PLANNED = 10
"""Settings of each rule that must plan (the rest are refused): (random settings a program,
programs, knobs and their values) for each rule."""


@pytest.mark.parametrize("rule", sorted(RULES))
def test_hand_set_knobs_are_planned_as_set_or_refused(rule: str) -> None:
    settings, programs, choices = RULES[rule]
    rng = random.Random(49)
    planned = 0
    for text in programs:
        for _ in range(settings):
            knobs = {
                key: rng.choice(values) for key, values in choices.items() if rng.random() < 0.4
            }
            mma = "wgmma" if rule == "wgmma" else "sync"
            setting = " ".join([f"mma={mma}", *(f"{k}={v}" for k, v in knobs.items())])
            try:
                module = str(apply_pipeline(parse(text), f"fuse,plan{{{setting}}}"))
            except DiagnosticException:
                continue
            plans = re.findall(rf"#tile\.plan<{rule}, [^>]*>", module)
            assert plans, setting
            planned += 1
            for plan in plans:
                for key, value in knobs.items():
                    found = re.search(rf"\b{key} = \"?(\w+)\"?", plan)
                    assert found is not None, (key, plan)
                    assert found.group(1) == str(value), (setting, plan)
    assert planned >= PLANNED, planned
