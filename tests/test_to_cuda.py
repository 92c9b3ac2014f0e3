"""Tests for the CUDA C printer and the to-cuda pass: every kernel printed compiles with NVRTC."""

import math
from pathlib import Path

import numpy as np
import pytest
from conftest import requires_gpu
from programs import EXAMPLES, rmsnorm, skinny, swiglu
from xdsl.context import Context
from xdsl.dialects import arith, builtin, func, memref, scf
from xdsl.dialects import math as fmath
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from tinyopt.backends.cuda.launch import Kernel
from tinyopt.backends.cuda.nvrtc import compile_cuda
from tinyopt.backends.cuda.printer import float_literal, kernel_source, module_sources
from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.compiler import lower
from tinyopt.dialects import tile
from tinyopt.dialects.loop import Loop
from tinyopt.passes.to_cuda import ToCudaPass

EXAMPLE = Path(__file__).parent / "data" / "tile_example.mlir"


def parse(text: str) -> ModuleOp:
    """Parses and verifies a module of tile kernels; unknown ops are allowed."""
    ctx = Context(allow_unregistered=True)
    for dialect in (builtin.Builtin, func.Func, arith.Arith, memref.MemRef, fmath.Math, scf.Scf):
        ctx.load_dialect(dialect)
    ctx.load_dialect(Loop)
    ctx.load_dialect(tile.Tile)
    module = Parser(ctx, text).parse_module()
    module.verify()
    return module


def source(text: str) -> str:
    """Returns the CUDA C of the only kernel of a module, after checking that it compiles."""
    ((name, cuda),) = module_sources(parse(text)).items()
    compile_cuda(cuda, name, arch="sm_90a")
    return cuda


VECTORS = """
tile.kernel @vectors grid [8, 1, 1] block [32, 1, 1]
    (%x: memref<8x128xf32>, %h: memref<8x256xbf16>, %out: memref<8x128xf32>,
     %hout: memref<8x256xbf16>) {
  %row = tile.block_id x
  %lane = tile.thread_id x
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  %col = arith.muli %lane, %c4 : index
  %a, %b, %c, %d = tile.vload %x[%row, %col] : memref<8x128xf32> -> f32, f32, f32, f32
  %hcol = arith.muli %lane, %c8 : index
  %h0, %h1, %h2, %h3, %h4, %h5, %h6, %h7 = tile.vload %h[%row, %hcol]
      : memref<8x256xbf16> -> bf16, bf16, bf16, bf16, bf16, bf16, bf16, bf16
  %e0 = arith.extf %h0 : bf16 to f32
  %sum = arith.addf %a, %e0 : f32
  %t0 = arith.truncf %sum : f32 to bf16
  tile.vstore (%sum, %b, %c, %d : f32, f32, f32, f32), %out[%row, %col] : memref<8x128xf32>
  tile.vstore (%t0, %h1, %h2, %h3, %h4, %h5, %h6, %h7
      : bf16, bf16, bf16, bf16, bf16, bf16, bf16, bf16), %hout[%row, %hcol] : memref<8x256xbf16>
}
"""

ONLINE_SOFTMAX = """
tile.kernel @online grid [4, 1, 1] block [32, 1, 1] (%x: memref<4x32xf32>, %out: memref<4x2xf32>) {
  %row = tile.block_id x
  %lane = tile.thread_id x
  %v = memref.load %x[%row, %lane] : memref<4x32xf32>
  %one = arith.constant 1.0 : f32
  %m, %l = tile.warp_reduce %v, %one : f32, f32 combine(%m1, %l1, %m2, %l2) {
    %mx = arith.maximumf %m1, %m2 : f32
    %d1 = arith.subf %m1, %mx : f32
    %d2 = arith.subf %m2, %mx : f32
    %e1 = math.exp %d1 : f32
    %e2 = math.exp %d2 : f32
    %w1 = arith.mulf %l1, %e1 : f32
    %w2 = arith.mulf %l2, %e2 : f32
    %total = arith.addf %w1, %w2 : f32
    tile.yield %mx, %total : f32, f32
  }
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %first = arith.cmpi eq, %lane, %c0 : index
  scf.if %first {
    memref.store %m, %out[%row, %c0] : memref<4x2xf32>
    memref.store %l, %out[%row, %c1] : memref<4x2xf32>
  }
}
"""

