"""Shared pytest configuration: markers for tests that need hardware, the tests' order and the
cyclic garbage collector's thresholds."""

import gc
import os

import pytest

from tinyopt.backends.cuda.nvrtc import gpu_available

# No test may read a user's tuning cache through apply-tuned (tests that need one set their own).
os.environ["TINYOPT_TUNING_DB"] = "off"

requires_gpu = pytest.mark.skipif(not gpu_available(), reason="no CUDA GPU")

# The longest tests, which run one subprocess pool each: the lit suite and the docs run.
LONGEST = ("tests/test_lit.py::", "tests/test_docs_run.py::test_docs_run")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Put the longest tests first. With parallel workers (`-n`), pytest-xdist hands tests to
    the workers in this order, so none of them starts last and keeps the run waiting."""
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST))


def pytest_collection_finish(session: pytest.Session) -> None:
    """Make the cyclic garbage collector run less often. The compiler makes and drops many
    objects in reference cycles (ops, blocks, uses); at the default thresholds the collector
    ran every 700 allocations and often over the whole heap, every module imported and every
    test collected, which took a sixth to a fifth of the run. What exists now is left out of
    its passes (`gc.freeze`), and it runs every 500 000 allocations: about 50 MB more memory."""
    gc.freeze()
    gc.set_threshold(500_000, 50, 100)
