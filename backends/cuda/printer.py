"""Print a `tile.kernel` as one readable CUDA C translation unit.

`CudaPrinter` follows the style of xDSL's WGSL printer: one `functools.singledispatchmethod`
`print_op` with a small overload per op class (or per family of ops sharing a table), no
string templates of whole kernels. The prelude holds only what the kernel uses, as read from
its IR: the fp16/bf16 headers, the `tinyopt_vec` type of vector accesses, `INFINITY`, and
the inline-PTX helpers of tensor-core ops (`ldmatrix`, `mma.sync`).
"""

import functools
import math
import operator
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from io import StringIO
from typing import IO

import numpy as np
from xdsl.dialects import arith, llvm, memref, scf
from xdsl.dialects import math as fmath
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float8E4M3FNType,
    Float8E5M2Type,
    Float16Type,
    Float32Type,
    FloatAttr,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    ModuleOp,
    UnregisteredOp,
)
from xdsl.ir import Attribute, BlockArgument, Operation, SSAValue
from xdsl.utils.base_printer import BasePrinter
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.backends.cuda import hopper
from tinyopt.dialects import tile
from tinyopt.dialects.loop import SCALAR_TYPES
from tinyopt.passes.tile.limits import index_range

VEC_TYPE = "template <typename T, int N> struct alignas(sizeof(T) * N) tinyopt_vec { T v[N]; };"
"""The vector type of `tile.vload` / `tile.vstore`: N elements in one aligned access."""

EVICT_FIRST_LOAD = "tinyopt_ld_16_evict_first"
EVICT_FIRST_LOAD_HELPER = "\n".join(
    (
        f"__device__ __forceinline__ void {EVICT_FIRST_LOAD}(void* dst, const void* src) {{",
        "    unsigned long long policy;",
        '    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));',
        "    uint4 v;",
        '    asm("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"',
        '        : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(src), "l"(policy));',
        "    *reinterpret_cast<uint4*>(dst) = v;",
        "}",
    )
)
"""The 128-bit global load of a `tile.vload evict_first`: an L2 evict-first cache policy on
the load (not `volatile`: the compiler may schedule it as any load of read-only data)."""

INFINITY_MACRO = ("#ifndef INFINITY", "#define INFINITY __int_as_float(0x7f800000)", "#endif")
"""NVRTC has no <math.h>, so `INFINITY` is defined from its bit pattern when a kernel needs it."""


def ldmatrix_helper(trans: bool) -> str:
    """Returns the device function of `tile.ldmatrix`: one `ldmatrix ... .x4` into 4 ints."""
    name, suffix = ("tinyopt_ldmatrix_x4_trans", ".trans") if trans else ("tinyopt_ldmatrix_x4", "")
    return "\n".join(
        (
            f"__device__ __forceinline__ void {name}(int& r0, int& r1, int& r2, int& r3, "
            "const void* row) {",
            "    unsigned address = (unsigned)__cvta_generic_to_shared(row);",
            f'    asm volatile("ldmatrix.sync.aligned.m8n8.x4{suffix}.shared.b16 '
            '{%0, %1, %2, %3}, [%4];"',
            '                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(address));',
            "}",
        )
    )


def mma_name(element: str) -> str:
    """Returns the helper name of `tile.mma_sync` on `element` (f32 elements are TF32)."""
    return "tinyopt_mma_tf32" if element == "f32" else f"tinyopt_mma_{element}"


def mma_helper(element: str) -> str:
    """Returns the device function of `tile.mma_sync` on `element` (`f16` or `bf16`) inputs:
    m16n8k16; or, for `f32`, the m16n8k8 on TF32 inputs."""
    shape, inputs = ("m16n8k8", "tf32") if element == "f32" else ("m16n8k16", element)
    return "\n".join(
        (
            f"__device__ __forceinline__ void {mma_name(element)}(float& d0, float& d1, "
            "float& d2, float& d3, int a0, int a1, int a2, int a3, int b0, int b1, float c0, "
            "float c1, float c2, float c3) {",
            f'    asm volatile("mma.sync.aligned.{shape}.row.col.f32.{inputs}.{inputs}.f32 "',
            '                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "',
            '                 "{%10, %11, %12, %13};"',
            '                 : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)',
            '                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1),',
            '                   "f"(c0), "f"(c1), "f"(c2), "f"(c3));',
            "}",
        )
    )


EXP2_APPROX = "\n".join(
    (
        "__device__ __forceinline__ float tinyopt_exp2_approx(float x) {",
        "    float y;",
        '    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));',
        "    return y;",
        "}",
    )
)
"""`math.exp2` with `fastmath<afn>`: one MUFU.EX2, subnormal results flushed to 0 (`exp2f`
adds a range fix-up of four more instructions around it)."""

_APPROXIMATE_CALLS: dict[type[Operation], str] = {
    fmath.Exp2Op: "tinyopt_exp2_approx",
    fmath.ExpOp: "__expf",
    arith.DivfOp: "__fdividef",
}
"""What an f32 op with `fastmath<afn>` prints as: `exp2` as EXP2_APPROX; `exp` as CUDA's
`__expf` (`ex2.approx` of x·log2 e, 2 + 1.2·|x| ulp) and `/` as `__fdividef` (`rcp.approx`
then a multiply, 2 ulp; 0 for divisors past 2^126) instead of the accurate `expf` and IEEE
division, about 25 instructions per element less for a sigmoid."""


def _approximate(op: Operation) -> bool:
    return (
        type(op) in _APPROXIMATE_CALLS
        and isinstance(op.results[0].type, Float32Type)
        and arith.FastMathFlag.APPROX_FUNC in op.fastmath.data  # type: ignore[attr-defined]
    )


def cp_async_helper(nbytes: int) -> str:
    """Returns the device function of an `nbytes` `tile.cp_async`: global → shared without
    registers; `valid` false copies nothing and zero-fills (source size 0)."""
    cache = "cg" if nbytes == 16 else "ca"  # .cg (L2 only) exists for 16-byte copies alone
    return "\n".join(
        (
            f"__device__ __forceinline__ void tinyopt_cp_async_{nbytes}(void* dst, "
            "const void* src, bool valid) {",
            f'    asm volatile("cp.async.{cache}.shared.global [%0], [%1], {nbytes}, %2;"',
            '                 :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src),',
            f'                    "r"(valid ? {nbytes} : 0) : "memory");',
            "}",
        )
    )


def pack_helper(element: str) -> str:
    """Returns the device functions of `tile.pack` on `element` (`f16` or `bf16`): two floats
    rounded to nearest even, or two values of `element` as they are, packed into one 32-bit
    register, the first in the low half."""
    half, pair, convert, join = {
        "f16": ("__half", "__half2", "__floats2half2_rn", "__halves2half2"),
        "bf16": ("__nv_bfloat16", "__nv_bfloat162", "__floats2bfloat162_rn", "__halves2bfloat162"),
    }[element]
    return "\n".join(
        (
            f"__device__ __forceinline__ int tinyopt_pack_{element}(float lo, float hi) {{",
            f"    {pair} pair = {convert}(lo, hi);",
            "    return *reinterpret_cast<int*>(&pair);",
            "}",
            f"__device__ __forceinline__ int tinyopt_pack_{element}({half} lo, {half} hi) {{",
            f"    {pair} pair = {join}(lo, hi);",
            "    return *reinterpret_cast<int*>(&pair);",
            "}",
        )
    )