BLOCK_REDUCE_IN_LOOP = """
tile.kernel @block_sum grid [2, 1, 1] block [32, 4, 1]
    (%x: memref<2x3x128xf32>, %out: memref<2x3xf32>) {
  %b = tile.block_id x
  %tx = tile.thread_id x
  %ty = tile.thread_id y
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %c32 = arith.constant 32 : index
  %row = arith.muli %ty, %c32 : index
  %col = arith.addi %row, %tx : index
  scf.for %k = %c0 to %c3 step %c1 {
    %v = memref.load %x[%b, %k, %col] : memref<2x3x128xf32>
    %s = tile.block_reduce %v : f32 combine(%p, %q) {
      %r = arith.addf %p, %q : f32
      tile.yield %r : f32
    }
    memref.store %s, %out[%b, %k] : memref<2x3xf32>
  }
}
"""

SMALL_BLOCK_REDUCE = """
tile.kernel @small grid [1, 1, 1] block [16, 1, 1] (%x: memref<16xi32>, %out: memref<1xi32>) {
  %t = tile.thread_id x
  %c0 = arith.constant 0 : index
  %v = memref.load %x[%t] : memref<16xi32>
  %s = tile.block_reduce %v : i32 combine(%p, %q) {
    %r = arith.maxsi %p, %q : i32
    tile.yield %r : i32
  }
  memref.store %s, %out[%c0] : memref<1xi32>
}
"""

LOOP_CARRIED = """
tile.kernel @carried grid [1, 1, 1] block [1, 1, 1] (%x: memref<8xf32>, %out: memref<2xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %a, %b = scf.for %i = %c0 to %c8 step %c1 iter_args(%p = %zero, %q = %one) -> (f32, f32) {
    %v = memref.load %x[%i] : memref<8xf32>
    %s = arith.addf %p, %v : f32
    scf.yield %q, %s : f32, f32
  } {tile.unroll}
  memref.store %a, %out[%c0] : memref<2xf32>
  memref.store %b, %out[%c1] : memref<2xf32>
}
"""

IF_WITH_RESULTS = """
tile.kernel @branch grid [1, 1, 1] block [64, 1, 1] (%x: memref<64xf32>, %out: memref<64xf32>) {
  %t = tile.thread_id x
  %c32 = arith.constant 32 : index
  %v = memref.load %x[%t] : memref<64xf32>
  %low = arith.cmpi ult, %t, %c32 : index
  %r, %flag = scf.if %low -> (f32, i1) {
    %n = arith.negf %v : f32
    %yes = arith.constant true
    scf.yield %n, %yes : f32, i1
  } else {
    %no = arith.constant false
    scf.yield %v, %no : f32, i1
  }
  %w = arith.select %flag, %r, %v : f32
  memref.store %w, %out[%t] : memref<64xf32>
}
"""

ALLOCS = """
tile.kernel @transpose grid [1, 1, 1] block [32, 4, 1]
    (%x: memref<4x32xf32>, %out: memref<32x4xf32>) {
  %tx = tile.thread_id x
  %ty = tile.thread_id y
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %tile = tile.alloc : memref<4x33xf32, 3 : i32>
  %regs = tile.alloc : memref<2xf32, 5 : i32>
  %v = memref.load %x[%ty, %tx] : memref<4x32xf32>
  memref.store %v, %regs[%c0] : memref<2xf32, 5 : i32>
  %w = memref.load %regs[%c0] : memref<2xf32, 5 : i32>
  memref.store %w, %tile[%ty, %tx] : memref<4x33xf32, 3 : i32>
  tile.barrier
  %u = memref.load %tile[%ty, %tx] : memref<4x33xf32, 3 : i32>
  memref.store %u, %regs[%c1] : memref<2xf32, 5 : i32>
  %y = memref.load %regs[%c1] : memref<2xf32, 5 : i32>
  memref.store %y, %out[%tx, %ty] : memref<32x4xf32>
}
"""

