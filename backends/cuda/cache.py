"""On-disk cache of compiled cubins, keyed by everything that determines the binary."""

import hashlib
import json
import os
from pathlib import Path

from cuda.core.utils import FileStreamProgramCache

from tinyopt.backends.cuda.nvrtc import compile_cuda, key_options, nvrtc_version


def cache_dir() -> Path:
    """Return the cache folder: `$TINYOPT_CACHE_DIR`, else ~/.cache/tinyopt/cubins."""
    configured = os.environ.get("TINYOPT_CACHE_DIR")
    return Path(configured) if configured else Path.home() / ".cache" / "tinyopt" / "cubins"


def cache_key(source: str, name: str, arch: str, options: tuple[str, ...] = ()) -> bytes:
    """Return the sha256 of the source, kernel name, arch, NVRTC options (the include folders
    by their headers' text: `key_options`) and NVRTC's version."""
    fields = [source, name, arch, list(key_options(arch, options)), list(nvrtc_version())]
    return hashlib.sha256(json.dumps(fields).encode()).digest()


def cached_compile(
    source: str, name: str, arch: str = "sm_90a", options: tuple[str, ...] = ()
) -> bytes:
    """Return the cubin of `source` for `arch`, compiling with NVRTC only on a cache miss."""
    key = cache_key(source, name, arch, options)
    with FileStreamProgramCache(cache_dir()) as cache:
        cubin = cache.get(key)
        if cubin is None:
            cubin = compile_cuda(source, name, arch, options)
            cache[key] = cubin
        return cubin
