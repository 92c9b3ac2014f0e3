"""Differential fuzzing in CI: random graph programs, fixed seed, bounded case count.

Each program is fused and its loop IR run by the numpy loop executor against the graph
reference; then it is lowered with random tile knobs and every kernel compiled by NVRTC for
sm_90a, and some are run on the CPU emulation of their kernels (tests/cpu_cuda.h). A pass
refusing a knob combination with a diagnostic is counted, not a failure.
Programs that once failed and were fixed live in tests/fuzz/regressions/ and are replayed.
"""

from __future__ import annotations

import contextlib
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from cpu_cuda import COMPILER
from fuzz.generate import (
    allowed_error,
    check_compiles,
    check_on_cpu,
    check_loop_level,
    output_error,
    pipelines,
    programs,
)
from fuzz.reduce import op_count, reduce_program
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis.errors import NoSuchExample
from xdsl.dialects.builtin import f32 as f32_type

from tinyopt.backends import check
from tinyopt.backends.reference import run_reference
from tinyopt.compiler import parse
from tinyopt.dialects import graph

REGRESSIONS = sorted((Path(__file__).parent / "fuzz" / "regressions").glob("*.mlir"))
STATS: Counter[str] = Counter()
FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@settings(FUZZ, max_examples=60)
@given(programs())
def test_fused_loop_ir_matches_reference(text: str) -> None:
    STATS["loop cases"] += 1
    STATS["loop refused"] += check_loop_level(text).refused is not None


@settings(FUZZ, max_examples=40)
@given(programs(), pipelines())
def test_random_knobs_compile_with_nvrtc(text: str, pipeline: str) -> None:
    STATS["nvrtc cases"] += 1
    STATS["nvrtc refused"] += check_compiles(text, pipeline).refused is not None


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@settings(FUZZ, max_examples=15)
@given(programs(), pipelines())
def test_random_knobs_run_on_the_cpu_emulation(text: str, pipeline: str) -> None:
    """The kernels themselves, on the CPU emulation, against the reference (run_gpu.py's
    check without a GPU)."""
    STATS["emulated cases"] += 1
    STATS["emulated refused"] += check_on_cpu(text, pipeline).refused is not None


def test_programs_draw_every_graph_op_and_element_type() -> None:
    """3000 programs hold every graph op, i1, i32 and i64 arguments and i1 results. The draws
    stop at the first program by which all of them were seen (about 600 here), not at 3000:
    the draws after it could not change the outcome."""
    seen: Counter[str] = Counter()
    ops = {op.name.removeprefix("graph.") for op in graph.Graph.operations}
    # Not drawn yet (a known gap, issue 20): the ops taking a runtime scalar offset, whose
    # programs need scalar arguments and in-place cache arguments the generator does not make.
    ops -= {"dynamic_slice", "dynamic_update_slice"}
    kinds = {"i1 argument", "i32 argument", "i64 argument", "i1 result"}

    def all_seen_by(text: str) -> bool:
        head, body = text.split("\n", 1)
        arguments, results = head.split(" -> ", 1)
        seen.update(re.findall(r"graph\.(\w+)", body))
        seen.update(f"{t} argument" for t in re.findall(r"x(i\d+)>", arguments))
        seen.update(f"{t} result" for t in re.findall(r"x(i1)>", results))
        return not (ops | kinds) - set(seen)

    # `find` stops at the first program for which `all_seen_by` holds (no shrinking), or
    # raises NoSuchExample after 3000.
    with contextlib.suppress(NoSuchExample):
        find(
            programs(),
            all_seen_by,
            settings=settings(FUZZ, max_examples=3000, phases=[Phase.generate]),
        )
    missing = (ops | kinds) - set(seen)
    assert not missing, f"never drawn: {sorted(missing)}"


def test_masks_are_compared_exactly() -> None:
    mask = np.array([[True, False], [False, True]])
    assert output_error(mask, mask.copy(), mask) == 0.0
    assert output_error(~mask, mask, mask) == float("inf")