CASTS = """
tile.kernel @casts grid [1, 1, 1] block [32, 1, 1]
    (%h: memref<32xf16>, %b: memref<32xbf16>, %out: memref<32xf32>, %ints: memref<32xi32>,
     %hout: memref<32xf16>, %bout: memref<32xbf16>) {
  %t = tile.thread_id x
  %ti = arith.index_cast %t : index to i32
  %back = arith.index_cast %ti : i32 to index
  %f = arith.sitofp %ti : i32 to f32
  %u = arith.uitofp %ti : i32 to f32
  %hv = memref.load %h[%back] : memref<32xf16>
  %he = arith.extf %hv : f16 to f32
  %bv = memref.load %b[%t] : memref<32xbf16>
  %be = arith.extf %bv : bf16 to f32
  %s1 = arith.addf %f, %u : f32
  %s2 = arith.addf %s1, %he : f32
  %s3 = arith.addf %s2, %be : f32
  %i = arith.fptosi %s3 : f32 to i32
  %hi = arith.fptosi %hv : f16 to i32
  %j = arith.addi %i, %hi : i32
  %ht = arith.truncf %s3 : f32 to f16
  %bt = arith.truncf %s3 : f32 to bf16
  %bh = arith.sitofp %ti : i32 to bf16
  %bsum = arith.addf %bt, %bh : bf16
  %hexp = math.exp %ht : f16
  memref.store %s3, %out[%t] : memref<32xf32>
  memref.store %j, %ints[%t] : memref<32xi32>
  memref.store %hexp, %hout[%t] : memref<32xf16>
  memref.store %bsum, %bout[%t] : memref<32xbf16>
}
"""

CMPI = ("eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge")
CMPF = "false oeq ogt oge olt ole one ord ueq ugt uge ult ule une uno true".split()
FLOAT_BINARY = "addf subf mulf divf maximumf minimumf maxnumf minnumf".split()
INT_BINARY = "addi subi muli divui divsi remui remsi andi ori xori maxsi minsi".split()
MATH_UNARY = "exp exp2 log log2 sqrt rsqrt tanh erf absf".split()


def scalar_kernel() -> str:
    """Returns a kernel applying every scalar op the printer knows to loaded values."""
    lines = [
        "%t = tile.thread_id x",
        "%a = memref.load %x[%t] : memref<32xf32>",
        "%b = memref.load %y[%t] : memref<32xf32>",
        "%i = memref.load %n[%t] : memref<32xi32>",
        "%j = arith.constant 7 : i32",
        "%big = arith.constant 4294967296 : i64",
        "%inf = arith.constant 0x7F800000 : f32",
        "%ninf = arith.constant 0xFF800000 : f32",
        "%nan = arith.constant 0x7FC00000 : f32",
        "%tenth = arith.constant 0.1 : f32",
        "%acc0 = arith.addf %a, %inf : f32",
        "%acc1 = arith.addf %acc0, %ninf : f32",
        "%acc2 = arith.addf %acc1, %nan : f32",
        "%acc3 = arith.addf %acc2, %tenth : f32",
        "%neg = arith.negf %acc3 : f32",
        "%fma = math.fma %a, %b, %neg : f32",
        "%pow = math.powf %fma, %b : f32",
        "%k = arith.addi %i, %j : i32",
    ]
    results = ["%pow"]
    for name in FLOAT_BINARY:
        lines.append(f"%{name} = arith.{name} %a, %b : f32")
        results.append(f"%{name}")
    for name in MATH_UNARY:
        lines.append(f"%{name} = math.{name} %a : f32")
        results.append(f"%{name}")
    for name in INT_BINARY:
        lines.append(f"%{name} = arith.{name} %k, %j : i32")
        lines.append(f"%{name}_f = arith.sitofp %{name} : i32 to f32")
        results.append(f"%{name}_f")
    for name in CMPI:
        lines.append(f"%cmpi_{name} = arith.cmpi {name}, %i, %j : i32")
        lines.append(f"%cmpi_{name}_f = arith.select %cmpi_{name}, %a, %b : f32")
        results.append(f"%cmpi_{name}_f")
    for name in CMPF:
        lines.append(f"%cmpf_{name} = arith.cmpf {name}, %a, %b : f32")
        lines.append(f"%cmpf_{name}_f = arith.select %cmpf_{name}, %a, %b : f32")
        results.append(f"%cmpf_{name}_f")
    lines.append("%wide = arith.muli %big, %big : i64")
    total = results[0]
    for k, value in enumerate(results[1:]):
        lines.append(f"%total{k} = arith.addf {total}, {value} : f32")
        total = f"%total{k}"
    lines.append(f"memref.store {total}, %out[%t] : memref<32xf32>")
    body = "\n  ".join(lines)
    return (
        "tile.kernel @scalars grid [1, 1, 1] block [32, 1, 1] (%x: memref<32xf32>, "
        "%y: memref<32xf32>, %n: memref<32xi32>, %out: memref<32xf32>) {\n  " + body + "\n}"
    )


