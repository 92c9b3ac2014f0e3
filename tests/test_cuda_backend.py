"""Tests of the CUDA backend: NVRTC, the cubin cache, kernel launch and the module runtime."""

from pathlib import Path

import numpy as np
import pytest
from conftest import requires_gpu
from xdsl.context import Context
from xdsl.dialects import builtin, func, memref
from xdsl.parser import Parser

from tinyopt.backends.cuda import cache
from tinyopt.backends.cuda.cache import cached_compile
from tinyopt.backends.cuda.errors import CudaArgumentError, CudaCompileError, CudaModuleError
from tinyopt.backends.cuda.launch import Kernel
from tinyopt.backends.cuda.nvrtc import compile_cuda
from tinyopt.backends.cuda.printer import PDL_STATEMENTS
from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.backends.cuda.timing import time_function

SAXPY = """
extern "C" __global__ void saxpy(const float* x, const float* y, float* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 1024) out[i] = 2.0f * x[i] + y[i];
}
"""

BF16_SCALE = """
#include <cuda_bf16.h>
extern "C" __global__ void scale(const __nv_bfloat16* x, __nv_bfloat16* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < 256) out[i] = __float2bfloat16(3.0f * __bfloat162float(x[i]));
}
"""

# Writes only the even elements: the odd ones must stay poisoned.
EVENS = """
extern "C" __global__ void evens(const float* x, float* out) {
  int i = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
  if (i < 64) out[i] = x[i];
}
"""

# Uses 64 KiB of dynamic shared memory, above the 48 KiB default limit.
BIG_SMEM = """
extern "C" __global__ void reverse(const float* x, float* out) {
  extern __shared__ float tile[];
  for (int i = threadIdx.x; i < 16384; i += blockDim.x) tile[i] = x[i];
  __syncthreads();
  for (int i = threadIdx.x; i < 16384; i += blockDim.x) out[i] = tile[16383 - i];
}
"""


def _kernel_op(
    name: str, source: str, grid: int, block: int, smem: int = 0, pdl: bool = False
) -> str:
    """Return a generic-form tile.cuda_kernel op."""
    escaped = source.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return (
        f'"tile.cuda_kernel"() <{{sym_name = "{name}", source = "{escaped}", '
        f"grid = array<i64: {grid}, 1, 1>, block = array<i64: {block}, 1, 1>, "
        f"smem = {smem} : i64{', pdl' if pdl else ''}}}> : () -> ()"
    )


def _module(text: str) -> builtin.ModuleOp:
    """Parse a to-cuda module whose tile and loop ops are in generic form."""
    ctx = Context(allow_unregistered=True)
    for dialect in (builtin.Builtin, func.Func, memref.MemRef):
        ctx.load_dialect(dialect)
    return Parser(ctx, text).parse_module()


