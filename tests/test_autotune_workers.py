"""The parallel measurer's process handling with fake runners (no GPU): builds in a process
pool, a hanging candidate times out, a crashing one is recorded, and the next still runs."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

import numpy as np

from tinyopt.dialects import loop
from tinyopt.passes.autotune.cache import kernel_key
from tinyopt.passes.autotune.measure import Built, Candidate, Gate, Outcome, Program
from tinyopt.passes.autotune.workers import GpuMeasurer

SOFTMAX = """
func.func @softmax(%x: tensor<16x256xf32>) -> tensor<16x256xf32> {
  %y = graph.softmax %x {dim = 1 : i64} : tensor<16x256xf32>
  func.return %y : tensor<16x256xf32>
}
"""
PROGRAM = Program(SOFTMAX, "softmax")


class Misbehaving:
    """Right answers in 1 ms, except: 128 threads hang, 512 threads kill the process."""

    def run(self, built: Built, name: str, inputs: Sequence[np.ndarray]):
        if "__launch_bounds__(128)" in built.text:
            time.sleep(600)
        if "__launch_bounds__(512)" in built.text:
            os._exit(3)
        return [r.astype(np.float32) for r in Gate(PROGRAM).references], lambda: 1.0


def candidates(*threads: int) -> list[Candidate]:
    key = kernel_key(loop.kernels(PROGRAM.loop_module())[0])
    return [Candidate.of({key: {"threads": t}}) for t in threads]


def test_timeouts_crashes_and_failures_are_recorded() -> None:
    with GpuMeasurer(jobs=2, timeout=3.0, runner_type=Misbehaving) as measurer:
        start = time.monotonic()
        outcomes = measurer.measure(PROGRAM, candidates(128, 64, 512, 256))
        assert time.monotonic() - start < 120
        # each answer again, from the measurer's memo (nothing rebuilt or re-run)
        assert measurer.measure(PROGRAM, candidates(256, 128)) == [outcomes[3], outcomes[0]]
    assert outcomes == [
        Outcome(None, "timeout after 3 s"),
        Outcome(1.0),
        Outcome(None, "crashed"),
        Outcome(1.0),
    ]


def test_build_failures_do_not_reach_the_gpu() -> None:
    key = kernel_key(loop.kernels(PROGRAM.loop_module())[0])
    with GpuMeasurer(jobs=1, timeout=3.0, runner_type=Misbehaving) as measurer:
        (outcome,) = measurer.measure(PROGRAM, [Candidate.of({key: {"threads": 64, "rows": 2}})])
    assert outcome.reason.startswith("does not lower: tile: rows=2 needs threads <= 32")