def test_example_module_compiles() -> None:
    module = parse(EXAMPLE.read_text())
    sources = module_sources(module)
    assert set(sources) == {"sm_0", "k"}
    for name, cuda in sources.items():
        compile_cuda(cuda, name, arch="sm_90a")
    text = sources["sm_0"]
    assert (
        'extern "C" __global__ void __launch_bounds__(128) '
        "sm_0(const float* __restrict__ x, float* __restrict__ out)"
    ) in text
    assert "__shared__ float smem[4][33];" in text
    assert "float regs[4];" in text
    assert "__syncthreads();" in text
    assert "__shfl_xor_sync(0xffffffff, s, offset, 16)" in text
    assert "cuda_bf16" not in text  # the prelude holds only what the kernel uses


EVICT_FIRST = """
tile.kernel @streamed grid [8, 1, 1] block [32, 1, 1]
    (%w: memref<8x128xf32>, %io: memref<8x128xf32>, %out: memref<8x128xf32>) {
  %row = tile.block_id x
  %lane = tile.thread_id x
  %c4 = arith.constant 4 : index
  %col = arith.muli %lane, %c4 : index
  %a, %b, %c, %d = tile.vload %w[%row, %col] evict_first : memref<8x128xf32> -> f32, f32, f32, f32
  %e, %f, %g, %h = tile.vload %io[%row, %col] evict_first : memref<8x128xf32> -> f32, f32, f32, f32
  %s = arith.addf %a, %e : f32
  tile.vstore (%s, %f, %g, %h : f32, f32, f32, f32), %io[%row, %col] : memref<8x128xf32>
  tile.vstore (%s, %b, %c, %d : f32, f32, f32, f32), %out[%row, %col] : memref<8x128xf32>
}
"""


def test_evict_first_loads_only_buffers_the_kernel_only_reads() -> None:
    """A `tile.vload evict_first` prints as the L2 evict-first load (inline PTX with no memory
    clobber) from a buffer the kernel only reads, and as the plain load from one it also
    writes, so that the load is never ordered against a store to its buffer."""
    text = source(EVICT_FIRST)
    assert "ld.global.L2::cache_hint.v4.u32" in text
    assert "tinyopt_ld_16_evict_first(&vec, &w[row * 128 + col]);" in text
    assert "*reinterpret_cast<const tinyopt_vec<float, 4>*>(&io[row * 128 + col]);" in text


def test_evict_first_needs_a_128_bit_global_load() -> None:
    narrow = EVICT_FIRST.replace(
        "%a, %b, %c, %d = tile.vload %w[%row, %col] evict_first : memref<8x128xf32> -> f32, f32, "
        "f32, f32",
        "%a, %b = tile.vload %w[%row, %col] evict_first : memref<8x128xf32> -> f32, f32\n"
        "  %c, %d = tile.vload %w[%row, %col] : memref<8x128xf32> -> f32, f32",
    )
    with pytest.raises(VerifyException, match="evict_first needs a 128-bit load from global"):
        parse(narrow)


def test_vector_accesses_of_f32_and_bf16() -> None:
    text = source(VECTORS)
    assert "#include <cuda_bf16.h>" in text
    assert "#include <cuda_fp16.h>" not in text
    assert "template <typename T, int N> struct alignas(sizeof(T) * N) tinyopt_vec" in text
    assert (
        "tinyopt_vec<float, 4> vec = "
        "*reinterpret_cast<const tinyopt_vec<float, 4>*>(&x[row * 128 + col]);"
    ) in text
    assert "float a = vec.v[0];" in text
    assert "tinyopt_vec<__nv_bfloat16, 8>" in text
    assert "float e0 = __bfloat162float(h0);" in text
    assert "__nv_bfloat16 t0 = __float2bfloat16_rn(sum);" in text
    assert (
        "*reinterpret_cast<tinyopt_vec<float, 4>*>(&out[row * 128 + col]) = "
        "tinyopt_vec<float, 4>{{sum, b, c, d}};"
    ) in text
    assert "const __nv_bfloat16* __restrict__ h," in text
    assert "__nv_bfloat16* __restrict__ hout)" in text