PDL_STATEMENTS = (
    "// programmatic dependent launch: wait for the previous kernel to finish and its writes",
    "// to be visible (before any global access but L2 prefetches: its buffers may be reused",
    "// here), then let the next kernel launch; both are no-ops when launched without it",
    "#if __CUDA_ARCH__ >= 900",
    'asm volatile("griddepcontrol.wait;" ::: "memory");',
    'asm volatile("griddepcontrol.launch_dependents;" ::: "memory");',
    "#endif",
)
"""The statements a kernel printed with `pdl` opens with (PTX `griddepcontrol`, sm_90), or
prints at its `tile.grid_dependency_wait` after a prologue of L2 prefetches. Every block waits
there, so nothing of the kernel reads or writes global memory before the previous grid has
completed; every block triggers right after, so the next kernel is launched once all of this
one's blocks have started, and its blocks take only the SMs this grid leaves free."""

FULL_MASK = "0xffffffff"
WARP = 32

_INFIX: dict[type[Operation], str] = {
    arith.AddfOp: "+",
    arith.SubfOp: "-",
    arith.MulfOp: "*",
    arith.DivfOp: "/",
    arith.AddiOp: "+",
    arith.SubiOp: "-",
    arith.MuliOp: "*",
    arith.DivSIOp: "/",
    arith.RemSIOp: "%",
    arith.AndIOp: "&",
    arith.OrIOp: "|",
    arith.XOrIOp: "^",
}
"""Binary ops printed as a C operator between their operands (fp16/bf16 have operators too)."""

_UNSIGNED_INFIX: dict[type[Operation], str] = {arith.DivUIOp: "/", arith.RemUIOp: "%"}
"""Binary ops printed as a C operator on the operands reinterpreted as unsigned."""

_INT_CALLS: dict[type[Operation], str] = {arith.MaxSIOp: "max", arith.MinSIOp: "min"}
"""Signed integer ops printed as a call of CUDA's overloaded device `max` / `min`."""


def _nan_propagating(op: str) -> str:
    return "\n".join(
        (
            f"__device__ __forceinline__ float tinyopt_f{op}_nan(float a, float b) {{",
            "    float d;",
            f'    asm("{op}.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));',
            "    return d;",
            "}",
        )
    )


FP8_CTYPES: dict[type[Attribute], str] = {
    Float8E4M3FNType: "__nv_fp8_e4m3",
    Float8E5M2Type: "__nv_fp8_e5m2",
}
"""The C types of the 8-bit floats (cuda_fp8.h: one byte, read as `(float)x`)."""

FP8_HELPERS = (
    "#include <cuda_fp8.h>",
    "// f32 to 8-bit floats as torch converts: e4m3fn saturates (infinity too), e5m2 overflows",
    "// to infinity; to nearest, ties to even.",
    "__device__ __forceinline__ __nv_fp8_e4m3 tinyopt_to_e4m3(float x) {",
    "    __nv_fp8_e4m3 r;",
    "    r.__x = __nv_cvt_float_to_fp8(isinf(x) ? copysignf(448.0f, x) : x, __NV_SATFINITE,"
    " __NV_E4M3);",
    "    return r;",
    "}",
    "__device__ __forceinline__ __nv_fp8_e5m2 tinyopt_to_e5m2(float x) {",
    "    __nv_fp8_e5m2 r;",
    "    r.__x = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2);",
    "    return r;",
    "}",
)
"""The conversions `from_float` prints for the 8-bit floats (tinyopt.backends.fp8 is the
reference executors' side of the same rounding)."""

NAN_PROPAGATING: dict[type[Operation], tuple[str, str]] = {
    arith.MaximumfOp: ("tinyopt_fmax_nan", _nan_propagating("max")),
    arith.MinimumfOp: ("tinyopt_fmin_nan", _nan_propagating("min")),
}
"""`arith.maximumf` / `minimumf` (torch's maximum, amax, relu, clamp: a NaN operand gives NaN)
as PTX `max.NaN` / `min.NaN`; CUDA's `fmaxf` / `fminf` return the other operand, which is
`arith.maxnumf` / `minnumf`. Printed as `fmaxf`, a NaN input vanished from a max reduction,
a ReLU or a clamp: a silent wrong answer the loop IR executor did not share."""

_FLOAT_CALLS: dict[type[Operation], str] = {
    arith.MaxnumfOp: "fmaxf",
    arith.MinnumfOp: "fminf",
    fmath.ExpOp: "expf",
    fmath.Exp2Op: "exp2f",
    fmath.LogOp: "logf",
    fmath.Log2Op: "log2f",
    fmath.SqrtOp: "sqrtf",
    fmath.RsqrtOp: "rsqrtf",
    fmath.TanhOp: "tanhf",
    fmath.ErfOp: "erff",
    fmath.CosOp: "cosf",
    fmath.SinOp: "sinf",
    fmath.Log1pOp: "log1pf",
    fmath.ExpM1Op: "expm1f",
    fmath.FloorOp: "floorf",
    fmath.CeilOp: "ceilf",
    fmath.RoundEvenOp: "rintf",
    fmath.TruncOp: "truncf",
    fmath.AbsFOp: "fabsf",
    fmath.PowFOp: "powf",
    fmath.Atan2Op: "atan2f",
    llvm.FRemOp: "fmodf",
    fmath.CopySignOp: "copysignf",
    fmath.FmaOp: "fmaf",
}
"""Float ops printed as a call of a CUDA f32 math function (fp16/bf16 go through f32)."""

_STATEMENTS: dict[type[Operation], str] = {
    tile.BarrierOp: "__syncthreads();",
    tile.ClusterSyncOp: "tinyopt_cluster_sync();",
    tile.WarpBarrierOp: "__syncwarp();",
    tile.ThreadFenceOp: "__threadfence();",
    tile.FenceProxyAsyncOp: 'asm volatile("fence.proxy.async.shared::cta;" ::: "memory");',
    tile.FenceMbarrierInitOp: "tinyopt_fence_mbarrier_init();",
    tile.CpAsyncCommitOp: 'asm volatile("cp.async.commit_group;" ::: "memory");',
    tile.BulkCommitOp: 'asm volatile("cp.async.bulk.commit_group;" ::: "memory");',
    tile.WgmmaFenceOp: 'asm volatile("wgmma.fence.sync.aligned;" ::: "memory");',
    tile.WgmmaCommitOp: 'asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");',
}
"""Ops printed as one fixed statement."""

_CMPI = ("==", "!=", "<", "<=", ">", ">=", "<", "<=", ">", ">=")
"""C operators of `arith.cmpi` predicates eq ne slt sle sgt sge ult ule ugt uge (in order)."""

_CMPF = (
    "false",
    "{a} == {b}",
    "{a} > {b}",
    "{a} >= {b}",
    "{a} < {b}",
    "{a} <= {b}",
    "({a} < {b} || {a} > {b})",
    "({a} == {a} && {b} == {b})",
    "!({a} < {b} || {a} > {b})",
    "!({a} <= {b})",
    "!({a} < {b})",
    "!({a} >= {b})",
    "!({a} > {b})",
    "{a} != {b}",
    "({a} != {a} || {b} != {b})",
    "true",
)
"""C expressions of `arith.cmpf` predicates false oeq ogt oge olt ole one ord ueq ugt uge ult
ule une uno true (in order). C's `<` etc. are false on NaN (ordered) and `!=` is true on NaN
(unordered), so each unordered predicate is the negation of the opposite ordered one."""

_UNSIGNED = {"int": "unsigned", "long long": "unsigned long long", "bool": "bool"}

