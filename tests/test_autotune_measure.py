"""The correctness gate of the tuner: a fast wrong candidate never wins (fake runner, no GPU),
and the same on the GPU with a kernel edited to skip its work."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from conftest import requires_gpu

from tinyopt.dialects import loop
from tinyopt.passes.autotune.cache import kernel_key
from tinyopt.passes.autotune.measure import (
    Built,
    Candidate,
    CudaRunner,
    Gate,
    InProcessMeasurer,
    Outcome,
    Program,
    build,
    measure_built,
)
from tinyopt.passes.autotune.search import Budget
from tinyopt.passes.autotune.tuner import tune

SOFTMAX = """
func.func @softmax(%x: tensor<16x256xf32>) -> tensor<16x256xf32> {
  %y = graph.softmax %x {dim = 1 : i64} : tensor<16x256xf32>
  func.return %y : tensor<16x256xf32>
}
"""
PROGRAM = Program(SOFTMAX, "softmax")


def default_text() -> str:
    built = build(PROGRAM, Candidate.of({}))
    assert isinstance(built, Built)
    return built.text


class WrongButFast:
    """Correct outputs and 1 ms for the default schedule; every other candidate returns
    garbage in 0.001 ms, so a tuner without a gate would pick one of them."""

    def __init__(self) -> None:
        self.default = default_text()
        self.runs = 0

    def run(self, built: Built, name: str, inputs: Sequence[np.ndarray]):
        self.runs += 1
        gate = Gate(PROGRAM)
        right = [r.astype(np.float32) for r in gate.references]
        if built.text == self.default:
            return right, lambda: 1.0
        return [r + 1.0 for r in right], lambda: 0.001


def test_gate_rejects_the_faster_wrong_candidates() -> None:
    runner = WrongButFast()
    (result,) = tune(PROGRAM, InProcessMeasurer(runner), "mcts", Budget(trials=8))
    assert result.best[1] == 1.0 and result.default_ms == 1.0
    assert len(result.search.history) == 8
    wrong = [reason for _, reason in result.failures]
    assert len(wrong) >= 5 and all(r.startswith("wrong result") for r in wrong), wrong
    # every other trial generated the default's code (e.g. rows=1 where auto picks 1)
    assert all(ms == 1.0 for _, ms in result.search.history if ms is not None)
    assert all(r.startswith("does not lower") for _, r in result.refusals)


def test_gate_catches_nan_and_passes_the_reference() -> None:
    gate = Gate(PROGRAM)
    right = [r.astype(np.float32) for r in gate.references]
    assert gate.wrong(right) is None
    poisoned = [np.full_like(right[0], np.nan)]
    assert gate.wrong(poisoned).startswith("wrong result: output 0 rel error nan")


def test_build_reports_why_a_candidate_does_not_lower() -> None:
    kernel = loop.kernels(PROGRAM.loop_module())[0]
    outcome = build(PROGRAM, Candidate.of({kernel_key(kernel): {"threads": 64, "rows": 2}}))
    assert outcome == Outcome(
        None, "does not lower: tile: rows=2 needs threads <= 32 (one warp per row), got threads=64"
    )


def test_identical_code_is_measured_once() -> None:
    runner = WrongButFast()
    measurer = InProcessMeasurer(runner)
    kernel = loop.kernels(PROGRAM.loop_module())[0]
    same = [Candidate.of({}), Candidate.of({kernel_key(kernel): {"cache": 1}})]
    assert measurer.measure(PROGRAM, same) == [Outcome(1.0), Outcome(1.0)]
    assert runner.runs == 1


class SkipWork(CudaRunner):
    """Runs the real kernels, except that the marked candidate's kernel returns at once."""

    def run(self, built: Built, name: str, inputs: Sequence[np.ndarray]):
        body = built.text.index(") {\\0A", built.text.index("__global__")) + len(") {\\0A")
        text = built.text[:body] + "    return;\\0A" + built.text[body:]
        return super().run(Built(text), name, inputs)


@requires_gpu
def test_gate_on_the_gpu() -> None:
    gate = Gate(PROGRAM)
    built = build(PROGRAM, Candidate.of({}))
    assert isinstance(built, Built)
    right = measure_built(CudaRunner(), gate, built)
    assert right.ms is not None and right.ms > 0, right
    wrong = measure_built(SkipWork(), gate, built)
    assert wrong.ms is None and wrong.reason.startswith("wrong result"), wrong


@pytest.mark.parametrize("method", ["mcts", "random"])
@requires_gpu
def test_tune_on_the_gpu(method: str) -> None:
    from tinyopt.passes.autotune.workers import GpuMeasurer

    with GpuMeasurer(jobs=2) as measurer:
        (result,) = tune(PROGRAM, measurer, method, Budget(trials=6))
    assert result.default_ms is not None and result.best[1] <= result.default_ms


def test_progress_and_summary() -> None:
    from tinyopt.passes.autotune.report import progress_line, summary_table

    seen = []
    (result,) = tune(
        PROGRAM, InProcessMeasurer(WrongButFast()), "random", Budget(trials=5), progress=seen.append
    )
    counts = [p.trials for p in seen]  # refused configurations are no trials
    assert counts == sorted(counts) and set(counts) == {1, 2, 3, 4, 5}
    assert all(p.default_ms == 1.0 and p.best_ms == 1.0 for p in seen)
    third = next(p for p in seen if p.trials == 3)
    assert progress_line(third).startswith("softmax_0: 3/5 trials  best 1.0000 ms  1.00x default")
    table = summary_table([result])
    failed, refused = len(result.failures), len(result.refusals)
    assert failed >= 1
    row = f"| softmax_0 | row_reduction | 5 | {failed} | {refused} | 1.0000 | 1.0000 | 1.00x |"
    assert f"{row} (defaults) |" in table
