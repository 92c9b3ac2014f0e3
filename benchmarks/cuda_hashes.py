"""Hashes every CUDA kernel the test suite generates, to show a refactor left them unchanged.

    python benchmarks/cuda_hashes.py OUT.tsv [pytest args]   # run the suite, record the hashes
    python benchmarks/cuda_hashes.py --compare BEFORE.tsv AFTER.tsv

The suite runs with a `sitecustomize` that wraps the `to-cuda` pass in every Python process it
starts (lit's `tinyopt` RUN lines too) and appends, for each `tile.cuda_kernel` printed, the
test (or the command line), the kernel's name and the sha256 of the printed op: its source,
grid, block and shared memory. `--compare` pairs the kernels of two runs by test and name.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

HOOK = """
import os, sys, hashlib
if os.environ.get("TINYOPT_HASH_LOG"):
    from tinyopt.dialects import tile
    from tinyopt.passes import to_cuda
    original = to_cuda.ToCudaPass.apply
    def apply(self, ctx, op):
        original(self, ctx, op)
        test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" (")[0]
        where = test or " ".join(sys.argv[1:])
        with open(os.environ["TINYOPT_HASH_LOG"], "a") as log:
            for kernel in op.walk():
                if isinstance(kernel, tile.CudaKernelOp):
                    digest = hashlib.sha256(str(kernel).encode()).hexdigest()[:16]
                    log.write(f"{where}\\t{kernel.sym_name.data}\\t{digest}\\n")
    to_cuda.ToCudaPass.apply = apply
"""


def record(out: Path, pytest_args: list[str]) -> int:
    """Runs the suite with the hook; returns pytest's exit status."""
    with tempfile.TemporaryDirectory() as hook_dir:
        Path(hook_dir, "sitecustomize.py").write_text(HOOK)
        env = dict(os.environ, TINYOPT_HASH_LOG=str(out.resolve()), TINYOPT_TUNING_DB="off")
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [hook_dir, env.get("PYTHONPATH")]))
        out.unlink(missing_ok=True)
        return subprocess.call([sys.executable, "-m", "pytest", *pytest_args], cwd=ROOT, env=env)


def _load(path: Path) -> dict[tuple[str, str], list[str]]:
    kernels: dict[tuple[str, str], list[str]] = defaultdict(list)
    for line in path.read_text().splitlines():
        where, name, digest = line.split("\t")
        where = re.sub(r"\S*/tests/lit/", "tests/lit/", where)  # a checkout's path
        kernels[where, name].append(digest)
    return kernels


def compare(before: Path, after: Path) -> bool:
    """Prints the kernels whose hashes differ; returns whether none does."""
    old, new = _load(before), _load(after)
    differ = [key for key in new if key in old and sorted(new[key]) != sorted(old[key])]
    for where, name in differ:
        print(f"differs: {where} @{name}")
    both = sum(1 for key in new if key in old)
    print(
        f"{both} (test, kernel) pairs in both runs: {both - len(differ)} identical, "
        f"{len(differ)} differ; {len(new.keys() - old.keys())} only after, "
        f"{len(old.keys() - new.keys())} only before"
    )
    return not differ


if __name__ == "__main__":
    if sys.argv[1:2] == ["--compare"]:
        sys.exit(0 if compare(Path(sys.argv[2]), Path(sys.argv[3])) else 1)
    sys.exit(record(Path(sys.argv[1]), sys.argv[2:]))