_RESERVED = (
    frozenset(
        """auto bool break case char const continue default do double else enum extern false float
    for goto if inline int long register restrict return short signed sizeof static struct switch
    template this true typedef union unsigned void volatile while alignas alignof asm catch class
    constexpr delete explicit friend mutable namespace new nullptr operator private protected
    public reinterpret_cast static_cast const_cast dynamic_cast throw try typeid typename using
    virtual decltype noexcept static_assert thread_local export concept requires and and_eq
    bitand bitor compl not not_eq or or_eq xor xor_eq threadIdx blockIdx blockDim gridDim
    warpSize max min INFINITY tinyopt_vec tinyopt_ldmatrix_x4 tinyopt_ldmatrix_x4_trans
    tinyopt_mma_f16 tinyopt_mma_bf16 tinyopt_mma_tf32 tinyopt_cp_async_4 tinyopt_cp_async_8
    tinyopt_cp_async_16 tinyopt_ld_16_evict_first""".split()
    )
    | frozenset(_FLOAT_CALLS.values())
    | frozenset(name for name, _ in NAN_PROPAGATING.values())
    | frozenset(f"tinyopt_to_{c.removeprefix('__nv_fp8_')}" for c in FP8_CTYPES.values())
    | frozenset(hopper.HELPER_NAMES)
)
"""Names a local must not take: C++ keywords, CUDA built-ins, and the functions we call."""


def _any_of(classes: Iterable[type[Operation]]) -> object:
    """Returns the union of op classes, so one overload serves every op of a table."""
    return functools.reduce(operator.or_, classes)


def _to_f32(value: float | str) -> np.float32:
    """Rounds to the nearest f32; values past the largest f32 round to infinity, silently."""
    with np.errstate(over="ignore"):
        return np.float32(value)


def float_literal(value: float) -> str:
    """Returns a C expression for the f32 nearest `value` that reads back exactly.

    Finite values get the shortest decimal that rounds to the same f32 (9 digits always do);
    infinities are `INFINITY` / `-INFINITY` and NaNs keep their bits via `__int_as_float`.
    """
    single = _to_f32(value)
    if np.isnan(single):
        return f"__int_as_float(0x{int(single.view(np.uint32)):08x})"
    if np.isinf(single):
        return "INFINITY" if single > 0 else "-INFINITY"
    text = next(t for d in range(1, 10) if _to_f32(t := f"{float(single):.{d}g}") == single)
    if "." not in text and "e" not in text:
        text += ".0"
    return text + "f"


def _sanitize(hint: str) -> str:
    """Turns an SSA name hint into a C identifier (it may still be a reserved word)."""
    name = re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9_]", "_", hint))
    return name if name[0].isalpha() else "v" + name


def _values(kernel: tile.KernelOp, ops: Iterable[Operation] | None = None) -> Iterator[SSAValue]:
    """Yields every SSA value of the kernel: block arguments and op results, nested included
    (`ops`: the kernel's ops in walk order, where the caller has them)."""
    for op in kernel.walk() if ops is None else ops:
        for region in op.regions:
            for block in region.blocks:
                yield from block.args
        yield from op.results


def _unique_hints(
    kernel: tile.KernelOp, values: Iterable[SSAValue] | None = None
) -> dict[SSAValue, str]:
    """Maps each value whose sanitized name hint no other value shares to that name (`values`:
    the kernel's, where the caller has them)."""
    values = _values(kernel) if values is None else values
    names = {v: _sanitize(v.name_hint) for v in values if v.name_hint}
    counts = Counter(names.values())
    taken = _RESERVED | {kernel.sym_name.data}
    return {v: n for v, n in names.items() if counts[n] == 1 and n not in taken}


def _types(kernel: tile.KernelOp, values: Iterable[SSAValue] | None = None) -> set[Attribute]:
    """Returns the types of the kernel's values, with the element types of its memrefs
    (`values`: the kernel's, where the caller has them)."""
    types = {v.type for v in (_values(kernel) if values is None else values)}
    return types | {t.element_type for t in types if isinstance(t, MemRefType)}


def _uses_infinity(kernel: tile.KernelOp, ops: Iterable[Operation] | None = None) -> bool:
    """Tells whether a float constant of the kernel is infinite (so it needs `INFINITY`);
    `ops`: the kernel's ops, where the caller has them."""
    return any(
        isinstance(op, arith.ConstantOp)
        and isinstance(op.value, FloatAttr)
        and math.isinf(op.value.value.data)
        for op in (kernel.walk() if ops is None else ops)
    )


def _is_read_only(buffer: SSAValue) -> bool:
    """Tells whether every use of a buffer reads it (so it may be `const`): loads,
    `tile.cp_async`s that copy from it, and L2 prefetches."""
    return all(
        isinstance(use.operation, memref.LoadOp | tile.VectorLoadOp)
        or (isinstance(use.operation, tile.CpAsyncOp) and use.operation.src is buffer)
        or isinstance(use.operation, tile.PrefetchL2Op)
        for use in buffer.uses
    )


def _evicts_first(op: tile.VectorLoadOp) -> bool:
    """Whether a vload prints as the evict-first load: marked so, from a buffer the kernel only
    reads (the load's inline PTX declares no memory clobber, so it must not be ordered against
    a store to the same buffer; a buffer the kernel also writes takes the plain load)."""
    return op.evict_first is not None and _is_read_only(op.memref)


def _is_vector_accessed(buffer: SSAValue) -> bool:
    """Tells whether a buffer is used by a vector access, `ldmatrix` or `cp.async` (16-byte
    aligned rows)."""
    return any(
        isinstance(
            use.operation,
            tile.VectorLoadOp | tile.VectorStoreOp | tile.LdMatrixOp | tile.CpAsyncOp,
        )
        for use in buffer.uses
    )


_HELPER_OPS = (
    tile.LdMatrixOp
    | tile.MmaSyncOp
    | tile.PackOp
    | tile.MbarrierInitOp
    | tile.MbarrierArriveOp
    | tile.MbarrierArriveClusterOp
    | tile.FenceMbarrierInitOp
    | tile.MbarrierArriveExpectTxOp
    | tile.MbarrierWaitOp
    | tile.TmaLoadOp
    | tile.TmaStoreOp
    | tile.CpAsyncOp
    | tile.VectorLoadOp
    | fmath.Exp2Op
    | tile.ClusterSyncOp
    | tile.ClusterVectorLoadOp
    | tile.WgmmaOp
    | tile.WgmmaRegisterAOp
)
"""Every op class a branch of `_tensor_core_helpers` tests for, but `NAN_PROPAGATING`'s."""


@functools.cache
def _may_need_helper(op_type: type[Operation]) -> bool:
    """Whether some branch of `_tensor_core_helpers` may take an op of this class: the others
    (most of a kernel's ops) skip its dozen isinstance tests, decided once per class."""
    return issubclass(op_type, _HELPER_OPS) or op_type in NAN_PROPAGATING


