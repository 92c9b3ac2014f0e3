"""NVRTC over the kernels of a module, in parallel worker processes.

NVRTC serializes compilations within a process: two threads compiling the Llama block's 12
kernels took as long as one (and as much CPU time), through cuda.bindings and through ctypes,
which releases the GIL (2-core VM, 2026-12-02). So kernels missing from the cubin cache are
compiled in worker processes, forked from a server that has imported NVRTC once
(`forkserver`: nothing is forked from a process holding a CUDA context or torch's threads).
`$TINYOPT_NVRTC_JOBS` caps the workers (default: one per CPU; 1 compiles in this process).
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool

from cuda.core.utils import FileStreamProgramCache

from tinyopt.backends.cuda.cache import cache_dir, cache_key
from tinyopt.backends.cuda.errors import CudaCompileError
from tinyopt.backends.cuda.nvrtc import compile_cuda
from tinyopt.progress import Progress

JOBS_ENV = "TINYOPT_NVRTC_JOBS"

POOL_START_SOURCE_BYTES = 48 << 10
"""CUDA source NVRTC compiles in about the time worker processes take to start (0.35-0.45 s
on the 2-core VM, 2026-12-03; NVRTC about 9 µs a byte on large kernels: mlp.mlir's 131 KB
stream-K contraction 1.17 s). Workers start only where the kernels besides the largest (the
critical path in parallel) hold more source than this: a module of one large kernel and
a few small ones compiles faster in this process."""


def jobs() -> int:
    """Return how many processes may compile at once."""
    configured = os.environ.get(JOBS_ENV, "")
    return max(1, int(configured)) if configured.isdigit() else os.cpu_count() or 1


def _compile_unit(source: str, name: str, arch: str) -> tuple[bool, bytes | str]:
    """Compile in a worker: (True, cubin), or (False, NVRTC's log) where NVRTC refuses it
    (the error's own arguments do not survive pickling)."""
    try:
        return True, compile_cuda(source, name, arch)
    except CudaCompileError as exc:
        return False, exc.log


def compile_all(units: list[tuple[str, str]], arch: str) -> list[bytes]:
    """Return the cubin of each (source, kernel name) for `arch`, from the cubin cache or
    compiled (in parallel where the kernels besides the largest are worth the workers' start)
    and stored in it."""
    keys = [cache_key(source, name, arch) for source, name in units]
    with FileStreamProgramCache(cache_dir()) as cache:
        cubins: list[bytes | None] = [cache.get(key) for key in keys]
        missing = [i for i, cubin in enumerate(cubins) if cubin is None]
        workers = min(jobs(), len(missing))
        with Progress("nvrtc", len(missing)) as progress:
            sizes = [len(units[i][0]) for i in missing]
            if workers < 2 or sum(sizes) - max(sizes, default=0) < POOL_START_SOURCE_BYTES:
                for i in missing:
                    cubins[i] = cache[keys[i]] = compile_cuda(*units[i], arch)
                    progress.advance(units[i][1])
            else:
                try:
                    _compile_in_workers(units, arch, missing, workers, cubins, progress)
                except (OSError, BrokenProcessPool):  # no processes here: compile in this one
                    pass
                for i in missing:
                    if cubins[i] is None:
                        cubins[i] = compile_cuda(*units[i], arch)
                        progress.advance(units[i][1])
                    cache[keys[i]] = cubins[i]
    return [cubin for cubin in cubins if cubin is not None]


def _compile_in_workers(
    units: list[tuple[str, str]],
    arch: str,
    missing: list[int],
    workers: int,
    cubins: list[bytes | None],
    progress: Progress,
) -> None:
    """Compile the `missing` units in `workers` processes into `cubins`."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    with ProcessPoolExecutor(workers, mp_context=context) as pool:
        futures = {pool.submit(_compile_unit, *units[i], arch): i for i in missing}
        for future in as_completed(futures):
            i = futures[future]
            compiled, result = future.result()
            if not compiled:
                raise CudaCompileError(units[i][1], str(result))
            cubins[i] = bytes(result)
            progress.advance(units[i][1])