def test_warp_reduce_of_a_pair_online_softmax() -> None:
    text = source(ONLINE_SOFTMAX)
    assert "float m = v;" in text and "float l = 1.0f;" in text
    assert "for (int offset = 16; offset > 0; offset >>= 1) {" in text
    assert "float m2 = __shfl_xor_sync(0xffffffff, m, offset, 32);" in text
    assert "float l2 = __shfl_xor_sync(0xffffffff, l, offset, 32);" in text
    assert "float e1 = expf(d1);" in text
    assert "m = mx;" in text and "l = total;" in text
    assert "if (first) {" in text


WARP_UNIFORM = """
tile.kernel @by_warpgroup grid [1, 1, 1] block [256, 1, 1] (%out: memref<2xi32>) {
  %t = tile.thread_id x
  %c128 = arith.constant 128 : index
  %g = arith.divui %t, %c128 : index
  %u = tile.warp_uniform %g
  %c0 = arith.constant 0 : index
  %local = arith.remui %t, %c128 : index
  %first = arith.cmpi eq, %local, %c0 : index
  scf.if %first {
    %v = arith.index_cast %u : index to i32
    memref.store %v, %out[%u] : memref<2xi32>
  }
}
"""


def test_warp_uniform_is_lane_0s_value() -> None:
    text = source(WARP_UNIFORM)
    assert "int u = __shfl_sync(0xffffffff, g, 0);" in text
    assert "out[u] = v;" in text


def test_block_reduce_in_a_loop_over_a_2d_block() -> None:
    text = source(BLOCK_REDUCE_IN_LOOP)
    tid = "((threadIdx.z * 4 + threadIdx.y) * 32 + threadIdx.x)"
    assert "__shared__ float s_partials[4];" in text
    assert f"if ({tid} % 32 == 0) {{" in text
    assert f"s_partials[{tid} / 32] = s;" in text
    assert "s = s_partials[0];" in text
    assert "for (int warp = 1; warp < 4; ++warp) {" in text
    assert "float q = s_partials[warp];" in text
    # Inside a loop, the partials are reused by the next iteration: a second barrier guards them.
    assert text.count("__syncthreads();") == 2


def test_block_reduce_of_one_partial_warp_needs_no_shared_memory() -> None:
    text = source(SMALL_BLOCK_REDUCE)
    assert "__shfl_xor_sync(0xffffffff, s, offset, 16)" in text
    assert "int r = max(s, q);" in text
    assert "__shared__" not in text and "__syncthreads" not in text


def test_block_reduce_needs_whole_warps() -> None:
    module = parse(SMALL_BLOCK_REDUCE.replace("block [16, 1, 1]", "block [48, 1, 1]"))
    with pytest.raises(DiagnosticException, match="over 48 threads"):
        module_sources(module)


def test_for_with_iter_args_and_unroll() -> None:
    text = source(LOOP_CARRIED)
    assert "float a = 0.0f;\n    float b = 1.0f;\n    #pragma unroll\n" in text
    assert "for (int i = 0; i < 8; i += 1) {" in text
    assert "float s = a + v;" in text
    # The yield swaps the carried values: a reads b before b is written.
    assert "float tmp = b;" in text and "a = tmp;" in text
    assert "out[0] = a;" in text and "out[1] = b;" in text


def test_if_with_results_and_else() -> None:
    text = source(IF_WITH_RESULTS)
    assert "float r;\n    bool flag;\n    if (low) {" in text
    assert "bool low = (unsigned)t < (unsigned)32;" in text
    assert "float n = -(v);" in text
    then, otherwise = "r = n;\n        flag = true;", "r = v;\n        flag = false;"
    assert f"{then}\n    }} else {{\n        {otherwise}\n    }}" in text
    assert "float w = flag ? r : v;" in text


def test_shared_and_register_allocs() -> None:
    text = source(ALLOCS)
    assert "__shared__ float tile[4][33];" in text
    assert "float regs[2];" in text
    assert "regs[0] = v;" in text and "tile[ty][tx] = w;" in text
    assert "out[tx * 4 + ty] = y;" in text
    assert "__syncthreads();" in text


