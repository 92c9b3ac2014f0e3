"""benchmarks/bench_tuner.py's summary table: the reference columns, on fake search results."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_tuner import write_tables  # noqa: E402

from tinyopt.passes.autotune.search import SearchResult
from tinyopt.passes.autotune.tuner import KernelResult


def _result(*times: float | None) -> KernelResult:
    history = [({"bm": 32 * (i + 1)}, ms) for i, ms in enumerate(times)]
    return KernelResult("k", "key", "rule", SearchResult(history=history))


def test_summary_puts_best_tuned_time_next_to_reference() -> None:
    runs = {
        "sgemm1024": (600, {"mcts": _result(2.0, 1.0), "random": _result(2.0, 1.5)}),
        "softmax": (600, {"mcts": _result(None), "random": _result(None)}),
    }
    summary = write_tables(runs, {"sgemm1024": 1.07, "softmax": None}, 8, 500).split("\n\n")[1]
    header, _, gemm, softmax = summary.splitlines()
    assert "| reference | reference ms | best tuned vs reference | best knobs |" in header
    assert "| cuBLAS | 1.0700 | 1.07× | bm=64 |" in gemm
    assert "| torch eager softmax | - | - | - |" in softmax
    assert len({row.count("|") for row in (header, gemm, softmax)}) == 1