def test_a_cancelled_output_is_compared_absolutely() -> None:
    """x - tanh(x) of a small x (seed-0 case 580 of run_gpu.py -n 2000) is ~5e-10 in float64
    and rounding noise in f32: no f32 result is within 1e-4 of it relatively, so run_gpu.py
    compares as `output_error` does, absolutely near zero."""
    text = """
    func.func @fuzz(%a0: tensor<3x1xf32>) -> tensor<3x1xf32> {
      %v1 = graph.tanh %a0 : tensor<3x1xf32>
      %v2 = graph.sin %v1 : tensor<3x1xf32>
      %v3 = graph.max %a0, %v2 : tensor<3x1xf32>
      %v4 = graph.sub %v3, %a0 : tensor<3x1xf32>
      %v5 = graph.tanh %v4 : tensor<3x1xf32>
      %v6 = graph.sub %v4, %v5 : tensor<3x1xf32>
      func.return %v6 : tensor<3x1xf32>
    }"""
    graph_function = check.graph_function(parse(text))
    inputs, _ = check.device_inputs(graph_function, 0)
    (exact,) = run_reference(graph_function, *inputs)
    (single,) = run_reference(graph_function, *inputs, dtype=np.float32)
    assert check.relative_error(single, exact) > check.TOLERANCES[f32_type]
    assert output_error(single, exact, single) <= check.TOLERANCES[f32_type]


@pytest.mark.parametrize("path", REGRESSIONS, ids=lambda p: p.stem)
def test_regression(path: Path) -> None:
    """A shrunk program that once failed: its first line is `// PIPELINE: <pipeline>`."""
    text = path.read_text()
    pipeline = text.splitlines()[0].removeprefix("// PIPELINE: ")
    check_loop_level(text)
    check_compiles(text, pipeline)


def test_reducer_keeps_only_what_the_failure_needs() -> None:
    text = """
    func.func @fuzz(%a0: tensor<3x5xf32>, %a1: tensor<5xf32>, %a2: tensor<3x2xf32>)
        -> (tensor<3x5xf32>, tensor<3x7xf32>) {
      %v1 = graph.tanh %a0 : tensor<3x5xf32>
      %v2 = graph.broadcast %a1 : tensor<5xf32> -> tensor<3x5xf32>
      %v3 = graph.add %v1, %v2 : tensor<3x5xf32>
      %v4 = graph.softmax %v3 {dim = 1 : i64} : tensor<3x5xf32>
      %v5 = graph.concat %v4, %a2 {dim = 1 : i64}
          : (tensor<3x5xf32>, tensor<3x2xf32>) -> tensor<3x7xf32>
      %v6 = graph.relu %v5 : tensor<3x7xf32>
      func.return %v3, %v6 : tensor<3x5xf32>, tensor<3x7xf32>
    }"""
    small = reduce_program(text, lambda t: "graph.softmax" in t)
    assert op_count(small) == 1 and "graph.softmax %a0" in small
    assert "%a1" not in small and "%a2" not in small


def test_summary(record_property: Callable[[str, object], None]) -> None:
    """Prints how many cases ran and how many were refused (failures fail the tests above), at
    the end of pytest's output (with parallel workers, this file's tests run in one worker:
    tests/conftest.py)."""
    record_property("summary", f"fuzz: {dict(STATS)}")


def test_allowed_error_loosens_only_where_the_rounded_reference_is_far_from_float64() -> None:
    """A well-conditioned output keeps its dtype's tolerance; one whose reference rounded at
    each op is 30% from float64 may be twice that far; masks and indices stay exact."""
    exact = np.array([1.0, -2.0, 3.0])
    assert allowed_error(exact, exact.astype(np.float32), 2e-2) == 2e-2
    assert allowed_error(exact, exact * 1.3, 2e-2) == pytest.approx(0.6)
    assert allowed_error(np.array([1, 2]), np.array([1, 2]), 2e-2) == 0.0


def test_random_torch_modules_match_torch() -> None:
    """40 random modules (`fuzz/frontend_fuzz.py`, seed 0) captured, fused and run at the loop
    level match torch in float64; `python tests/fuzz/frontend_fuzz.py -n 500 --seed N` runs
    more."""
    pytest.importorskip("torch")
    import random
    import warnings

    from fuzz.frontend_fuzz import run_case

    r = random.Random(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outcomes = [run_case(r) for _ in range(40)]
    failed = [what for outcome, what in outcomes if outcome == "failed"]
    assert not failed, failed
    assert sum(outcome == "ok" for outcome, _ in outcomes) >= 30
