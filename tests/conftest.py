"""Shared pytest configuration: markers for tests that need hardware, the tests' order and the
cyclic garbage collector's thresholds."""

import gc
import os
import re

import pytest

from tinyopt.backends.cuda.nvrtc import gpu_available

# No test may read a user's tuning cache through apply-tuned (tests that need one set their own).
os.environ["TINYOPT_TUNING_DB"] = "off"
# Nor a build cache: each test builds (tests that need one set their own).
os.environ["TINYOPT_BUILD_CACHE"] = "off"

requires_gpu = pytest.mark.skipif(not gpu_available(), reason="no CUDA GPU")


# The longest tests, which run one subprocess pool each: the lit suite and the docs run; then
# the stream-K emulation cases (4-11 s each, two emulated runs a case), which are collected
# near the end and otherwise were among the last tests a worker ran while the other waited.
LONGEST = (
    "tests/test_lit.py::",
    "tests/test_docs_run.py::test_docs_run",
    "tests/test_wgmma_stream_k_on_cpu.py::test_stream_k_tail_matches_whole_tiles_and_reference",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the longest tests first. With parallel workers (`-n`), pytest-xdist hands tests to
    the workers in this order, so none of them starts last and keeps the run waiting."""
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST))


ONE_WORKER = "tests/test_fuzz.py::"
"""Tests that run in one parallel worker, in order: the fuzz file's summary counts the cases
of the tests before it."""

SHARING = {
    # a case's verdict (`verdict`)
    "tests/test_associativity.py::": re.compile(r"\[(\w+)\]$"),
    # a variant's lowering, compiled and emulated (`lowered`)
    "tests/test_attention_wgmma.py::test_wgmma_attention_": re.compile(r"\[([\w-]+)\]$"),
    # a case's lowerings at each akwarps, auto's compared with the one it chose (`lowered`)
    "tests/test_decode_attention_on_cpu.py::test_key_parallel_warps_": re.compile(r"\[(.+)-\d\]$"),
}
"""Tests that reuse what an earlier one computed and kept in the process, by the beginning of
their ids and a pattern whose group names what they share: the tests sharing it run in one
parallel worker, in order."""


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object:
    """pytest-xdist's `--dist load` (its default), each test sent to the next free worker,
    but `ONE_WORKER`'s tests sent together to one, and so are the tests that share something
    (`SHARING`). The work goes out in the tests' order (`pytest_collection_modifyitems`), not
    the largest groups first."""
    if config.getvalue("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class Scheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.startswith(ONE_WORKER):
                return ONE_WORKER
            for start, pattern in SHARING.items():
                if nodeid.startswith(start) and (shared := pattern.search(nodeid)):
                    return f"{start}[{shared[1]}]"
            return nodeid

    config.option.loadscopereorder = False
    return Scheduling(config, log)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Make the cyclic garbage collector run less often. The compiler makes and drops many
    objects in reference cycles (ops, blocks, uses); at the default thresholds the collector
    ran every 700 allocations and often over the whole heap, every module imported and every
    test collected, which took a sixth to a fifth of the run. It runs every 500 000
    allocations: about 50 MB more memory.

    What exists now is not frozen (`gc.freeze`): `apply_pipeline` freezes the older objects
    around each pipeline itself, unless something froze some already, which it asks
    `gc.get_freeze_count`, and that walks every frozen object: 42 ms a pipeline over the
    500 000 objects a full collection leaves, which was 50 s of the 165 s of CPU time that
    test_mutated_inputs, test_kernels_compile and test_knobs_read took (108 s unfrozen)."""
    gc.set_threshold(500_000, 50, 100)


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """In a parallel worker, freeze what is left (`gc.freeze`) once its tests are done. The
    collector seldom runs a full pass at the thresholds above, so the reference cycles of the
    whole run (lowered modules, ~2 GB) were left for pytest's last full collection at exit,
    which took 8 s a worker at the end of a run (2-core VM). That collection runs finalizers
    for pytest's check of unraisable exceptions, which in a worker fails nothing: the worker
    has reported its results by then (a file left open in a cycle passes with `-n 2`, fails
    without). A run without workers keeps it."""
    if hasattr(session.config, "workerinput"):
        gc.freeze()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the lines tests record as `summary` (`record_property`), after the results: a
    parallel worker's own output is not shown."""
    lines = [
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) == "call"
        for name, value in getattr(report, "user_properties", ())
        if name == "summary"
    ]
    if lines:
        terminalreporter.write_sep("-", "summaries")
        for line in lines:
            terminalreporter.write_line(line)
