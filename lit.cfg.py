"""lit configuration: every `.mlir` file under tests/lit is a test (`*.mlir.in` are not).

Run from the repository root with `lit -v tests/lit` (or `pytest`, which runs it too).
RUN lines call `tinyopt`, `xdsl-opt` and `filecheck` from the bin folder of the Python
that runs lit, and use lit's builtin `not`.
"""

import os
import sys

import lit.formats

config.name = "tinyopt"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.excludes = ["examples", "benchmarks", "docs", "build", "dist"]
config.environment["PATH"] = os.pathsep.join(
    [os.path.dirname(sys.executable), config.environment.get("PATH", "")]
)
# An install made with `pip install --target` is found through PYTHONPATH, which lit does not
# pass to RUN lines on its own.
if "PYTHONPATH" in os.environ:
    config.environment["PYTHONPATH"] = os.environ["PYTHONPATH"]
# RUN lines must not see a user's tuning cache (docs/tuning.md).
config.environment["TINYOPT_TUNING_DB"] = "off"
if "TINYOPT_HASH_LOG" in os.environ:  # benchmarks/cuda_hashes.py records lit kernels too
    config.environment["TINYOPT_HASH_LOG"] = os.environ["TINYOPT_HASH_LOG"]


def _fork_server() -> str | None:
    """Start tests/lit_fork.py's server and return a folder holding its clients (a `tinyopt` and
    a `filecheck`), or None where it cannot run (then RUN lines run the real scripts)."""
    import atexit

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "tests"))
    import lit_fork

    serving = lit_fork.Serving(capture=lit_fork.FRONTEND)  # `tinyopt capture`'s torch
    atexit.register(serving.__exit__)
    return serving.__enter__()


# RUN lines' `tinyopt` and `filecheck` fork from a server that has imported them
# (tests/lit_fork.py), which saves 0.45 s and 0.15 s of imports a command (2.2 s more a
# `tinyopt capture`: its own server has imported torch too; the other commands fork from one
# that has not, 50 ms less a fork); TINYOPT_LIT_FORK=0 runs the real scripts.
if os.environ.get("TINYOPT_LIT_FORK", "1") != "0":
    _client_folder = _fork_server()
    if _client_folder is not None:
        config.environment["PATH"] = os.pathsep.join([_client_folder, config.environment["PATH"]])
