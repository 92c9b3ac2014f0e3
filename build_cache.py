"""The build cache: a lowered module (its text) and its kernels' cubins, stored under a key of
everything that determines them, so that a warm build runs no pass and no NVRTC.

README.md ("Compile time") describes its location, keys and off switch. Entries live in
cuda.core's `FileStreamProgramCache` (each written to a temporary file and renamed into place,
so concurrent writers never leave a partial entry); each carries the sha256 of its contents,
and one that does not check out or decode is deleted and rebuilt.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tinyopt.compile_timer import phase
from tinyopt.source_hash import source_hash

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from tinyopt.backends.cuda.runtime import CompiledModule

ENV = "TINYOPT_BUILD_CACHE"
"""A folder for the cache, or `off`; by default `$XDG_CACHE_HOME/tinyopt/builds`."""

MAGIC = b"tinyopt-build-1\n"
"""The first bytes of every entry (a new layout gets a new magic, so old entries miss)."""


def cache_dir() -> Path | None:
    """Return the cache folder, or None when `$TINYOPT_BUILD_CACHE` is `off`."""
    configured = os.environ.get(ENV)
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tinyopt" / "builds"


@dataclass(frozen=True)
class Build:
    """A cached build: the lowered module's text, each kernel's cubin by name, and what the
    frontend needs besides (a torch module's function name and weight names)."""

    lowered: str
    cubins: dict[str, bytes]
    extra: dict[str, object] = field(default_factory=dict)

    def encode(self) -> bytes:
        """Return the entry's bytes: the magic, the sha256 of the rest, a JSON header line
        (text, extra, each cubin's name and size), then the cubins."""
        names = sorted(self.cubins)
        header = {
            "lowered": self.lowered,
            "extra": self.extra,
            "cubins": [[name, len(self.cubins[name])] for name in names],
        }
        body = json.dumps(header).encode() + b"\n" + b"".join(self.cubins[n] for n in names)
        return MAGIC + hashlib.sha256(body).hexdigest().encode() + b"\n" + body

    @classmethod
    def decode(cls, data: bytes) -> Build:
        """Return the build an entry holds; raise ValueError if the entry is damaged."""
        if not data.startswith(MAGIC):
            raise ValueError("not a tinyopt build entry")
        digest, _, body = data[len(MAGIC) :].partition(b"\n")
        if hashlib.sha256(body).hexdigest().encode() != digest:
            raise ValueError("the entry's checksum does not match")
        line, _, blobs = body.partition(b"\n")
        header = json.loads(line)
        cubins, offset = {}, 0
        for name, size in header["cubins"]:
            cubins[name] = blobs[offset : offset + size]
            offset += size
        if offset != len(blobs):
            raise ValueError("the entry's cubins do not add up")
        return cls(header["lowered"], cubins, header["extra"])


@functools.cache
def _xdsl_version() -> str:
    return importlib.metadata.version("xdsl")


def tuning_state(pipeline: str, gpu: str | None) -> str | None:
    """Return a digest of the tuning cache's entries `apply-tuned` may read for this GPU model,
    or None when the pipeline has no `apply-tuned` or there is nothing it could read."""
    from xdsl.utils.arg_spec import parse_pipeline

    if "apply-tuned" not in {p.name for p in parse_pipeline(pipeline)}:
        return None
    from tinyopt.passes.autotune.cache import TuningCache, db_path

    path = db_path()
    if path is None or not path.exists() or gpu is None:
        return None
    with TuningCache(path) as cache:
        rows = cache.configs(gpu)
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest() if rows else None


def build_key(source: dict[str, object], pipeline: str, arch: str) -> bytes:
    """Return the key of a build: its input (`source`: the IR text, or what determines a torch
    module's capture), the pipeline with its knobs, the tuning state, tinyopt's source hash,
    xDSL's version, the GPU model, the target architecture and NVRTC's options and version."""
    from tinyopt.backends.cuda.nvrtc import key_options, nvrtc_version
    from tinyopt.passes.autotune.cache import gpu_model

    gpu = gpu_model()
    fields = {
        "source": source,
        "pipeline": pipeline,
        "tuning": tuning_state(pipeline, gpu),
        "tinyopt": source_hash(),
        "xdsl": _xdsl_version(),
        "gpu": gpu,
        "arch": arch,
        "nvrtc": [list(key_options(arch)), list(nvrtc_version())],
    }
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).digest()


class BuildCache:
    """The on-disk store of builds."""

    def __init__(self, path: Path) -> None:
        from cuda.core.utils import FileStreamProgramCache

        self.store = FileStreamProgramCache(path)

    def get(self, key: bytes) -> Build | None:
        """Return the build stored under `key`, or None; a damaged entry is deleted."""
        try:
            data = self.store[key]
        except KeyError:
            return None
        try:
            return Build.decode(data)
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            try:
                del self.store[key]
            except (KeyError, OSError):
                pass  # another process removed or replaced it first
            return None

    def put(self, key: bytes, build: Build) -> None:
        """Store `build` under `key` (atomically: readers see the old entry or the new one)."""
        self.store[key] = build.encode()


def build(
    source: Callable[[], dict[str, object] | None],
    pipeline: str,
    arch: str,
    lower: Callable[[], tuple[ModuleOp, dict[str, object], bool]],
    poison: bool = True,
    sync: bool = True,
) -> tuple[CompiledModule, dict[str, object], bool]:
    """Compile the module `lower()` lowers, or take it from the cache under the key of
    `source()` (None: not cacheable), `pipeline` and `arch`.

    `lower` returns the lowered module, what the caller needs besides (JSON) and whether the
    build may be stored. Returns the compiled module (`compile_module`'s `poison`, `sync`),
    those extras, and whether they came from the cache.
    """
    from tinyopt.backends.cuda.runtime import compile_module
    from tinyopt.compiler import parse

    folder = cache_dir()
    fields = source() if folder is not None else None
    if folder is not None and fields is not None:
        cache = BuildCache(folder)
        key = build_key(fields, pipeline, arch)
        with phase("cache"):
            found = cache.get(key)
        if found is not None:
            module = parse(found.lowered)
            compiled = compile_module(module, arch, poison, sync, cubins=found.cubins)
            return compiled, found.extra, True
    lowered, extra, storable = lower()
    compiled = compile_module(lowered, arch, poison, sync)
    if folder is not None and fields is not None and storable:
        with phase("cache"):
            cubins = {name: kernel.cubin for name, kernel in compiled.kernels.items()}
            cache.put(key, Build(str(lowered), cubins, extra))
    return compiled, extra, False