V = "memref<1024xf32>"
SAXPY_MODULE = f"""
builtin.module {{
  {_kernel_op("saxpy", SAXPY, 4, 256)}
  func.func @saxpy_twice(%x: memref<1024xf32>, %y: memref<1024xf32>) -> memref<1024xf32> {{
    %t = memref.alloc() : memref<1024xf32>
    "loop.launch"(%x, %y, %t) <{{callee = @saxpy}}> : ({V}, {V}, {V}) -> ()
    %out = memref.alloc() : memref<1024xf32>
    "loop.launch"(%t, %y, %out) <{{callee = @saxpy}}> : ({V}, {V}, {V}) -> ()
    func.return %out : memref<1024xf32>
  }}
}}
"""


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Give every test an empty cubin cache."""
    monkeypatch.setenv("TINYOPT_CACHE_DIR", str(tmp_path / "cubins"))


def test_nvrtc_compiles_float_and_bf16_for_sm90a():
    for source, name in ((SAXPY, "saxpy"), (BF16_SCALE, "scale")):
        cubin = compile_cuda(source, name, arch="sm_90a")
        assert cubin.startswith(b"\x7fELF")
        assert name.encode() in cubin


def test_compile_error_carries_log_and_name():
    with pytest.raises(CudaCompileError) as info:
        compile_cuda('extern "C" __global__ void broken() { undeclared = 1; }', "broken")
    assert info.value.name == "broken"
    assert "undeclared" in info.value.log
    assert "broken" in str(info.value)


def test_cache_hits_on_second_call(tmp_path, monkeypatch):
    first = cached_compile(SAXPY, "saxpy", "sm_90a")
    entries = [p for p in (tmp_path / "cubins").rglob("*") if p.is_file()]
    assert len(entries) == 1

    def no_compile(*args):
        raise AssertionError("a cache hit must not compile")

    monkeypatch.setattr(cache, "compile_cuda", no_compile)
    assert cached_compile(SAXPY, "saxpy", "sm_90a") == first
    assert len([p for p in (tmp_path / "cubins").rglob("*") if p.is_file()]) == 1


def test_cache_key_depends_on_arch_and_options():
    keys = {
        cache.cache_key(SAXPY, "saxpy", "sm_90a"),
        cache.cache_key(SAXPY, "saxpy", "sm_80"),
        cache.cache_key(SAXPY, "saxpy", "sm_90a", ("--use_fast_math",)),
    }
    assert len(keys) == 3


def test_cache_key_holds_the_headers_text_not_their_folder(tmp_path, monkeypatch):
    """Two environments whose include folders hold the same headers share cubins; a header
    whose text differs changes the key."""
    from tinyopt.backends.cuda import nvrtc

    def key_with(folders: tuple[str, ...]) -> bytes:
        monkeypatch.setattr(nvrtc, "include_dirs", lambda: folders)
        nvrtc.headers_digest.cache_clear()
        return cache.cache_key(SAXPY, "saxpy", "sm_90a")

    originals = nvrtc.include_dirs()
    copies = []
    for index, folder in enumerate(originals):
        copy = tmp_path / f"env{index}"
        for name in nvrtc.KEY_HEADERS:
            if (Path(folder) / name).is_file():
                (copy / name).parent.mkdir(parents=True, exist_ok=True)
                (copy / name).write_bytes((Path(folder) / name).read_bytes())
        copies.append(str(copy))
    try:
        original = key_with(originals)
        assert key_with(tuple(copies)) == original
        edited = next(Path(c) / "cuda_bf16.h" for c in copies if (Path(c) / "cuda_bf16.h").exists())
        edited.write_bytes(edited.read_bytes() + b"// another version\n")
        assert key_with(tuple(copies)) != original
    finally:
        nvrtc.headers_digest.cache_clear()


def test_compile_module_without_gpu():
    compiled = compile_module(_module(SAXPY_MODULE), arch="sm_90a")
    assert list(compiled.kernels) == ["saxpy"]
    kernel = compiled.kernels["saxpy"]
    assert (kernel.grid, kernel.block, kernel.smem_bytes) == ((4, 1, 1), (256, 1, 1), 0)
    assert compiled["saxpy_twice"] is compiled.function("saxpy_twice")
    with pytest.raises(CudaModuleError, match="no host function @missing"):
        compiled.function("missing")


def test_compile_module_rejects_other_host_ops():
    text = """
    builtin.module {
      func.func @f(%x: memref<4xf32>) -> memref<4xf32> {
        %y = memref.alloc() : memref<4xf32>
        "memref.copy"(%x, %y) : (memref<4xf32>, memref<4xf32>) -> ()
        func.return %y : memref<4xf32>
      }
    }
    """
    with pytest.raises(CudaModuleError, match="found memref.copy"):
        compile_module(_module(text), arch="sm_90a")


def test_compile_module_rejects_unknown_callee():
    text = """
    builtin.module {
      func.func @f(%x: memref<4xf32>) {
        "loop.launch"(%x) <{callee = @nowhere}> : (memref<4xf32>) -> ()
        func.return
      }
    }
    """
    with pytest.raises(CudaModuleError, match="@nowhere, which is no kernel"):
        compile_module(_module(text), arch="sm_90a")


@requires_gpu
def test_kernel_launch_on_numpy_writes_every_output():
    x = np.arange(1024, dtype=np.float32)
    y = np.ones(1024, dtype=np.float32)
    out = np.full(1024, np.nan, dtype=np.float32)
    Kernel(cached_compile(SAXPY, "saxpy"), "saxpy", (4, 1, 1), (256, 1, 1))(x, y, out)
    np.testing.assert_array_equal(out, 2 * x + y)


@requires_gpu
def test_kernel_with_more_than_48k_shared_memory():
    x = np.arange(16384, dtype=np.float32)
    out = np.full_like(x, np.nan)
    kernel = Kernel(cached_compile(BIG_SMEM, "reverse"), "reverse", (1, 1, 1), (256, 1, 1), 65536)
    kernel(x, out)
    np.testing.assert_array_equal(out, x[::-1])


@requires_gpu
def test_kernel_checks_parameter_count():
    kernel = Kernel(cached_compile(SAXPY, "saxpy"), "saxpy", (4, 1, 1), (256, 1, 1))
    with pytest.raises(CudaArgumentError, match="takes 3 parameters, got 2"):
        kernel(np.zeros(1024, np.float32), np.zeros(1024, np.float32))


@requires_gpu
def test_module_runs_on_numpy():
    compiled = compile_module(_module(SAXPY_MODULE))
    x = np.random.default_rng(0).standard_normal(1024).astype(np.float32)
    y = np.ones(1024, dtype=np.float32)
    out = compiled["saxpy_twice"](x, y)
    np.testing.assert_allclose(out, 2 * (2 * x + y) + y, rtol=1e-6)
    with pytest.raises(CudaArgumentError, match="argument 1 must be 1024 float32"):
        compiled["saxpy_twice"](x, y.astype(np.float16))


@requires_gpu
def test_unwritten_outputs_are_poisoned():
    text = f"""
    builtin.module {{
      {_kernel_op("evens", EVENS, 1, 32)}
      func.func @f(%x: memref<64xf32>) -> memref<64xf32> {{
        %out = memref.alloc() : memref<64xf32>
        "loop.launch"(%x, %out) <{{callee = @evens}}> : (memref<64xf32>, memref<64xf32>) -> ()
        func.return %out : memref<64xf32>
      }}
    }}
    """
    out = compile_module(_module(text))["f"](np.arange(64, dtype=np.float32))
    np.testing.assert_array_equal(out[::2], np.arange(0, 64, 2))
    assert np.isnan(out[1::2]).all()


@requires_gpu
def test_module_runs_on_torch_zero_copy_with_bf16():
    torch = pytest.importorskip("torch")
    text = f"""
    builtin.module {{
      {_kernel_op("scale", BF16_SCALE, 1, 256)}
      func.func @f(%x: memref<256xbf16>) -> memref<256xbf16> {{
        %out = memref.alloc() : memref<256xbf16>
        "loop.launch"(%x, %out) <{{callee = @scale}}> : (memref<256xbf16>, memref<256xbf16>) -> ()
        func.return %out : memref<256xbf16>
      }}
    }}
    """
    f = compile_module(_module(text))["f"]
    x = torch.linspace(-4, 4, 256, device="cuda", dtype=torch.bfloat16)
    out = f(x)
    assert out.dtype == torch.bfloat16 and out.device == x.device
    torch.testing.assert_close(out, x * 3)
    host = f(x.view(torch.int16).cpu().numpy().view(np.uint16))
    assert host.dtype == np.uint16
    from_host = torch.from_numpy(host.view(np.int16)).view(torch.bfloat16)
    torch.testing.assert_close(from_host, out.cpu())
    with pytest.raises(CudaArgumentError, match="C-contiguous"):
        f(torch.zeros(256, 2, device="cuda", dtype=torch.bfloat16)[:, 0])
    with pytest.raises(CudaArgumentError, match="is not 16-byte aligned"):
        f(torch.zeros(257, device="cuda", dtype=torch.bfloat16)[1:])  # starts 2 bytes in


@requires_gpu
def test_module_runs_on_cupy_zero_copy():
    cupy = pytest.importorskip("cupy")
    x = cupy.arange(1024, dtype=cupy.float32)
    out = compile_module(_module(SAXPY_MODULE))["saxpy_twice"](x, x)
    assert isinstance(out, cupy.ndarray)
    np.testing.assert_array_equal(cupy.asnumpy(out), 7 * np.arange(1024, dtype=np.float32))
    with pytest.raises(CudaArgumentError, match="mixed"):
        compile_module(_module(SAXPY_MODULE))["saxpy_twice"](x, cupy.asnumpy(x))


@requires_gpu
def test_time_function_returns_milliseconds():
    compiled = compile_module(_module(SAXPY_MODULE))
    x = np.ones(1024, dtype=np.float32)
    assert time_function(compiled["saxpy_twice"], (x, x), warmup=2, reps=5) > 0


# Four saxpys through three intermediates: t0 and t2 are never used by one launch, so they
# share bytes; `out` is returned and gets an array of its own.
CHAIN_MODULE = f"""
builtin.module {{
  {_kernel_op("saxpy", SAXPY, 4, 256)}
  func.func @chain(%x: {V}, %y: {V}) -> {V} {{
    %t0 = memref.alloc() : {V}
    "loop.launch"(%x, %y, %t0) <{{callee = @saxpy}}> : ({V}, {V}, {V}) -> ()
    %t1 = memref.alloc() : {V}
    "loop.launch"(%t0, %y, %t1) <{{callee = @saxpy}}> : ({V}, {V}, {V}) -> ()
    %t2 = memref.alloc() : {V}
    "loop.launch"(%t1, %y, %t2) <{{callee = @saxpy}}> : ({V}, {V}, {V}) -> ()
    %out = memref.alloc() : {V}
    "loop.launch"(%t2, %y, %out) <{{callee = @saxpy}}> : ({V}, {V}, {V}) -> ()
    func.return %out : {V}
  }}
}}
"""


def _chain_reference(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    for _ in range(4):
        x = 2 * x + y
    return x


def test_intermediates_share_an_arena_unless_poisoned():
    shared = compile_module(_module(CHAIN_MODULE), arch="sm_90a", poison=False)["chain"]
    assert shared.arena_size == 2 * 4096  # t0 and t2 share; t1 has its own bytes
    apart = compile_module(_module(CHAIN_MODULE), arch="sm_90a", poison=True)["chain"]
    assert apart.arena_size == 3 * 4096


@requires_gpu
def test_shared_intermediates_bound_calls_and_graph_replay_agree():
    torch = pytest.importorskip("torch")
    chain = compile_module(_module(CHAIN_MODULE), poison=False)["chain"]
    x = torch.randn(1024, device="cuda")
    y = torch.randn(1024, device="cuda")
    expected = _chain_reference(x.cpu().numpy(), y.cpu().numpy())
    np.testing.assert_allclose(chain(x, y).cpu().numpy(), expected, rtol=1e-5)
    call = chain.bind(x, y)
    call()
    np.testing.assert_allclose(call.results().cpu().numpy(), expected, rtol=1e-5)
    replay = call.graph()
    x.copy_(torch.randn(1024, device="cuda"))  # bound inputs: new values, same address
    call.results().fill_(float("nan"))
    replay()
    expected = _chain_reference(x.cpu().numpy(), y.cpu().numpy())
    np.testing.assert_allclose(call.results().cpu().numpy(), expected, rtol=1e-5)
    numpy_call = chain.bind(x.cpu().numpy(), y.cpu().numpy())
    numpy_call.graph()()
    np.testing.assert_allclose(numpy_call.results(), expected, rtol=1e-5)


# The chain with programmatic dependent launch: each saxpy waits for the one before it at its
# start, so t2 may reuse t0's bytes although the third launch starts while the second runs.
PDL_SAXPY = SAXPY.replace("{\n", "{\n" + "\n".join(PDL_STATEMENTS) + "\n", 1)
PDL_CHAIN_MODULE = CHAIN_MODULE.replace(
    _kernel_op("saxpy", SAXPY, 4, 256), _kernel_op("saxpy", PDL_SAXPY, 4, 256, pdl=True)
)


def test_pdl_kernels_carry_the_flag_from_sm90():
    """A kernel marked `pdl` is launched with it on sm_90 and newer; below, its
    `griddepcontrol` statements compile to nothing and it is launched as any other."""
    compiled = compile_module(_module(PDL_CHAIN_MODULE), arch="sm_90a", poison=False)
    assert compiled.kernels["saxpy"].pdl
    assert not compile_module(_module(CHAIN_MODULE), arch="sm_90a").kernels["saxpy"].pdl
    assert not compile_module(_module(PDL_CHAIN_MODULE), arch="sm_80").kernels["saxpy"].pdl


@requires_gpu
def test_pdl_chain_direct_launches_and_graph_replay_agree():
    torch = pytest.importorskip("torch")
    chain = compile_module(_module(PDL_CHAIN_MODULE), poison=False)["chain"]
    assert chain.arena_size == 2 * 4096  # t0 and t2 share bytes
    x = torch.randn(1024, device="cuda")
    y = torch.randn(1024, device="cuda")
    expected = _chain_reference(x.cpu().numpy(), y.cpu().numpy())
    np.testing.assert_allclose(chain(x, y).cpu().numpy(), expected, rtol=1e-5)
    call = chain.bind(x, y)
    replay = call.graph()
    for _ in range(3):  # fresh values through the same bound buffers, launches and replays
        x.copy_(torch.randn(1024, device="cuda"))
        expected = _chain_reference(x.cpu().numpy(), y.cpu().numpy())
        for run in (call, replay):
            call.results().fill_(float("nan"))
            run()
            np.testing.assert_allclose(call.results().cpu().numpy(), expected, rtol=1e-5)