def test_casts() -> None:
    text = source(CASTS)
    assert "#include <cuda_fp16.h>" in text and "#include <cuda_bf16.h>" in text
    assert "int ti = (int)t;" in text and "int back = (int)ti;" in text
    assert "float f = (float)ti;" in text
    assert "float u = (float)(unsigned)ti;" in text
    assert "float he = __half2float(hv);" in text
    assert "int i = (int)s3;" in text and "int hi = (int)__half2float(hv);" in text
    assert "__half ht = __float2half_rn(s3);" in text
    assert "__nv_bfloat16 bh = __float2bfloat16_rn((float)ti);" in text
    assert "__half hexp = __float2half_rn(expf(__half2float(ht)));" in text


def test_every_scalar_op() -> None:
    text = source(scalar_kernel())
    assert "#define INFINITY __int_as_float(0x7f800000)" in text
    assert "a + INFINITY" in text and "acc0 + -INFINITY" in text
    assert "acc1 + __int_as_float(0x7fc00000)" in text and "acc2 + 0.1f" in text
    assert "float fma = fmaf(a, b, neg);" in text
    assert "float maximumf = tinyopt_fmax_nan(a, b);" in text  # NaN-propagating
    assert "float maxnumf = fmaxf(a, b);" in text
    assert "int divui = (int)((unsigned)k / (unsigned)7);" in text
    assert "int remsi = k % 7;" in text
    assert "long long wide = 4294967296LL * 4294967296LL;" in text
    assert "bool cmpi_uge = (unsigned)i >= (unsigned)7;" in text
    assert "bool cmpf_one = (a < b || a > b);" in text
    assert "bool cmpf_uno = (a != a || b != b);" in text
    assert "bool cmpf_ult = !(a >= b);" in text
    assert "float rsqrt = rsqrtf(a);" in text


@pytest.mark.parametrize(
    ("value", "literal"),
    [
        (1.0, "1.0f"),
        (0.1, "0.1f"),
        (-0.0, "-0.0f"),
        (1e-6, "1e-06f"),
        (3.4028234663852886e38, "3.4028235e+38f"),
        (1.401298464324817e-45, "1e-45f"),
        (-math.inf, "-INFINITY"),
        (math.inf, "INFINITY"),
        (math.nan, "__int_as_float(0x7fc00000)"),
    ],
)
def test_float_literals_read_back_exactly(value: float, literal: str) -> None:
    assert float_literal(value) == literal


def test_names_shared_or_reserved_become_numbered() -> None:
    text = source(
        """
tile.kernel @names grid [1, 1, 1] block [32, 1, 1] (%x: memref<32xf32>, %for: memref<32xf32>) {
  %c = arith.constant true
  %t = tile.thread_id x
  %v = memref.load %x[%t] : memref<32xf32>
  %v_1 = arith.addf %v, %v : f32
  %w = scf.if %c -> (f32) {
    %a.b = arith.mulf %v_1, %v_1 : f32
    scf.yield %a.b : f32
  } else {
    scf.yield %v_1 : f32
  }
  memref.store %w, %for[%t] : memref<32xf32>
}
"""
    )
    assert "float* __restrict__ v0)" in text  # `for` is a C keyword
    assert "float v1 = x[t];" in text  # %v and %v_1 both have the hint `v`
    assert "float v2 = v1 + v1;" in text
    assert "float a_b = v2 * v2;" in text


def test_large_buffers_use_64_bit_indices() -> None:
    text = source(
        """
tile.kernel @big grid [1, 1, 1] block [32, 1, 1] (%x: memref<65536x32768xf32>) {
  %b = tile.block_id x
  %t = tile.thread_id x
  %z = arith.constant 0.0 : f32
  memref.store %z, %x[%b, %t] : memref<65536x32768xf32>
}
"""
    )
    assert "long long b = (long long)blockIdx.x;" in text
    assert "x[b * 32768 + t] = 0.0f;" in text


UNKNOWN_OP = """
tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<32xf32>) {
  "foo.bar"() : () -> ()
}
"""


def test_unknown_op_is_a_diagnostic_naming_it() -> None:
    message = r"to-cuda: cannot print 'foo.bar' \(in tile.kernel @k\)"
    with pytest.raises(DiagnosticException, match=message):
        module_sources(parse(UNKNOWN_OP))


def test_unsupported_type_is_a_diagnostic_naming_it() -> None:
    module = parse(UNKNOWN_OP.replace("xf32", "xf64").replace('"foo.bar"() : () -> ()', ""))
    with pytest.raises(DiagnosticException, match=r"cannot print type f64 \(in tile.kernel @k\)"):
        module_sources(module)


