"""The wgmma rule's deeper rings (`wgmma_plan.deepened`): where one row of blocks covers M and
each SM runs one block, the ring takes as many slots as shared memory holds and the K steps
need. Run on the CPU (tests/cpu_wgmma.py) against float64: a ring of 13 slots that wraps over
32 K steps, and one on persistent blocks whose second tile carries the ring's slots and phases
on; and where the rule keeps 6 (two rows of blocks; fewer K steps than slots)."""

from __future__ import annotations

import pytest
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu
from programs import matmul_plain

from tinyopt.compiler import apply_pipeline, parse
from tinyopt.dialects import loop, tile


def _stages(text: str, knobs: str = "") -> list[tuple[int, int]]:
    """(stages, persistent) of each kernel the plan (default, or `knobs`) puts on wgmma."""
    out = []
    for kernel in loop.kernels(apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")):
        plan = str(kernel.attributes[tile.PLAN])
        if plan.startswith("#tile.plan<wgmma,"):
            words = dict(w.split(" = ") for w in plan.split("<wgmma, ")[1].rstrip(">").split(", "))
            out.append((int(words["stages"]), int(words["persistent"])))
    return out


RINGS = [
    # 2 blocks of 64×64, 32 K steps, unsplit (by default K is split over a cluster of 8): 13
    # slots (64×64 slots of 16 KiB and the staging tile).
    ("one_row_64x128x2048_bias", matmul_plain(64, 128, 2048, "bf16", "nk"), "splitk=1", [(13, 0)]),
    # 140 tiles on 132 persistent blocks, 14 K steps: 13 slots, wrapping within each tile.
    (
        "persistent_48x8960x896",
        matmul_plain(48, 8960, 896, "bf16", "nk", relu=False),
        "",
        [(13, 1)],
    ),
]


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    ("text", "knobs", "rings"), [c[1:] for c in RINGS], ids=[c[0] for c in RINGS]
)
def test_deep_ring_matches_float64_on_cpu(
    text: str, knobs: str, rings: list[tuple[int, int]]
) -> None:
    assert _stages(text, knobs) == rings
    error, bound = error_on_cpu(text, f"fuse,tile{{{knobs}}},to-cuda", seed=5)
    assert error < bound, error


def test_rings_stay_at_six_with_rows_of_blocks_or_few_steps() -> None:
    # Two rows of 64-row blocks share each B tile; 4 K steps need no more than 6 slots.
    assert _stages(matmul_plain(130, 128, 2048, "bf16", "nk")) == [(6, 0)]
    assert _stages(matmul_plain(64, 128, 256, "bf16", "nk")) == [(6, 0)]