def _tensor_core_helpers(
    kernel: tile.KernelOp, ops: Iterable[Operation] | None = None
) -> list[str]:
    """Returns the inline-PTX device functions of the kernel's tensor-core, mbarrier and TMA
    ops (`ldmatrix`, `mma.sync`, `wgmma`, `cp.async.bulk.tensor`); `ops`: the kernel's ops,
    where the caller has them."""
    helpers: dict[str, None] = {}
    if tile.tensor_maps(kernel):
        helpers[hopper.TENSOR_MAP_STRUCT] = None
    for op in kernel.walk() if ops is None else ops:
        if not _may_need_helper(type(op)):
            continue
        if isinstance(op, tile.LdMatrixOp):
            helpers[ldmatrix_helper(op.trans is not None)] = None
        elif isinstance(op, tile.MmaSyncOp):
            helpers[mma_helper(str(op.element))] = None
        elif isinstance(op, tile.PackOp):
            helpers[pack_helper(str(op.element))] = None
        elif isinstance(
            op,
            tile.MbarrierInitOp
            | tile.MbarrierArriveOp
            | tile.MbarrierArriveExpectTxOp
            | tile.MbarrierWaitOp,
        ):
            helpers |= dict.fromkeys(hopper.mbarrier_helpers())
        elif isinstance(op, tile.MbarrierArriveClusterOp | tile.FenceMbarrierInitOp):
            helpers |= dict.fromkeys(hopper.cluster_mbarrier_helpers())
        elif isinstance(op, tile.TmaLoadOp):
            evict_first, multicast = op.evict_first is not None, op.cta_mask != 0
            helpers[hopper.tma_load_helper(len(op.coords), evict_first, multicast)] = None
        elif isinstance(op, tile.TmaStoreOp):
            helpers[hopper.tma_store_helper(len(op.coords))] = None
        elif isinstance(op, tile.CpAsyncOp):
            helpers[cp_async_helper(op.bytes)] = None
        elif isinstance(op, tile.VectorLoadOp) and _evicts_first(op):
            helpers[EVICT_FIRST_LOAD_HELPER] = None
        elif isinstance(op, fmath.Exp2Op) and _approximate(op):
            helpers[EXP2_APPROX] = None
        elif type(op) in NAN_PROPAGATING:
            helpers[NAN_PROPAGATING[type(op)][1]] = None
        elif isinstance(op, tile.ClusterSyncOp | tile.ClusterVectorLoadOp):
            helpers |= dict.fromkeys(hopper.cluster_helpers())
        elif isinstance(op, tile.WgmmaOp | tile.WgmmaRegisterAOp):
            helpers[hopper.wgmma_desc_helper()] = None
            helpers[hopper.wgmma_helper(op)] = None
    return list(helpers)