HOST = """
func.func @host(%x: memref<64x128xf32>) -> memref<64x128xf32> {
  %o = memref.alloc() : memref<64x128xf32>
  loop.launch @sm_0(%x, %o) : memref<64x128xf32>, memref<64x128xf32>
  func.return %o : memref<64x128xf32>
}
"""


def test_pass_replaces_kernels_and_keeps_launches() -> None:
    text = EXAMPLE.read_text().rstrip().removesuffix("}") + HOST + "}"
    module = parse(text)
    first = next(op for op in module.ops if isinstance(op, tile.KernelOp))
    expected = kernel_source(first, pdl=True)  # the pass's default: pdl=1
    ToCudaPass().apply(Context(), module)
    module.verify()
    kernels = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    assert [k.sym_name.data for k in kernels] == ["sm_0", "k"]
    sm = kernels[0]
    assert sm.source.data == expected
    assert tuple(sm.grid.get_values()) == (64, 1, 1)
    assert tuple(sm.block.get_values()) == (128, 1, 1)
    assert sm.smem.value.data == 0
    assert "loop.launch @sm_0(%x, %o)" in str(module)
    assert module_sources(module)["sm_0"] == expected


def test_pass_leaves_the_module_alone_on_failure() -> None:
    module = parse("builtin.module {" + VECTORS + UNKNOWN_OP + "}")
    with pytest.raises(DiagnosticException, match="'foo.bar'"):
        ToCudaPass().apply(Context(), module)
    assert [op.name for op in module.ops] == ["tile.kernel", "tile.kernel"]


def test_pass_rejects_loop_kernels() -> None:
    module = parse(
        "loop.kernel @copy(%x: memref<4xf32>) {\n"
        "  loop.parallel (%i) in [4] {\n"
        "    %v = memref.load %x[%i] : memref<4xf32>\n"
        "    memref.store %v, %x[%i] : memref<4xf32>\n"
        "  }\n"
        "}"
    )
    with pytest.raises(DiagnosticException, match="cannot print 'loop.kernel' @copy"):
        ToCudaPass().apply(Context(), module)


PDL_PROGRAMS = {
    "rmsnorm": (rmsnorm((64, 4096)), "fuse,tile,to-cuda"),
    "swiglu_wgmma": (swiglu(256, 128, 256), "fuse,tile{mma=wgmma},to-cuda"),
    "attention": (
        (EXAMPLES / "attention.mlir").read_text(),
        "decompose,fuse,flash-attention,tile,to-cuda",
    ),
}
"""Programs whose kernels cover the schedules: row reduction, TMA + wgmma GEMMs with dynamic
shared memory and tensor maps, flash attention."""


def body_statements(cuda: str) -> list[str]:
    """Returns the lines of a kernel's body after its `__global__` line, without comments and
    preprocessor lines (the architecture guard of the `griddepcontrol` statements)."""
    lines = cuda.splitlines()
    start = next(i for i, line in enumerate(lines) if "__global__" in line)
    return [s for line in lines[start + 1 :] if not (s := line.strip()).startswith(("//", "#"))]


@pytest.mark.parametrize("pdl", [0, 1])
@pytest.mark.parametrize("program", list(PDL_PROGRAMS))
def test_pdl_opens_every_kernel_with_griddepcontrol_wait(program: str, pdl: int) -> None:
    text, pipeline = PDL_PROGRAMS[program]
    _, module = lower(text, pipeline.replace("to-cuda", f"to-cuda{{pdl={pdl}}}"))
    kernels = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    assert kernels
    for kernel in kernels:
        cuda = kernel.source.data
        assert (kernel.pdl is not None) == bool(pdl)
        if pdl:
            assert body_statements(cuda)[:2] == [
                'asm volatile("griddepcontrol.wait;" ::: "memory");',
                'asm volatile("griddepcontrol.launch_dependents;" ::: "memory");',
            ]
            assert cuda.count("griddepcontrol") == 2
        else:
            assert "griddepcontrol" not in cuda
    compiled = compile_module(module, arch="sm_90a")
    assert {name: k.pdl for name, k in compiled.kernels.items()} == {
        k.sym_name.data: bool(pdl) for k in kernels
    }


