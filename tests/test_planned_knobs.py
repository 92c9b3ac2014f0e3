"""A knob given to `tile` (or a second `plan`) that a kernel's existing plan contradicts is a
diagnostic: the kernel is emitted from its plan, so `-p 'fuse,plan{threads=64},tile{threads=128}'`
ran 64 threads without a word about the 128 asked for."""

from __future__ import annotations

import pytest
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.compiler import lower

RELU = """func.func @f(%x: tensor<4x256xf32>) -> tensor<4x256xf32> {
  %y = graph.relu %x : tensor<4x256xf32>
  func.return %y : tensor<4x256xf32>
}
"""

MATMUL = """func.func @f(%a: tensor<64x64xbf16>, %b: tensor<64x64xbf16>) -> tensor<64x64xbf16> {
  %y = graph.matmul %a, %b : (tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<64x64xbf16>
  func.return %y : tensor<64x64xbf16>
}
"""


@pytest.mark.parametrize(
    ("pipeline", "message"),
    [
        (
            "fuse,plan{threads=64},tile{threads=128}",
            "tile: kernel @f_0 already has a plan with threads = 64, which tile's option "
            "threads=128 would not change",
        ),
        (
            "fuse,plan{threads=64},plan{threads=128}",
            "plan: kernel @f_0 already has a plan with threads = 64",
        ),
        ("fuse,plan,tile{threads=128}", "already has a plan with threads = 256"),
    ],
)
def test_a_contradicted_option_is_refused(pipeline: str, message: str) -> None:
    with pytest.raises(DiagnosticException, match=message):
        lower(RELU, pipeline)


@pytest.mark.parametrize(
    "knobs", ["threads=64", "bm=64 bn=64", "splitk=4", "evict=once", "mma=sync stages=2"]
)
def test_the_same_options_on_plan_and_tile_still_lower(knobs: str) -> None:
    text = RELU if knobs == "threads=64" else MATMUL
    lower(text, f"fuse,plan{{{knobs}}},tile{{{knobs}}},to-cuda")
    lower(text, f"fuse,plan{{{knobs}}},tile,to-cuda")  # tile's defaults follow the plan
