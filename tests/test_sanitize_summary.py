"""benchmarks/sanitize_examples.py reads each compute-sanitizer tool's summary line."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from sanitize_examples import summary_counts  # noqa: E402


@pytest.mark.parametrize(
    ("output", "counts"),
    [
        ("ran 3 kernels of 2 programs, 0 failed\n========= ERROR SUMMARY: 0 errors\n", (0, 0)),
        ("========= ERROR SUMMARY: 2 errors\n", (2, 0)),
        (
            "ran 209 kernels of 157 programs, 0 failed\n========= RACECHECK SUMMARY: "
            "0 hazards displayed (0 errors, 0 warnings)\n",
            (0, 0),
        ),
        ("========= RACECHECK SUMMARY: 5 hazards displayed (1 error, 4 warnings)\n", (1, 4)),
        ("Traceback (most recent call last):\n", (-1, 0)),
    ],
    ids=["memcheck-clean", "memcheck-errors", "racecheck-clean", "racecheck-hazards", "none"],
)
def test_summary_counts(output: str, counts: tuple[int, int]) -> None:
    assert summary_counts(output) == counts
