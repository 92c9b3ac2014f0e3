"""Compile CUDA C++ to a cubin with NVRTC; this needs no GPU."""

import functools
import hashlib
import os

from cuda.bindings import driver, nvrtc
from cuda.core import Device
from cuda.pathfinder import find_nvidia_header_directory

from tinyopt.backends.cuda.errors import CudaCompileError, CudaError, CudaUnavailableError

DEFAULT_OPTIONS: tuple[str, ...] = ("-std=c++17", "-default-device", "-lineinfo")


def _check(result: tuple, what: str) -> tuple:
    """Return the values of an NVRTC call after its status, raising `CudaError` on failure."""
    status, *values = result
    if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CudaError(f"{what} failed: {status.name}")
    return tuple(values)


def nvrtc_version() -> tuple[int, int]:
    """Return the (major, minor) version of the loaded NVRTC library."""
    return _check(nvrtc.nvrtcVersion(), "nvrtcVersion")


@functools.cache
def include_dirs() -> tuple[str, ...]:
    """Return the directories holding cuda_fp16.h / cuda_bf16.h and the CCCL headers.

    Each is looked up by cuda.pathfinder (the pip packages' nvidia/cu13/include and
    include/cccl first, then `$CUDA_PATH`/`$CUDA_HOME` and system toolkits), falling back
    to `$CUDA_HOME/include` (default /usr/local/cuda) and its `cccl/` subfolder.
    """
    toolkit = os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "include")
    fallbacks = {"cudart": toolkit, "cccl": os.path.join(toolkit, "cccl")}
    dirs = [find_nvidia_header_directory(lib) or path for lib, path in fallbacks.items()]
    return tuple(d for d in dict.fromkeys(dirs) if os.path.isdir(d))


KEY_HEADERS = (
    "cuda_fp16.h",
    "cuda_fp16.hpp",
    "cuda_bf16.h",
    "cuda_bf16.hpp",
    "cuda/std/__cccl/version.h",
)
"""The headers whose text stands for the include folders in a cache key: the two the kernels
include (with their implementations) and CCCL's version."""


@functools.cache
def headers_digest() -> str:
    """Return the sha256 of the KEY_HEADERS found in `include_dirs()` (each name with its text,
    or with nothing where none is found): what the include folders contribute to a cubin, in
    place of their paths, which differ from one virtual environment to the next."""
    digest = hashlib.sha256()
    for name in KEY_HEADERS:
        digest.update(name.encode() + b"\0")
        for folder in include_dirs():
            path = os.path.join(folder, name)
            if os.path.isfile(path):
                with open(path, "rb") as header:
                    digest.update(header.read())
                break
        digest.update(b"\0")
    return digest.hexdigest()


def key_options(arch: str, options: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Return `compile_options` as a cache key holds them: the include folders' paths replaced
    by `headers_digest()`, so a fresh environment with the same headers finds the cubins of
    an earlier one."""
    kept = tuple(o for o in compile_options(arch, options) if not o.startswith("-I"))
    return (*kept, f"headers={headers_digest()}")


def compile_options(arch: str, options: tuple[str, ...] = ()) -> tuple[str, ...]:
    """Return the full NVRTC option list used to compile for `arch` with extra `options`."""
    includes = tuple(f"-I{d}" for d in include_dirs())
    return DEFAULT_OPTIONS + (f"-arch={arch}",) + includes + tuple(options)


def compile_cuda(
    source: str, name: str, arch: str = "sm_90a", options: tuple[str, ...] = ()
) -> bytes:
    """Compile a CUDA C++ translation unit to a cubin for `arch` (e.g. "sm_90a").

    `name` is the kernel the unit defines; it names the program in NVRTC's log and in
    the `CudaCompileError` raised when NVRTC rejects the source or an option.
    """
    opts = [o.encode() for o in compile_options(arch, options)]
    (program,) = _check(
        nvrtc.nvrtcCreateProgram(source.encode(), f"{name}.cu".encode(), 0, [], []),
        "nvrtcCreateProgram",
    )
    try:
        (status,) = nvrtc.nvrtcCompileProgram(program, len(opts), opts)
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CudaCompileError(name, _program_log(program) or status.name)
        (size,) = _check(nvrtc.nvrtcGetCUBINSize(program), "nvrtcGetCUBINSize")
        cubin = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(program, cubin), "nvrtcGetCUBIN")
        return cubin
    finally:
        _check(nvrtc.nvrtcDestroyProgram(program), "nvrtcDestroyProgram")


def _program_log(program: nvrtc.nvrtcProgram) -> str:
    """Return NVRTC's compile log for `program` as text."""
    (size,) = _check(nvrtc.nvrtcGetProgramLogSize(program), "nvrtcGetProgramLogSize")
    log = b" " * size
    _check(nvrtc.nvrtcGetProgramLog(program, log), "nvrtcGetProgramLog")
    return log.rstrip(b"\0").decode(errors="replace").strip()


def gpu_available() -> bool:
    """Return whether a CUDA driver and at least one GPU are present; never raises."""
    try:
        (status,) = driver.cuInit(0)
        if status != driver.CUresult.CUDA_SUCCESS:
            return False
        status, count = driver.cuDeviceGetCount()
        return status == driver.CUresult.CUDA_SUCCESS and count > 0
    except Exception:  # a missing driver library raises many kinds of errors
        return False


def arch_of_current_device() -> str:
    """Return the NVRTC architecture of the current GPU: "sm_90a" on cc 9.0, else "sm_XY"."""
    if not gpu_available():
        raise CudaUnavailableError("no CUDA GPU is available to ask for its architecture")
    major, minor = Device().compute_capability
    return "sm_90a" if (major, minor) == (9, 0) else f"sm_{major}{minor}"


def default_arch() -> str:
    """Return the architecture to compile for by default: the current GPU's, else sm_90a."""
    return arch_of_current_device() if gpu_available() else "sm_90a"
