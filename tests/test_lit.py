"""Runs the lit/filecheck suite (tests/lit/**.mlir) so that `pytest` alone runs every test."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_lit_suite() -> None:
    """Every `.mlir` test under tests/lit passes."""
    result = subprocess.run(
        [sys.executable, "-c", "import lit.main; lit.main.main()", "-q", "tests/lit"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