class CudaPrinter(BasePrinter[str]):
    """Prints one `tile.kernel` as CUDA C: call `print_op(kernel)`.

    Each SSA value is a C local named after its name hint when that hint is unique in the
    kernel, else `v<N>`; constants are printed inline as literals. The C index type is `int`
    unless some buffer has 2^31 elements or more, or some index the kernel computes may leave
    `int` (`limits.index_range`): then `long long`. With `pdl` the body opens
    with the statements of programmatic dependent launch (`PDL_STATEMENTS`).
    """

    def __init__(
        self,
        stream: IO[str],
        kernel: tile.KernelOp,
        pdl: bool = False,
        indices: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(stream, indent_num_spaces=4)
        self.kernel = kernel
        self.pdl = pdl
        self.where = f"tile.kernel @{kernel.sym_name.data}"
        # The kernel's ops and values, walked once for the prelude, the names and the types.
        self.ops = list(kernel.walk())
        values = list(_values(kernel, self.ops))
        self.types = _types(kernel, values)
        memrefs = [t for t in self.types if isinstance(t, MemRefType)]
        lo, hi = index_range(kernel, self.ops) if indices is None else indices
        wide = any(math.prod(t.get_shape()) >= 2**31 for t in memrefs) or lo < -(2**31)
        self.index = "long long" if wide or hi >= 2**31 else "int"
        self.hints = _unique_hints(kernel, values)
        self.taken = {*_RESERVED, kernel.sym_name.data, *self.hints.values()}
        self.names: dict[SSAValue, str] = {}
        self.targets: list[Sequence[str]] = []
        self.count = 0
        self.started = False
        self.tensor_maps = {spec.arg for spec in tile.tensor_maps(kernel)}
        self.dynamic, self.dynamic_bytes = hopper.dynamic_layout(kernel, self.ops)

    def line(self, text: str) -> None:
        """Prints one line of C at the current indentation."""
        self.print_string(("\n" if self.started else "") + text)
        self.started = True

    @contextmanager
    def braced(self, head: str) -> Iterator[None]:
        """Prints `head {`, the indented lines printed inside the context, then `}`."""
        self.line(f"{head} {{" if head else "{")
        with self.indented():
            yield
        self.line("}")

    def fail(self, what: str) -> DiagnosticException:
        """Returns the diagnostic for something of this kernel that has no CUDA C form."""
        return DiagnosticException(f"to-cuda: cannot print {what} (in {self.where})")

    def fresh(self, base: str) -> str:
        """Returns a name starting with `base` that no other local of the kernel has."""
        name, n = base, 0
        while name in self.taken:
            n += 1
            name = f"{base}_{n}"
        self.taken.add(name)
        return name

    def define(self, value: SSAValue) -> str:
        """Names a value at its definition: its unique hint, else a fresh `v<N>`."""
        name = self.hints.get(value)
        if name is None:
            while f"v{self.count}" in self.taken:
                self.count += 1
            name = self.fresh(f"v{self.count}")
        self.names[value] = name
        return name

    def expr(self, value: SSAValue) -> str:
        """Returns the C expression of a value defined earlier in the kernel."""
        return self.names[value]

    def ctype(self, t: Attribute) -> str:
        """Returns the C type of a scalar IR type."""
        if isinstance(t, Float32Type):
            return "float"
        if isinstance(t, Float16Type):
            return "__half"
        if isinstance(t, BFloat16Type):
            return "__nv_bfloat16"
        if isinstance(t, Float8E4M3FNType | Float8E5M2Type):
            return FP8_CTYPES[type(t)]
        if isinstance(t, IndexType):
            return self.index
        if isinstance(t, IntegerType) and t.width.data in (1, 32, 64):
            return {1: "bool", 32: "int", 64: "long long"}[t.width.data]
        raise self.fail(f"type {t}")

    def let(self, value: SSAValue, expression: str) -> None:
        """Declares the local of `value`, initialized with `expression`."""
        self.line(f"{self.ctype(value.type)} {self.define(value)} = {expression};")

    def to_float(self, expression: str, t: Attribute) -> str:
        """Converts an expression of a float type to `float`."""
        if isinstance(t, Float16Type):
            return f"__half2float({expression})"
        if isinstance(t, BFloat16Type):
            return f"__bfloat162float({expression})"
        if isinstance(t, Float8E4M3FNType | Float8E5M2Type):
            return f"(float)({expression})"
        return expression

    def from_float(self, expression: str, t: Attribute) -> str:
        """Converts a `float` expression to a float type, rounding to nearest even."""
        if isinstance(t, Float16Type):
            return f"__float2half_rn({expression})"
        if isinstance(t, BFloat16Type):
            return f"__float2bfloat16_rn({expression})"
        if isinstance(t, Float8E4M3FNType | Float8E5M2Type):
            return f"tinyopt_to_{FP8_CTYPES[type(t)].removeprefix('__nv_fp8_')}({expression})"
        return expression

    def element(self, buffer: SSAValue, indices: Sequence[SSAValue]) -> str:
        """Returns the C lvalue of one element: linearized for global buffers."""
        t = buffer.type
        assert isinstance(t, MemRefType)
        subscripts = [self.expr(i) for i in indices]
        if tile.memory_space(t) != tile.GLOBAL:
            return self.expr(buffer) + "".join(f"[{s}]" for s in subscripts)
        strides = [math.prod(t.get_shape()[k + 1 :]) for k in range(len(subscripts))]
        terms = [
            s if stride == 1 else f"{s} * {stride}"
            for s, stride in zip(subscripts, strides)
            if s != "0"
        ]
        return f"{self.expr(buffer)}[{' + '.join(terms) or '0'}]"

    def assign(self, targets: Sequence[str], values: Sequence[SSAValue]) -> None:
        """Assigns values to the locals `targets`, as one parallel assignment."""
        moves = [
            (t, self.expr(v), v.type)
            for t, v in zip(targets, values, strict=True)
            if t != self.expr(v)
        ]
        if not any(e in targets for _, e, _ in moves):
            for t, e, _ in moves:
                self.line(f"{t} = {e};")
            return
        # A target read by a later assignment (e.g. a swap) must be read before it is written.
        with self.braced(""):
            temps = [self.fresh("tmp") for _ in moves]
            for temp, (_, e, t) in zip(temps, moves):
                self.line(f"{self.ctype(t)} {temp} = {e};")
            for temp, (t, _, _) in zip(temps, moves):
                self.line(f"{t} = {temp};")

    @contextmanager
    def yielding_to(self, targets: Sequence[str]) -> Iterator[None]:
        """Makes the `yield` ops printed inside the context assign to `targets`."""
        self.targets.append(targets)
        try:
            yield
        finally:
            self.targets.pop()

    def print_block(self, ops: Iterable[Operation]) -> None:
        """Prints a sequence of ops at the current indentation.

        Each op goes straight to its `print_op` overload, as `self.print_op(op)` would send
        it: in Python 3.11 every `self.print_op` access builds a new wrapper function (with
        `functools.update_wrapper`), a tenth of the printer's time when paid per op."""
        dispatch = CudaPrinter.__dict__["print_op"].dispatcher.dispatch
        for op in ops:
            dispatch(op.__class__)(self, op)

    @functools.singledispatchmethod
    def print_op(self, op: Operation) -> None:
        """Prints one op as C statements; ops without an overload have no CUDA C form."""
        name = op.op_name.data if isinstance(op, UnregisteredOp) else op.name
        raise self.fail(f"'{name}'")

    @print_op.register
    def _(self, op: tile.KernelOp) -> None:
        name = op.sym_name.data
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            raise self.fail(f"the kernel name '{name}', which is not a C identifier")
        self.print_prelude()
        params = ", ".join(self.parameter(arg) for arg in op.body.block.args)
        bounds = [str(math.prod(op.block_size))]
        min_blocks = op.attributes.get("tile.min_blocks")
        if isinstance(min_blocks, IntegerAttr):
            # Asks ptxas to fit this many blocks per SM in the register file.
            bounds.append(str(min_blocks.value.data))
        attributes = f"__launch_bounds__({', '.join(bounds)})"
        if op.cluster_size is not None:  # launched in clusters of these dims
            attributes = f"__cluster_dims__({', '.join(map(str, op.cluster_size))}) {attributes}"
        with self.braced(f'extern "C" __global__ void {attributes} {name}({params})'):
            if self.pdl and not self._waits_later(op):
                for text in PDL_STATEMENTS:
                    self.line(text)
            if self.dynamic:
                smem, base = hopper.DYNAMIC_SMEM, hopper.DYNAMIC_BASE
                align = hopper.DYNAMIC_ALIGN
                self.line(f"extern __shared__ __align__({align}) unsigned char {smem}[];")
                self.line(f"// dynamic buffers start {align}-byte aligned in shared memory")
                self.line(
                    f"unsigned char* {base} = {smem} + "
                    f"(({align} - (unsigned)__cvta_generic_to_shared({smem}) % {align}) % {align});"
                )
            self.print_block(op.body.block.ops)

    def _waits_later(self, kernel: tile.KernelOp) -> bool:
        """Whether the kernel places its grid dependency wait (`tile.grid_dependency_wait`)
        after a prologue, which may then only compute and ask L2 for memory: a global access
        before the wait could read what the kernel before has not yet written."""
        ops = list(kernel.body.block.ops)
        wait = next((o for o in ops if isinstance(o, tile.GridDependencyWaitOp)), None)
        if wait is None:
            return False
        for top in ops[: ops.index(wait)]:
            for o in top.walk():
                touches = any(
                    isinstance(v.type, MemRefType) and tile.memory_space(v.type) == tile.GLOBAL
                    for v in o.operands
                )
                if touches and not isinstance(o, tile.PrefetchL2Op):
                    raise self.fail(
                        f"{o.name} on global memory before the kernel's grid dependency wait"
                    )
        return True

    def print_prelude(self) -> None:
        """Prints the headers and helpers the kernel needs, then a blank line."""
        types = self.types
        if any(isinstance(t, Float16Type) for t in types):
            self.line("#include <cuda_fp16.h>")
        if any(isinstance(t, BFloat16Type) for t in types):
            self.line("#include <cuda_bf16.h>")
        if any(isinstance(t, Float8E4M3FNType | Float8E5M2Type) for t in types):
            for text in FP8_HELPERS:
                self.line(text)
        if _uses_infinity(self.kernel, self.ops):
            for text in INFINITY_MACRO:
                self.line(text)
        vectors = tile.VectorLoadOp | tile.VectorStoreOp | tile.ClusterVectorLoadOp
        if any(isinstance(o, vectors) for o in self.ops):
            self.line(VEC_TYPE)
        for helper in _tensor_core_helpers(self.kernel, self.ops):
            self.line(helper)
        self.line("")

    def parameter(self, buffer: SSAValue) -> str:
        """Returns the C parameter of a kernel buffer: a restricted pointer to its elements, or
        the tensor map (passed by value) of a buffer only TMA reads; or of a runtime scalar: its
        integer, passed by value."""
        t = buffer.type
        if t in SCALAR_TYPES:
            return f"const {self.ctype(t)} {self.define(buffer)}"
        assert isinstance(t, MemRefType)
        if isinstance(buffer, BlockArgument) and buffer.index in self.tensor_maps:
            return f"const __grid_constant__ CUtensorMap {self.define(buffer)}"
        const = "const " if _is_read_only(buffer) else ""
        return f"{const}{self.ctype(t.element_type)}* __restrict__ {self.define(buffer)}"

    @print_op.register
    def _(self, op: arith.ConstantOp) -> None:
        value, t = op.value, op.result.type
        if isinstance(value, FloatAttr):
            self.names[op.result] = self.from_float(float_literal(value.value.data), t)
        elif isinstance(value, IntegerAttr) and self.ctype(t) == "bool":
            self.names[op.result] = "true" if value.value.data else "false"
        elif isinstance(value, IntegerAttr):
            n = value.value.data
            self.names[op.result] = str(n) if -(2**31) <= n < 2**31 else f"{n}LL"
        else:
            raise self.fail(f"the constant {value}")

    @print_op.register(_any_of(_INFIX))
    def _(self, op: Operation) -> None:
        lhs, rhs = (self.expr(v) for v in op.operands)
        if _approximate(op):
            self.let(op.results[0], f"{_APPROXIMATE_CALLS[type(op)]}({lhs}, {rhs})")
        else:
            self.let(op.results[0], f"{lhs} {_INFIX[type(op)]} {rhs}")

    @print_op.register(_any_of(_UNSIGNED_INFIX))
    def _(self, op: Operation) -> None:
        t = self.ctype(op.results[0].type)
        lhs, rhs = (f"({_UNSIGNED[t]}){self.expr(v)}" for v in op.operands)
        self.let(op.results[0], f"({t})({lhs} {_UNSIGNED_INFIX[type(op)]} {rhs})")

    @print_op.register(_any_of(_INT_CALLS))
    def _(self, op: Operation) -> None:
        # With `long long` indices an int literal operand would make min/max ambiguous.
        ctype = self.ctype(op.results[0].type)
        cast = "" if ctype == "int" else f"({ctype})"
        args = ", ".join(cast + self.expr(v) for v in op.operands)
        self.let(op.results[0], f"{_INT_CALLS[type(op)]}({args})")

    @print_op.register(_any_of([*_FLOAT_CALLS, *NAN_PROPAGATING]))
    def _(self, op: Operation) -> None:
        t = op.results[0].type
        args = ", ".join(self.to_float(self.expr(v), v.type) for v in op.operands)
        if type(op) in NAN_PROPAGATING:
            name = NAN_PROPAGATING[type(op)][0]
        else:
            name = (_APPROXIMATE_CALLS if _approximate(op) else _FLOAT_CALLS)[type(op)]
        self.let(op.results[0], self.from_float(f"{name}({args})", t))

    @print_op.register
    def _(self, op: arith.NegfOp) -> None:
        self.let(op.result, f"-({self.expr(op.operand)})")

    @print_op.register
    def _(self, op: arith.CmpiOp) -> None:
        a, b = self.expr(op.lhs), self.expr(op.rhs)
        predicate = op.predicate.value.data
        if predicate >= 6:  # ult ule ugt uge compare the bits as unsigned numbers
            unsigned = _UNSIGNED[self.ctype(op.lhs.type)]
            a, b = f"({unsigned}){a}", f"({unsigned}){b}"
        self.let(op.result, f"{a} {_CMPI[predicate]} {b}")

    @print_op.register
    def _(self, op: arith.CmpfOp) -> None:
        a, b = self.expr(op.lhs), self.expr(op.rhs)
        self.let(op.result, _CMPF[op.predicate.value.data].format(a=a, b=b))

    @print_op.register
    def _(self, op: arith.SelectOp) -> None:
        c, a, b = (self.expr(v) for v in (op.cond, op.lhs, op.rhs))
        self.let(op.result, f"{c} ? {a} : {b}")

    @print_op.register
    def _(self, op: arith.IndexCastOp) -> None:
        self.let(op.result, f"({self.ctype(op.result.type)}){self.expr(op.input)}")

    @print_op.register
    def _(self, op: arith.ExtFOp | arith.TruncFOp) -> None:
        wide = self.to_float(self.expr(op.input), op.input.type)
        self.let(op.result, self.from_float(wide, op.result.type))

    @print_op.register
    def _(self, op: arith.SIToFPOp | arith.UIToFPOp) -> None:
        value = self.expr(op.input)
        if isinstance(op, arith.UIToFPOp):
            value = f"({_UNSIGNED[self.ctype(op.input.type)]}){value}"
        self.let(op.result, self.from_float(f"(float){value}", op.result.type))

    @print_op.register
    def _(self, op: arith.FPToSIOp) -> None:
        value = self.to_float(self.expr(op.input), op.input.type)
        self.let(op.result, f"({self.ctype(op.result.type)}){value}")

    @print_op.register
    def _(self, op: memref.LoadOp) -> None:
        self.let(op.res, self.element(op.memref, op.indices))

    @print_op.register
    def _(self, op: memref.StoreOp) -> None:
        self.line(f"{self.element(op.memref, op.indices)} = {self.expr(op.value)};")

    @print_op.register
    def _(self, op: memref.AtomicRMWOp) -> None:
        # Only the float add of atomic split-K; with its result unused nvcc emits RED.ADD.F32.
        if op.kind.value.data != 0 or not isinstance(op.value.type, Float32Type):
            raise self.fail(f"'memref.atomic_rmw' of kind {op.kind.value.data} on {op.value.type}")
        call = f"atomicAdd(&{self.element(op.memref, op.indices)}, {self.expr(op.value)})"
        if op.result.uses:
            self.let(op.result, call)
        else:
            self.line(f"{call};")

    @print_op.register
    def _(self, op: tile.AllocOp) -> None:
        t = op.result.type
        assert isinstance(t, MemRefType)
        if op in self.dynamic:
            element, name = self.ctype(t.element_type), self.define(op.result)
            inner = "".join(f"[{d}]" for d in t.get_shape()[1:])
            address = f"{hopper.DYNAMIC_BASE} + {self.dynamic[op]}"
            self.line(
                f"{element} (*{name}){inner} = reinterpret_cast<{element} (*){inner}>({address});"
            )
            return
        shared = "__shared__ " if tile.memory_space(t) == tile.SHARED else ""
        align = "alignas(16) " if _is_vector_accessed(op.result) else ""
        dims = "".join(f"[{d}]" for d in t.get_shape())
        self.line(f"{shared}{align}{self.ctype(t.element_type)} {self.define(op.result)}{dims};")

    def vector_type(self, buffer: SSAValue, width: int) -> str:
        """Returns the `tinyopt_vec` type of `width` elements of a buffer."""
        t = buffer.type
        assert isinstance(t, MemRefType)
        return f"tinyopt_vec<{self.ctype(t.element_type)}, {width}>"

    @print_op.register
    def _(self, op: tile.VectorLoadOp) -> None:
        vec = self.vector_type(op.memref, len(op.lanes))
        temp = self.fresh("vec")
        address = f"&{self.element(op.memref, op.indices)}"
        if _evicts_first(op):
            self.line(f"{vec} {temp};")
            self.line(f"{EVICT_FIRST_LOAD}(&{temp}, {address});")
        else:
            self.line(f"{vec} {temp} = *reinterpret_cast<const {vec}*>({address});")
        for k, lane in enumerate(op.lanes):
            self.let(lane, f"{temp}.v[{k}]")

    @print_op.register
    def _(self, op: tile.ClusterVectorLoadOp) -> None:
        temp = self.fresh("vec")
        self.line(f"tinyopt_vec<float, 4> {temp};")
        address = f"&{self.element(op.memref, op.indices)}"
        self.line(f"tinyopt_cluster_load_f32x4({temp}.v, {address}, {self.expr(op.rank)});")
        for k, lane in enumerate(op.lanes):
            self.let(lane, f"{temp}.v[{k}]")

    @print_op.register
    def _(self, op: tile.VectorStoreOp) -> None:
        vec = self.vector_type(op.memref, len(op.lanes))
        lanes = ", ".join(self.expr(v) for v in op.lanes)
        address = f"&{self.element(op.memref, op.indices)}"
        self.line(f"*reinterpret_cast<{vec}*>({address}) = {vec}{{{{{lanes}}}}};")

    @print_op.register
    def _(self, op: tile.VectorAtomicAddOp) -> None:
        width = len(op.lanes)
        values = ", ".join(f"%{i + 1}" for i in range(width))
        operands = ", ".join(f'"f"({self.expr(v)})' for v in op.lanes)
        address = f"&{self.element(op.memref, op.indices)}"
        self.line(
            f'asm volatile("red.global.add.v{width}.f32 [%0], {{{values}}};" :: "l"({address}), '
            f'{operands} : "memory");'
        )

    @print_op.register
    def _(self, op: tile.LdMatrixOp) -> None:
        registers = [self.define(r) for r in op.res]
        self.line(f"int {', '.join(registers)};")
        name = "tinyopt_ldmatrix_x4_trans" if op.trans is not None else "tinyopt_ldmatrix_x4"
        self.line(f"{name}({', '.join(registers)}, &{self.element(op.memref, op.indices)});")

    @print_op.register(_any_of(_STATEMENTS))
    def _(self, op: Operation) -> None:
        self.line(_STATEMENTS[type(op)])

    @print_op.register
    def _(self, op: tile.BlockIdOp) -> None:
        self.let(op.result, f"({self.index})blockIdx.{op.dim.data}")

    @print_op.register
    def _(self, op: tile.ThreadIdOp) -> None:
        self.let(op.result, f"({self.index})threadIdx.{op.dim.data}")

    @print_op.register
    def _(self, op: tile.WarpUniformOp) -> None:
        self.let(op.result, f"__shfl_sync({FULL_MASK}, {self.expr(op.value)}, 0)")

    @print_op.register
    def _(self, op: tile.NamedBarrierOp) -> None:
        barrier, threads = self.expr(op.barrier), op.threads.value.data
        operand = f'"r"((unsigned){barrier})'
        kind = "arrive" if op.arrive is not None else "sync"
        self.line(f'asm volatile("bar.{kind} %0, {threads};" :: {operand} : "memory");')

    @print_op.register
    def _(self, op: tile.NamedBarrierAnyOp) -> None:
        barrier, threads = self.expr(op.barrier), op.threads.value.data
        result, predicate = self.define(op.result), self.expr(op.predicate)
        self.line(f"unsigned {result}_any;")
        self.line(
            'asm volatile("{ .reg .pred p, q; setp.ne.u32 q, %2, 0; '
            f'bar.red.or.pred p, %1, {threads}, q; selp.u32 %0, 1, 0, p; }}" '
            f': "=r"({result}_any) : "r"((unsigned){barrier}), "r"((unsigned){predicate}) '
            ': "memory");'
        )
        self.line(f"bool {result} = {result}_any != 0;")

    @print_op.register
    def _(self, op: tile.MmaSyncOp) -> None:
        results = [self.define(r) for r in op.res]
        self.line(f"float {', '.join(results)};")
        args = ", ".join(self.expr(v) for v in (*op.a, *op.b, *op.c))
        self.line(f"{mma_name(str(op.element))}({', '.join(results)}, {args});")

    @print_op.register
    def _(self, op: arith.BitcastOp) -> None:
        source, target = self.ctype(op.input.type), self.ctype(op.result.type)
        calls = {("float", "int"): "__float_as_int", ("int", "float"): "__int_as_float"}
        if (source, target) not in calls:
            raise self.fail(f"'arith.bitcast' from {op.input.type} to {op.result.type}")
        self.let(op.result, f"{calls[source, target]}({self.expr(op.input)})")

    @print_op.register
    def _(self, op: tile.ToTf32Op) -> None:
        bits = self.fresh("tf32")
        self.line(f"unsigned {bits};")
        self.line(f'asm("cvt.rna.tf32.f32 %0, %1;" : "=r"({bits}) : "f"({self.expr(op.input)}));')
        self.let(op.result, f"__uint_as_float({bits})")

    @print_op.register
    def _(self, op: tile.PackOp) -> None:
        self.let(op.result, f"tinyopt_pack_{op.element}({self.expr(op.lo)}, {self.expr(op.hi)})")

    def barrier(self, op: tile.MbarrierInitOp | tile.MbarrierArriveOp | tile.MbarrierWaitOp) -> str:
        """Returns the address of an mbarrier op's barrier."""
        return f"&{self.element(op.bars, [op.index])}"

    @print_op.register
    def _(self, op: tile.MbarrierInitOp) -> None:
        self.line(f"tinyopt_mbarrier_init({self.barrier(op)}, {op.count.value.data});")

    @print_op.register
    def _(self, op: tile.MbarrierArriveExpectTxOp) -> None:
        bar = f"&{self.element(op.bars, [op.index])}"
        self.line(f"tinyopt_mbarrier_arrive_expect_tx({bar}, {op.bytes.value.data});")

    @print_op.register
    def _(self, op: tile.MbarrierArriveOp) -> None:
        self.line(f"tinyopt_mbarrier_arrive({self.barrier(op)});")

    @print_op.register
    def _(self, op: tile.MbarrierArriveClusterOp) -> None:
        self.line(f"tinyopt_mbarrier_arrive_cluster({self.barrier(op)}, {self.expr(op.rank)});")

    @print_op.register
    def _(self, op: tile.MbarrierWaitOp) -> None:
        self.line(f"tinyopt_mbarrier_wait({self.barrier(op)}, {self.expr(op.parity)});")

    @print_op.register
    def _(self, op: tile.FlagSetOp) -> None:
        flag = f"&{self.element(op.flags, [op.index])}"
        self.line(f'asm volatile("st.release.gpu.global.b32 [%0], 1;" :: "l"({flag}) : "memory");')

    @print_op.register
    def _(self, op: tile.FlagWaitOp) -> None:
        flag = f"&{self.element(op.flags, [op.index])}"
        self.line("for (unsigned flag = 0; !flag;) {")
        self.line(
            f'    asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(flag) : "l"({flag}) '
            ': "memory");'
        )
        self.line("}")

    @print_op.register
    def _(self, op: tile.TmaLoadOp) -> None:
        dst = f"&{self.element(op.dst, op.indices)}"
        bar = f"&{self.element(op.bars, [op.bar])}"
        coords = ", ".join(self.expr(c) for c in reversed(op.coords))
        name = hopper.tma_load_name(len(op.coords), op.evict_first is not None, op.cta_mask != 0)
        mask = f"{op.cta_mask}, " if op.cta_mask else ""
        self.line(f"{name}({dst}, &{self.expr(op.src)}, {bar}, {mask}{coords});")

    @print_op.register
    def _(self, op: tile.TmaStoreOp) -> None:
        src = f"&{self.element(op.src, op.indices)}"
        coords = ", ".join(self.expr(c) for c in reversed(op.coords))
        name = hopper.tma_store_name(len(op.coords))
        self.line(f"{name}(&{self.expr(op.dst)}, {src}, {coords});")

    @print_op.register
    def _(self, op: tile.BulkWaitOp) -> None:
        read = ".read" if op.read is not None else ""
        self.line(f'asm volatile("cp.async.bulk.wait_group{read} 0;" ::: "memory");')

    @print_op.register
    def _(self, op: tile.CpAsyncOp) -> None:
        dst = f"&{self.element(op.dst, op.dst_indices)}"
        src = f"&{self.element(op.src, op.src_indices)}"
        valid = self.expr(op.valid) if op.valid is not None else "true"
        self.line(f"tinyopt_cp_async_{op.bytes}({dst}, {src}, {valid});")

    @print_op.register
    def _(self, op: tile.PrefetchL2Op) -> None:
        start = f"&{self.element(op.src, op.indices)}"
        if op.bytes is None:
            self.line(f'asm volatile("prefetch.global.L2 [%0];" :: "l"({start}));')
        else:
            self.line(
                'asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: '
                f'"l"({start}), "r"({op.bytes.value.data}u) : "memory");'
            )

    @print_op.register
    def _(self, op: tile.GridDependencyWaitOp) -> None:
        if self.pdl:
            for text in PDL_STATEMENTS:
                self.line(text)

    @print_op.register
    def _(self, op: tile.CpAsyncWaitOp) -> None:
        pending = op.pending.value.data
        self.line(f'asm volatile("cp.async.wait_group {pending};" ::: "memory");')

    @print_op.register
    def _(self, op: tile.WgmmaOp) -> None:
        a = f"&{self.element(op.a, op.a_indices)}"
        b = f"&{self.element(op.b, op.b_indices)}"
        a_lbo = op.a_lbo.value.data if op.a_lbo is not None else 16  # K-major: unused
        a_desc = f"tinyopt_wgmma_desc({a}, {a_lbo}, {op.a_sbo.value.data})"
        b_desc = f"tinyopt_wgmma_desc({b}, {op.b_lbo.value.data}, {op.b_sbo.value.data})"
        self.line(f"{hopper.wgmma_name(op)}({self.expr(op.acc)}, {a_desc}, {b_desc});")

    @print_op.register
    def _(self, op: tile.WgmmaRegisterAOp) -> None:
        b = f"&{self.element(op.b, op.b_indices)}"
        b_desc = f"tinyopt_wgmma_desc({b}, {op.b_lbo.value.data}, {op.b_sbo.value.data})"
        a = ", ".join(self.expr(r) for r in op.a)
        self.line(f"{hopper.wgmma_name(op)}({self.expr(op.acc)}, {a}, {b_desc});")

    @print_op.register
    def _(self, op: tile.WgmmaWaitOp) -> None:
        pending = op.pending.value.data
        self.line(f'asm volatile("wgmma.wait_group.sync.aligned {pending};" ::: "memory");')

    @print_op.register
    def _(self, op: tile.SetMaxNRegOp) -> None:
        direction = "inc" if op.inc is not None else "dec"
        count = op.count.value.data
        self.line(f'asm volatile("setmaxnreg.{direction}.sync.aligned.u32 {count};");')

    @print_op.register
    def _(self, op: scf.ForOp) -> None:
        body = op.body.block
        carried = []
        for result, arg, init in zip(op.res, body.args[1:], op.iter_args, strict=True):
            name = self.hints.get(result) or self.hints.get(arg) or self.define(result)
            self.line(f"{self.ctype(result.type)} {name} = {self.expr(init)};")
            self.names[result] = self.names[arg] = name
            carried.append(name)
        if (unroll := op.attributes.get("tile.unroll")) is not None:
            count = f" {unroll.value.data}" if isinstance(unroll, IntegerAttr) else ""
            self.line(f"#pragma unroll{count}")
        t, i = self.ctype(body.args[0].type), self.define(body.args[0])
        lb, ub, step = (self.expr(v) for v in (op.lb, op.ub, op.step))
        with self.braced(f"for ({t} {i} = {lb}; {i} < {ub}; {i} += {step})"):
            with self.yielding_to(carried):
                self.print_block(body.ops)

    @print_op.register
    def _(self, op: scf.IfOp) -> None:
        results = [self.define(r) for r in op.output]
        for result, name in zip(op.output, results):
            self.line(f"{self.ctype(result.type)} {name};")
        with self.yielding_to(results):
            with self.braced(f"if ({self.expr(op.cond)})"):
                self.print_block(op.true_region.block.ops)
            if op.false_region.blocks:
                self.print_string(" else {")
                with self.indented():
                    self.print_block(op.false_region.block.ops)
                self.line("}")

    @print_op.register
    def _(self, op: scf.YieldOp | tile.YieldOp) -> None:
        self.assign(self.targets[-1], op.arguments)

    def declare_state(self, op: tile.WarpReduceOp | tile.BlockReduceOp) -> list[str]:
        """Declares the result locals of a reduction, initialized with this thread's state."""
        for result, value in zip(op.res, op.state, strict=True):
            self.let(result, self.expr(value))
        return [self.names[r] for r in op.res]

    def combine_into(
        self, op: tile.WarpReduceOp | tile.BlockReduceOp, state: list[str], others: list[str]
    ) -> None:
        """Prints the combine region inline: `state = combine(state, others)`."""
        args = op.combine.block.args
        for arg, name in zip(args, state + others, strict=True):
            self.names[arg] = name
        with self.yielding_to(state):
            self.print_block(op.combine.block.ops)

    def butterfly(
        self, op: tile.WarpReduceOp | tile.BlockReduceOp, state: list[str], width: int
    ) -> None:
        """Prints the XOR-shuffle tree after which every lane of a `width` group has the result."""
        if width not in (1, 2, 4, 8, 16, 32):
            raise self.fail(f"'{op.name}' over {width} lanes (not a power of two up to 32)")
        offset = self.fresh("offset")
        with self.braced(f"for (int {offset} = {width // 2}; {offset} > 0; {offset} >>= 1)"):
            others = []
            for name, arg in zip(state, op.combine.block.args[len(state) :]):
                value = f"(int){name}" if self.ctype(arg.type) == "bool" else name
                shuffle = f"__shfl_xor_sync({FULL_MASK}, {value}, {offset}, {width})"
                self.line(f"{self.ctype(arg.type)} {self.define(arg)} = {shuffle};")
                others.append(self.names[arg])
            self.combine_into(op, state, others)

    @print_op.register
    def _(self, op: tile.WarpReduceOp) -> None:
        self.butterfly(op, self.declare_state(op), op.width)

    @print_op.register
    def _(self, op: tile.BlockReduceOp) -> None:
        bx, by, bz = self.kernel.block_size
        threads = bx * by * bz
        state = self.declare_state(op)
        if threads <= WARP:
            self.butterfly(op, state, threads)
            return
        if threads % WARP:
            raise self.fail(f"'{op.name}' over {threads} threads (not a whole number of warps)")
        warps = threads // WARP
        self.butterfly(op, state, WARP)
        # Warps are formed from the linear thread index, x fastest.
        tid = "threadIdx.x"
        if by * bz > 1:
            tid = f"((threadIdx.z * {by} + threadIdx.y) * {bx} + threadIdx.x)"
        partials = [self.fresh(f"{name}_partials") for name in state]
        for name, partial, result in zip(state, partials, op.res):
            self.line(f"__shared__ {self.ctype(result.type)} {partial}[{warps}];")
        with self.braced(f"if ({tid} % {WARP} == 0)"):
            for name, partial in zip(state, partials):
                self.line(f"{partial}[{tid} / {WARP}] = {name};")
        self.line("__syncthreads();")
        for name, partial in zip(state, partials):
            self.line(f"{name} = {partial}[0];")
        warp = self.fresh("warp")
        with self.braced(f"for (int {warp} = 1; {warp} < {warps}; ++{warp})"):
            others = []
            for partial, arg in zip(partials, op.combine.block.args[len(state) :]):
                self.line(f"{self.ctype(arg.type)} {self.define(arg)} = {partial}[{warp}];")
                others.append(self.names[arg])
            self.combine_into(op, state, others)
        if any(isinstance(p, scf.ForOp) for p in _ancestors(op, self.kernel)):
            # The next iteration's partials must not overwrite ones still being read.
            self.line("__syncthreads();")


def _ancestors(op: Operation, stop: Operation) -> Iterator[Operation]:
    """Yields the ops enclosing `op`, innermost first, up to (not including) `stop`."""
    parent = op.parent_op()
    while parent is not None and parent is not stop:
        yield parent
        parent = parent.parent_op()


def kernel_source(kernel: tile.KernelOp, pdl: bool = False) -> str:
    """Returns the CUDA C translation unit of one `tile.kernel`, opening with `PDL_STATEMENTS`
    when `pdl`."""
    return printed_kernel(kernel, pdl)[0]


def printed_kernel(
    kernel: tile.KernelOp, pdl: bool = False, indices: tuple[int, int] | None = None
) -> tuple[str, int]:
    """Returns `kernel_source(kernel, pdl)` and the bytes of dynamic shared memory the kernel's
    launch requests (`hopper.dynamic_layout`). `indices`: the kernel's `limits.index_range`,
    where the caller has just computed it (`fit_launch`), else it is computed here."""
    stream = StringIO()
    printer = CudaPrinter(stream, kernel, pdl, indices)
    printer.print_op(kernel)
    return stream.getvalue() + "\n", printer.dynamic_bytes


def module_sources(module: ModuleOp) -> dict[str, str]:
    """Returns the CUDA C of each top-level kernel of a module, by symbol name.

    A `tile.kernel` is printed; a `tile.cuda_kernel` (after `to-cuda`) gives its stored source.
    """
    sources: dict[str, str] = {}
    for op in module.ops:
        if isinstance(op, tile.KernelOp):
            sources[op.sym_name.data] = kernel_source(op)
        elif isinstance(op, tile.CudaKernelOp):
            sources[op.sym_name.data] = op.source.data
    return sources
