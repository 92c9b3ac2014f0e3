"""Mutants of valid programs (tests/bad_inputs/mutate.py) are diagnostics or correct kernels.

Each mutant runs through the `tinyopt` command in process (its `main`, with stdout and stderr
captured): it either exits 0 with CUDA on stdout, or exits 1 with nothing on stdout and one
diagnostic on stderr as in tests/test_bad_inputs.py (`FILE:LINE:COL: error: ...` or
`tinyopt: error: ...`, at most the source line and a caret after it). The catch-all messages
for a RecursionError or a MemoryError count as failures: each hides a missing check. Mutants
that lower and are small are checked against the float64 reference at loop level, and every
UTF-8 mutant also goes through xdsl-opt's driver with `--verify-diagnostics`, which must raise
nothing but xDSL's `ParseError` and `DiagnosticException`.

`TINYOPT_MUTANTS=N` sets the mutants per class (default `DEFAULT_PER_CLASS`, about 30 s on two
cores); every line truncation of every seed runs whatever N.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import signal
from collections.abc import Iterator
from math import prod
from pathlib import Path

import pytest
from bad_inputs.mutate import CLASSES, Mutant, mutants
from fuzz.generate import check_loop_level
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

from tinyopt import cli
from tinyopt.compiler import parse

DEFAULT_PER_CLASS = 30
PER_CLASS = int(os.environ.get("TINYOPT_MUTANTS", DEFAULT_PER_CLASS))
MUTANTS = mutants(PER_CLASS)
REFERENCE_ELEMENTS = 1 << 14
"""Mutants that lower with every tensor at most this large are checked against the reference."""
TIME_LIMIT_S = 30
"""A mutant running longer than this is a failure (a cycle once made `fuse` loop forever)."""
FALLBACKS = ("recursion limit", "out of memory")
"""The ends of `cli.main`'s catch-all messages, each a check missing before the failure."""


@contextlib.contextmanager
def time_limit(seconds: int) -> Iterator[None]:
    def expire(*_: object) -> None:
        raise TimeoutError(f"ran longer than {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def run_tinyopt(*args: str) -> tuple[int, str, str]:
    """Run `tinyopt ARGS` in process; return its exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = cli.main(list(args))
    return status, out.getvalue(), err.getvalue()


def small(text: str) -> bool:
    shapes = re.findall(r"tensor<((?:\d+x)*)[a-z]", text)
    return all(prod(int(d) for d in s.split("x") if d) <= REFERENCE_ELEMENTS for s in shapes)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_is_a_diagnostic_or_lowers(tmp_path: Path, mutant: Mutant) -> None:
    path = tmp_path / "mutant.mlir"
    path.write_bytes(mutant.text)
    why = f"{mutant.seed} ({mutant.note}) -p '{mutant.pipeline}'"
    with time_limit(TIME_LIMIT_S):
        status, out, err = run_tinyopt(str(path), "-p", mutant.pipeline)
    if status == 0:
        assert err == "", why
        if mutant.pipeline.endswith("to-cuda"):
            assert "__global__" in out, why
        else:  # `-p tile`, `-p ''`: the IR after the last pass
            assert out.startswith("builtin.module"), why
        return
    assert status == 1 and out == "", why
    lines = err.splitlines()
    assert lines and re.match(r"(\S+:\d+:\d+|tinyopt): error: ", lines[0]), f"{why}\n{err}"
    assert len(lines) <= 3, f"{why}\n{err}"
    assert not lines[0].endswith(FALLBACKS), f"{why}\n{err}"


SMALL = [m for m in MUTANTS if m.kind != "knob" and small(m.text.decode(errors="replace"))]


@pytest.mark.parametrize("mutant", SMALL, ids=lambda m: m.name)
def test_small_mutant_that_verifies_matches_the_reference(mutant: Mutant) -> None:
    """A small mutant that parses and verifies is refused by `fuse` or its loop IR matches
    the float64 reference (`check_loop_level`, on the module's first function)."""
    try:
        text = mutant.text.decode()
        parse(text)
    except (UnicodeDecodeError, ParseError, DiagnosticException):
        return
    check_loop_level(text)


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_xdsl_opt_raises_only_diagnostics(tmp_path: Path, mutant: Mutant) -> None:
    """`xdsl-opt FILE -p PIPELINE --verify-diagnostics` (tinyopt's passes are registered with
    xDSL) raises nothing but xDSL's diagnostics. Bytes that are not UTF-8 are xdsl-opt's own
    UnicodeDecodeError, before any of tinyopt's code runs, and are left out."""
    try:
        mutant.text.decode()
    except UnicodeDecodeError:
        pytest.skip("not UTF-8")
    path = tmp_path / "mutant.mlir"
    path.write_bytes(mutant.text)
    args = [str(path), "-p", mutant.pipeline, "--verify-diagnostics"]
    try:
        tool = xDSLOptMain(args=args)
    except (ArgSpecParseError, ValueError, DiagnosticException, SystemExit):
        return  # a pipeline xdsl-opt's argument parsing refuses: no pass ran
    with time_limit(TIME_LIMIT_S), contextlib.redirect_stdout(io.StringIO()):
        try:
            tool.run()
        except (ParseError, DiagnosticException):
            pass


def test_every_class_has_mutants() -> None:
    assert {m.kind for m in MUTANTS} == set(CLASSES)
