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
