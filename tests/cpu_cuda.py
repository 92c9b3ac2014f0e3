"""Runs a generated tensor-core kernel on the CPU (g++ and tests/cpu_cuda.h), for numeric tests
of kernel schedules on machines without a GPU.

The kernel's CUDA source is compiled as C++ against an emulation of the CUDA subset those
kernels use (threads of 1-, 2- or 3-D blocks, barriers, shared memory, `ldmatrix`, `mma.sync`,
`cp.async`, warp shuffles, bf16/f16 conversions, L2 prefetches checked against the buffers,
float atomic adds, stream-K's flags); its prelude of inline-PTX helpers is replaced by the
emulation's. A block's CUDA threads are fibers on one OS thread, switched where one waits (a
barrier, an mbarrier): a thread no other can release aborts the run as a deadlock. Blocks are
emulated thread by thread, so keep shapes small.

Blocks run one after another, but a kernel with `__cluster_dims__(cx, cy, cz)` in its signature
runs its thread-block clusters one after another, the blocks of a cluster at once: each a
forked process (its own blockIdx, barriers, static shared memory and emulation tables), with
the kernel buffers and the cluster's dynamic shared-memory arenas in MAP_SHARED mappings;
`tinyopt_cluster_sync` is a process-shared barrier of all the cluster's threads and
`tinyopt_cluster_load_f32x4` reads another rank's arena (cpu_cuda.h). A block whose threads all
wait may wait for another block of the cluster (the wgmma emulation's mbarriers, which other
blocks arrive on and copy to, tests/cpu_wgmma.py): it polls, and the run aborts as a deadlock
once every block of the cluster waits or has finished with nothing changed since, or after
CPU_CUDA_CLUSTER_TIMEOUT seconds (default 300) without a change.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from tinyopt.dialects import tile

COMPILER = shutil.which("g++")
HEADER = Path(__file__).resolve().parent / "cpu_cuda.h"
FLAGS = ["-O1", "-std=c++20", "-pthread", "-w"]
BUILDS_ENV = "CPU_CUDA_BUILDS"
"""A folder for the builds (`_builds`) in place of the cache folder, e.g. a fresh one to build
everything again."""
_PARAM = re.compile(
    r"(?:const )?((?:long )?\w+)\* __restrict__ (\w+)|const (long long|int) (\w+)(?=[,)])"
)
"""A buffer parameter (a pointer) or a runtime scalar's (an integer passed by value)."""
_CLUSTER = re.compile(r"__cluster_dims__\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)")
"""A kernel's compile-time cluster dims, in its signature (`__cluster_dims__(1, 1, 4)`): its
clusters run one after another, the blocks of a cluster at once (`cpu_cuda_cluster`)."""
CLUSTER_BLOCKS = 8
"""The most blocks a cluster may have (the portable limit)."""
_PREFETCH = re.compile(r'asm volatile\("prefetch\.global\.L2 \[%0\];" :: "l"\((.*)\)\);')
"""An L2 prefetch (`tile.prefetch_l2`): checked against the buffers, logged on request."""
_BULK_PREFETCH = re.compile(
    r'asm volatile\("cp\.async\.bulk\.prefetch\.L2\.global \[%0\], %1;" :: '
    r'"l"\((.*)\), "r"\((\d+)u\) : "memory"\);'
)
"""A bulk L2 prefetch (`tile.prefetch_l2` with `bytes`): its whole range checked, logged as one."""
_FLAG_SET = re.compile(
    r'asm volatile\("st\.release\.gpu\.global\.b32 \[%0\], 1;" :: "l"\((.*?)\) : "memory"\);'
)
_FLAG_LOAD = re.compile(
    r'asm volatile\("ld\.acquire\.gpu\.global\.b32 %0, \[%1\];" : '
    r'"=r"\(flag\) : "l"\((.*?)\) : "memory"\);'
)
"""Stream-K's flag store and load (`tile.flag_set`, `tile.flag_wait`). Blocks run one after
another here, so a block only finds the flags of blocks run before it: a load of an unset flag
(a wait that would hang, or a handoff to a block launched later) aborts."""
_STORAGE = {
    "__nv_bfloat16": np.uint16,
    "__half": np.uint16,
    "__nv_fp8_e4m3": np.uint8,
    "__nv_fp8_e5m2": np.uint8,
    "float": np.float32,
    "int": np.int32,
    "long long": np.int64,
    "bool": np.bool_,
}
"""How each C element type is held in numpy (16- and 8-bit floats as their bits)."""


def plain_flags(source: str) -> str:
    """The kernel source with stream-K's flag stores and loads as plain C++ (`_FLAG_LOAD`)."""
    source = _FLAG_SET.sub(r"*(volatile unsigned*)(\1) = 1;", source)
    return _FLAG_LOAD.sub(r"flag = *(volatile unsigned*)(\1); if (!flag) abort();", source)


