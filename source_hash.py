"""The hash of tinyopt's own source: what the build cache and the tuning cache key their entries
by instead of the version string, which stays 0.1.0 while the code changes."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent
"""The `tinyopt` package folder."""

PACKAGES = ("dialects", "passes", "backends", "frontends")
"""The folders whose Python files are the compiler, besides the package's own top-level files
(tests, benchmarks, examples and docs are not part of it)."""


def source_files() -> list[Path]:
    """Return the compiler's Python files, in a fixed order."""
    files = [p for p in ROOT.glob("*.py") if p.name != "lit.cfg.py"]
    for package in PACKAGES:
        files += (ROOT / package).rglob("*.py")
    return sorted(files)


@functools.cache
def source_hash() -> str:
    """Return the sha256 of the compiler's Python files (their paths and contents), computed
    once per process: about 150 files, a few milliseconds."""
    digest = hashlib.sha256()
    for path in source_files():
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()