@pytest.mark.parametrize("prefetch", ["on", "auto", "off"])
def test_gemv_asks_l2_for_its_weight_rows_before_the_grid_dependency_wait(prefetch: str) -> None:
    """With `prefetch=on` the row rule's M = 1 GEMV (bf16, K = 4096: 8 KB rows) opens with
    lane 0's bulk L2 prefetch of its block's weight row, then waits for the kernel before it;
    `auto` and `off` wait at the start; either way no load comes before the wait."""
    pipeline = f"fuse,tile{{prefetch={prefetch}}},to-cuda{{pdl=1}}"
    _, module = lower(skinny(1, 1024, 4096, "bf16"), pipeline)
    (kernel,) = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    body = body_statements(kernel.source.data)
    wait = body.index('asm volatile("griddepcontrol.wait;" ::: "memory");')
    prefetches = [i for i, s in enumerate(body) if "cp.async.bulk.prefetch.L2.global" in s]
    loads = [i for i, s in enumerate(body) if "tinyopt_ld_16" in s or "reinterpret_cast<const" in s]
    assert loads and min(loads) > wait
    if prefetch != "on":
        assert wait == 0 and not prefetches
    else:
        assert len(prefetches) == 1 and prefetches[0] < wait
        assert '"r"(8192u)' in body[prefetches[0]]
    compile_module(module, arch="sm_90a")


def test_a_load_before_the_grid_dependency_wait_is_refused() -> None:
    """The printer refuses a kernel whose global loads precede its wait (the wait moved to the
    end of the body here): under `pdl` they could read what the kernel before has not written."""
    program, module = lower(skinny(1, 1024, 4096, "bf16"), "fuse,tile{prefetch=on}")
    (kernel,) = [op for op in module.ops if isinstance(op, tile.KernelOp)]
    (wait,) = [op for op in kernel.body.block.ops if isinstance(op, tile.GridDependencyWaitOp)]
    wait.detach()
    kernel.body.block.add_op(wait)
    kernel_source(kernel)  # without pdl the wait prints nothing: nothing to refuse
    with pytest.raises(DiagnosticException, match="before the kernel's grid dependency wait"):
        kernel_source(kernel, pdl=True)


def test_pdl_must_be_0_or_1() -> None:
    module = parse("builtin.module {" + VECTORS + "}")
    with pytest.raises(DiagnosticException, match="pdl must be 0 or 1, got 2"):
        ToCudaPass(pdl=2).apply(Context(), module)


def run(text: str, *arrays: np.ndarray) -> None:
    """Compiles the only kernel of a module and runs it on numpy arrays (updated in place)."""
    module = parse(text)
    kernel = next(op for op in module.ops if isinstance(op, tile.KernelOp))
    name = kernel.sym_name.data
    cubin = compile_cuda(kernel_source(kernel), name)
    Kernel(cubin, name, kernel.grid_size, kernel.block_size)(*arrays)


@requires_gpu
def test_online_softmax_pair_on_gpu() -> None:
    x = np.random.default_rng(0).standard_normal((4, 32)).astype(np.float32)
    out = np.zeros((4, 2), np.float32)
    run(ONLINE_SOFTMAX, x, out)
    m = x.max(axis=1)
    np.testing.assert_allclose(out[:, 0], m)
    np.testing.assert_allclose(out[:, 1], np.exp(x - m[:, None]).sum(axis=1), rtol=1e-5)


@requires_gpu
def test_block_reduce_in_a_loop_on_gpu() -> None:
    x = np.random.default_rng(1).standard_normal((2, 3, 128)).astype(np.float32)
    out = np.zeros((2, 3), np.float32)
    run(BLOCK_REDUCE_IN_LOOP, x, out)
    np.testing.assert_allclose(out, x.sum(axis=2), rtol=1e-5, atol=1e-5)


@requires_gpu
def test_carried_swap_and_branches_on_gpu() -> None:
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(2, np.float32)
    run(LOOP_CARRIED, x, out)
    a, b = 0.0, 1.0
    for v in x:
        a, b = b, a + v
    np.testing.assert_array_equal(out, [a, b])
    y = np.random.default_rng(2).standard_normal(64).astype(np.float32)
    z = np.zeros(64, np.float32)
    run(IF_WITH_RESULTS, y, z)
    np.testing.assert_array_equal(z, np.where(np.arange(64) < 32, -y, y))
