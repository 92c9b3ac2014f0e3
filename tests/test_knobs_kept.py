"""Knobs set by hand are planned as set or refused by name, never overridden without a word
(stages under a multicast pair, persistent=0 under streamk=tail, and store and group under the
swapped 3xTF32 plan had been): random settings of the knobs of the wgmma (bf16, swapped
bf16 and FP8), 3xTF32, mma.sync and wgmma attention rules, each plan's value of every knob
set compared with the setting."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field

import pytest
from attention_programs import attention
from programs import batched_matmul, block_scaled_matmul, matmul_plain, scaled_matmul
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.compiler import apply_pipeline, parse


@dataclass(frozen=True)
class Rule:
    pipeline: str
    """The passes up to `plan`, with `{}` for the knobs."""
    plan: str
    """The plan's rule name."""
    settings: int
    """Random settings a program."""
    programs: list[str]
    choices: dict[str, list]
    fields: dict[str, str] = field(default_factory=dict)
    """The plan's name of a knob where it has another."""
    flags: bool = False
    """Whether the plan writes an on/off knob as 1/0."""


WGMMA = {
    "bm": [64, 128, 192],
    "bn": [64, 128, 144, 192, 208, 256],
    "stages": [2, 3, 4, 5, 6, 8],
    "multicast": ["off", "a", "b", "a4", "b4"],
    "persistent": [0, 1],
    "store": ["direct", "smem", "tma"],
    "streamk": ["off", "tail"],
    "group": [1, 8, 16],
    "evict": ["off", "a", "b"],
    "ws": [0, 1],
    "l2promo": [0, 128],
}
FP8 = {
    "bn": [64, 128, 192, 256],
    "stages": [2, 3, 4, 6],
    "promote": ["on", "off"],
    "poverlap": ["on", "off"],
    "pturns": ["on", "off"],
    "pscales": ["step", "pair"],
    "persistent": [0, 1],
    "store": ["smem", "tma"],
    "streamk": ["off", "tail"],
}
BF16 = [
    matmul_plain(1000, 1000, 1000, "bf16"),
    matmul_plain(2048, 1024, 4392, "bf16", "nk"),
    matmul_plain(100, 2048, 4096, "bf16", "nk"),
    batched_matmul(3, 1000, 1000, 1000, "bf16"),
]
RULES = {
    "wgmma": Rule("fuse,plan{{mma=wgmma {}}}", "wgmma", 12, BF16, WGMMA),
    "wgmma_swap": Rule("fuse,plan{{mma=wgmma swap=on {}}}", "wgmma", 12, BF16, WGMMA),
    "wgmma_fp8": Rule(
        "fuse,plan{{mma=wgmma {}}}",
        "wgmma",
        12,
        [scaled_matmul(1000, 2048, 4096), block_scaled_matmul(1000, 2048, 4096)],
        FP8,
    ),
    "wgmma_3xtf32": Rule(
        "fuse,plan{{mma=3xtf32 {}}}",
        "wgmma_3xtf32",
        12,
        [matmul_plain(97, 4096, 1024, "f32", "nk"), matmul_plain(1000, 1000, 1000, "f32")],
        {
            "bm": [64, 128],
            "bn": [64, 128],
            "stages": [2, 3, 4],
            "store": ["direct", "smem"],
            "group": [1, 8, 16],
            "swap": ["on", "off"],
        },
    ),
    "mma_sync": Rule(
        "fuse,plan{{mma=sync {}}}",
        "mma_sync",
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
    "attention_wgmma": Rule(
        "decompose,fuse,flash-attention,plan{{attn=wgmma {}}}",
        "attention_wgmma",
        12,
        [attention(2, 8, 1024, 128, "bf16", True), attention(3, 4, 1000, 96, "bf16", False)],
        {
            "akeys": [64, 128, 192],
            "afma": [1, 2, 4],
            "aconsumers": [2, 3],
            "aqslots": [1, 2],
            "aoverlap": ["on", "off"],
            "apingpong": ["on", "off"],
            "atail": ["on", "off"],
            "persistent": [0, 1],
        },
        {
            "akeys": "keys",
            "afma": "fma",
            "aconsumers": "consumers",
            "aqslots": "q_slots",
            "aoverlap": "overlap",
            "apingpong": "pingpong",
            "atail": "tail",
        },
        flags=True,
    ),
}
PLANNED = 8
"""Settings of each rule that must plan (the rest are refused)."""
FLAGS = {"on": "1", "off": "0"}


@pytest.mark.parametrize("name", sorted(RULES))
def test_hand_set_knobs_are_planned_as_set_or_refused(name: str) -> None:
    rule = RULES[name]
    rng = random.Random(49)
    planned = 0
    for text in rule.programs:
        for _ in range(rule.settings):
            knobs = {
                k: rng.choice(values) for k, values in rule.choices.items() if rng.random() < 0.4
            }
            setting = " ".join(f"{k}={v}" for k, v in knobs.items())
            try:
                module = str(apply_pipeline(parse(text), rule.pipeline.format(setting)))
            except DiagnosticException:
                continue
            plans = re.findall(rf"#tile\.plan<{rule.plan}, [^>]*>", module)
            assert plans, setting
            planned += 1
            for plan in plans:
                for key, value in knobs.items():
                    found = re.search(rf"\b{rule.fields.get(key, key)} = \"?(\w+)\"?", plan)
                    assert found is not None, (key, plan)
                    planned_as = FLAGS.get(str(value), str(value)) if rule.flags else str(value)
                    assert found.group(1) == planned_as, (setting, plan)
    assert planned >= PLANNED, planned