def run_on_cpu(
    kernel: tile.CudaKernelOp,
    buffers: list[np.ndarray],
    prelude: str = "",
    prefetch_log: Path | None = None,
    timeout: float | None = None,
    reverse: bool = False,
) -> list[np.ndarray]:
    """Runs `kernel` on its whole grid over `buffers` (its parameters in order, as numpy arrays
    of the storage types above; a runtime scalar as a 0-d array) and returns the buffers
    afterwards. `prelude` is C++ placed
    after the emulation header (stand-ins for ops the header does not emulate). An L2 prefetch
    outside every buffer aborts the run; with `prefetch_log` each prefetch is written there as
    "block buffer byte-offset" (block: the linear block index, x fastest). A kernel with
    `__cluster_dims__` runs cluster by cluster (`_CLUSTER`). A run longer than `timeout`
    seconds is killed (subprocess.TimeoutExpired), its cluster's blocks with it. `reverse` runs
    the blocks of a kernel without clusters last to first: a block's stores outside its own
    tile then land after the block that owns them, where the test sees them."""
    source = kernel.source.data
    name = kernel.sym_name.data
    start = source.index('extern "C" __global__')
    signature = source[start : source.index("{", start)]
    params = [
        (pointee, True) if pointee else (scalar, False)
        for pointee, _, scalar, _ in _PARAM.findall(signature)
    ]
    assert len(params) == len(buffers), (signature, len(buffers))
    for (ctype, _), array in zip(params, buffers, strict=True):
        assert array.dtype == _STORAGE[ctype], (ctype, array.dtype)
    body = source[start:].replace(
        "extern __shared__ __align__(1024) unsigned char tinyopt_smem[];",
        "unsigned char* tinyopt_smem = cpu_cuda_smem;",
    )
    # cp.async groups complete at once here: commits and waits have nothing to do.
    body = re.sub(r'asm volatile\("cp\.async\.(commit|wait)_group[^;]*;"[^;]*;', ";", body)
    body = plain_flags(body)
    grid = list(kernel.grid.get_values())
    body = _PREFETCH.sub(rf"cpu_cuda_prefetch(\1, {grid[0]}, {grid[1]});", body)
    body = _BULK_PREFETCH.sub(rf"cpu_cuda_prefetch_bulk(\1, \2, {grid[0]}, {grid[1]});", body)
    bx, by, bz = kernel.block.get_values()
    threads = bx * by * bz
    args = ", ".join(
        f"({ctype}*)buffers[{k}].data()" if pointer else f"*({ctype}*)buffers[{k}].data()"
        for k, (ctype, pointer) in enumerate(params)
    )
    warps = -(-threads // 32)
    block = f"""
        blockIdx = {{x, y, z}};
        cpu_cuda_barrier block({threads});
        cpu_cuda_block = &block;
        for (int w = 0; w < {warps}; ++w) cpu_cuda_warp[w] = new cpu_cuda_barrier(32);
        cpu_cuda_run_block({threads}, {bx}, {by}, [&](unsigned) {{ {name}({args}); }});
        for (int w = 0; w < {warps}; ++w) delete cpu_cuda_warp[w];"""
    cluster = _CLUSTER.search(signature)
    assert cluster or "__cluster_dims__" not in signature, signature
    if cluster is None:
        storage = "file"
        walk = [
            f"for (unsigned {v} = {g}; {v}-- > 0;)"
            if reverse
            else f"for (unsigned {v} = 0; {v} < {g}; ++{v})"
            for v, g in zip("zyx", reversed(grid), strict=True)
        ]
        blocks = f"""
    {walk[0]}
    {walk[1]}
    {walk[2]} {{{block}
    }}"""
    else:
        dims = [int(d) for d in cluster.groups()]
        assert all(g % d == 0 for g, d in zip(grid, dims, strict=True)), (grid, dims)
        assert dims[0] * dims[1] * dims[2] <= CLUSTER_BLOCKS, dims
        # Forked blocks write the buffers in a shared mapping; a log line is one write.
        storage = "cpu_cuda_shared_copy(file)"
        cx, cy, cz = dims
        blocks = f"""
    if (cpu_cuda_prefetch_log) setvbuf(cpu_cuda_prefetch_log, nullptr, _IOLBF, 0);
    cpu_cuda_cluster_start({cx * cy * cz}, {threads});
    for (unsigned z0 = 0; z0 < {grid[2]}; z0 += {cz})
    for (unsigned y0 = 0; y0 < {grid[1]}; y0 += {cy})
    for (unsigned x0 = 0; x0 < {grid[0]}; x0 += {cx})
        cpu_cuda_cluster(x0, y0, z0, {cx}, {cy}, {cz},
                         [&](unsigned x, unsigned y, unsigned z) {{{block}
        }});"""
    main = f"""
#include <fstream>
#include <vector>
int main(int argc, char** argv) {{
    std::vector<std::vector<char>> files;
    std::vector<std::span<char>> buffers;
    for (int k = 1; k < argc; ++k) {{
        std::ifstream in(argv[k], std::ios::binary);
        files.emplace_back(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }}
    for (auto& file : files) buffers.push_back({storage});
    cpu_cuda_buffers = &buffers;
    if (const char* log = getenv("CPU_CUDA_PREFETCH_LOG")) cpu_cuda_prefetch_log = fopen(log, "w");
{blocks}
    for (int k = 1; k < argc; ++k) {{
        std::ofstream out(argv[k], std::ios::binary);
        out.write(buffers[k - 1].data(), buffers[k - 1].size());
    }}
    if (cpu_cuda_prefetch_log) fclose(cpu_cuda_prefetch_log);
}}
"""
    executable = _built(f'#include "{_prefix()}"\n{prelude}\n{body}\n{main}')
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        files = []
        for k, array in enumerate(buffers):
            files.append(work / f"buffer{k}.bin")
            np.ascontiguousarray(array).tofile(files[-1])
        log = {"CPU_CUDA_PREFETCH_LOG": str(prefetch_log)} if prefetch_log else {}
        subprocess.run(
            [str(executable), *map(str, files)], check=True, env=os.environ | log, timeout=timeout
        )
        return [
            np.fromfile(path, dtype=array.dtype).reshape(array.shape)
            for path, array in zip(files, buffers, strict=True)
        ]


def _built(source: str) -> Path:
    """Returns the executable g++ makes of `source`, compiled once into the folder of builds
    (`_builds`): tests run the same kernel on other data or beside other kernels (a decode
    test's merge kernel, the same for every warp count), and g++ takes 0.2-1 s a kernel where
    running it takes a fraction of that. Each executable is named by the sha256 of the compiler,
    its flags and the source and written under a name of its own before it is renamed into
    place, so processes that build the same one at once both finish with a whole file."""
    assert COMPILER is not None
    key = hashlib.sha256("\0".join([COMPILER, *FLAGS, source]).encode()).hexdigest()
    executable = _builds() / f"kernel-{key}"
    if not executable.exists():
        partial = executable.with_name(f"{executable.name}.{os.getpid()}")
        cpp = partial.with_name(f"{partial.name}.cpp")
        cpp.write_text(source)
        subprocess.run([COMPILER, *FLAGS, "-o", str(partial), str(cpp)], check=True)
        cpp.unlink()
        os.replace(partial, executable)
    return executable


def _prefix() -> Path:
    """Returns the header each kernel includes first: the emulation header and the standard
    headers `main` uses, precompiled once per test run (g++ reads `prefix.h.gch` in place of
    `prefix.h`, which saves parsing them for every kernel, about 0.3 s a kernel here), once
    per folder of builds. The first process to need it builds it while the others wait on a
    lock; where g++ cannot
    precompile, `prefix.h` is parsed as it is."""
    folder = _builds()
    prefix = folder / "prefix.h"
    with open(folder / "prefix.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not prefix.exists():
            assert COMPILER is not None
            text = f'#include "{HEADER}"\n#include <fstream>\n#include <vector>\n'
            # Each is written under another name and renamed; prefix.h, renamed last, says
            # that its .gch is whole (where g++ made one).
            header, gch = folder / "prefix.h.tmp", folder / "prefix.h.gch.tmp"
            header.write_text(text)
            subprocess.run(
                [COMPILER, *FLAGS, "-x", "c++-header", "-o", str(gch), str(header)],
                capture_output=True,
            )
            if gch.exists():
                os.replace(gch, f"{prefix}.gch")
            os.replace(header, prefix)
    return prefix


def _builds() -> Path:
    """Returns the folder of the builds: `BUILDS_ENV`'s, else a cache kept between test runs, as
    NVRTC's cubins are (~/.cache/tinyopt/cpu_cuda/VERSION: g++ took about 150 of a suite
    run's 630 CPU seconds on the 2-core VM, 2026-12-03). VERSION hashes what an executable
    depends on besides its source, which names it: the compiler (its path and `--version`),
    the flags and the emulation header's text, so an edit of cpu_cuda.h builds anew. Either
    folder is made if it is missing."""
    if not _cache:
        shared = os.environ.get(BUILDS_ENV)
        if shared:
            folder = Path(shared)
        else:
            assert COMPILER is not None
            version = subprocess.run([COMPILER, "--version"], capture_output=True, text=True).stdout
            fields = [COMPILER, version, *FLAGS, HEADER.read_text()]
            key = hashlib.sha256("\0".join(fields).encode()).hexdigest()[:16]
            folder = Path.home() / ".cache" / "tinyopt" / "cpu_cuda" / key
        folder.mkdir(parents=True, exist_ok=True)
        _cache.append(folder)
    return _cache[0]


_cache: list[Path] = []
"""The cache folder, once `_builds` has found it."""
