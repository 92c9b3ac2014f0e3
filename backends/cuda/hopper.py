"""The CUDA C side of Hopper's async ops: inline-PTX helpers for mbarriers, TMA and wgmma,
the opaque tensor-map parameter type, and the layout of dynamic shared memory.

The printer adds a helper to a kernel's prelude only when the kernel's IR uses its op.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from xdsl.dialects.builtin import MemRefType, f32, i64
from xdsl.ir import Operation

from tinyopt.dialects import tile

TENSOR_MAP_STRUCT = "struct alignas(64) CUtensorMap { unsigned long long opaque[16]; };"
"""NVRTC cannot include cuda.h: a tensor map is an opaque 128-byte, 64-byte aligned struct."""

DYNAMIC_SMEM = "tinyopt_smem"
DYNAMIC_BASE = "tinyopt_smem_base"
DYNAMIC_ALIGN = 1024
"""Dynamic buffers start 1024-byte aligned: a 128-byte swizzle pattern repeats every 1024
bytes of shared address, and TMA and the wgmma descriptors assume it starts at 0."""

MBARRIER_ALIGN = 16
"""Dynamic mbarrier arrays (64-bit words, which no copy or wgmma reads) start 16-byte aligned:
two of them share one 1024-byte place (`WgmmaTiles.shared_bytes`)."""

HELPER_NAMES = (
    "CUtensorMap",
    DYNAMIC_SMEM,
    DYNAMIC_BASE,
    "tinyopt_mbarrier_init",
    "tinyopt_mbarrier_arrive",
    "tinyopt_mbarrier_arrive_expect_tx",
    "tinyopt_mbarrier_wait",
    "tinyopt_wgmma_desc",
    "tinyopt_mbarrier_arrive_cluster",
    "tinyopt_fence_mbarrier_init",
    "tinyopt_cluster_sync",
    "tinyopt_cluster_load_f32x4",
    *(
        f"tinyopt_tma_load_{rank}d{multicast}{hint}"
        for rank in range(1, 6)
        for multicast in ("", "_multicast")
        for hint in ("", "_evict_first")
    ),
)


def _lines(*lines: str) -> str:
    return "\n".join(lines)


def _shared(name: str) -> str:
    return f"(unsigned)__cvta_generic_to_shared({name})"


def mbarrier_helpers() -> list[str]:
    """Returns the device functions of the mbarrier ops (init, arrive, expect_tx, wait)."""
    return [
        _lines(
            "__device__ __forceinline__ void tinyopt_mbarrier_init(void* bar, int count) {",
            '    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;"',
            f'                 :: "r"({_shared("bar")}), "r"(count) : "memory");',
            "}",
        ),
        _lines(
            "__device__ __forceinline__ void tinyopt_mbarrier_arrive(void* bar) {",
            '    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];"',
            f'                 :: "r"({_shared("bar")}) : "memory");',
            "}",
        ),
        _lines(
            "__device__ __forceinline__ void tinyopt_mbarrier_arrive_expect_tx(void* bar, "
            "int bytes) {",
            '    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"',
            f'                 :: "r"({_shared("bar")}), "r"(bytes) : "memory");',
            "}",
        ),
        _lines(
            "__device__ __forceinline__ void tinyopt_mbarrier_wait(void* bar, int parity) {",
            "    unsigned done = 0;",
            "    while (!done) {",
            '        asm volatile("{\\n.reg .pred p;\\n"',
            '                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\\n"',
            '                     "selp.u32 %0, 1, 0, p;\\n}"',
            f'                     : "=r"(done) : "r"({_shared("bar")}), "r"(parity & 1)',
            '                     : "memory");',
            "    }",
            "}",
        ),
    ]


def cluster_mbarrier_helpers() -> list[str]:
    """Returns the device functions of the cluster's mbarrier ops: the arrival on the mbarrier
    at the same shared-memory offset in the block of a cluster rank
    (`tile.mbarrier_arrive_cluster`), and the fence that makes the block's mbarrier inits
    visible to the cluster's blocks (`tile.fence_mbarrier_init`).

    The arrival keeps mbarrier.arrive's default semantics (release at CTA scope), as CUTLASS's
    cluster barrier does: it orders no memory of its own, it only says a ring slot was read
    (by wgmma, waited for). A `.release.cluster` arrival compiles to a `MEMBAR.ALL.GPU` before
    each arrival, which made the multicast GEMM 1.5x slower on an H100 (RESULTS.md,
    thirty-fifth session run 2; every consumer thread arriving so, 2.3x)."""
    return [
        _lines(
            "__device__ __forceinline__ void tinyopt_mbarrier_arrive_cluster(void* bar, "
            "unsigned rank) {",
            "    unsigned remote;",
            '    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"',
            f'                 : "=r"(remote) : "r"({_shared("bar")}), "r"(rank));',
            '    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];"',
            '                 :: "r"(remote) : "memory");',
            "}",
        ),
        _lines(
            "__device__ __forceinline__ void tinyopt_fence_mbarrier_init() {",
            '    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");',
            "}",
        ),
    ]


def cluster_helpers() -> list[str]:
    """Returns the device functions of the cluster ops: the barrier of every thread of the
    cluster (`tile.cluster_sync`) and the 16-byte load of another block's shared memory
    (`tile.cluster_vload`)."""
    return [
        _lines(
            "__device__ __forceinline__ void tinyopt_cluster_sync() {",
            '    asm volatile("barrier.cluster.arrive.release;" ::: "memory");',
            '    asm volatile("barrier.cluster.wait.acquire;" ::: "memory");',
            "}",
        ),
        _lines(
            "__device__ __forceinline__ void tinyopt_cluster_load_f32x4(float* out, "
            "const void* local, unsigned rank) {",
            "    unsigned remote;",
            '    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"',
            f'                 : "=r"(remote) : "r"({_shared("local")}), "r"(rank));',
            '    asm volatile("ld.shared::cluster.v4.f32 {%0, %1, %2, %3}, [%4];"',
            '                 : "=f"(out[0]), "=f"(out[1]), "=f"(out[2]), "=f"(out[3])',
            '                 : "r"(remote) : "memory");',
            "}",
        ),
    ]


def tma_load_name(rank: int, evict_first: bool, multicast: bool = False) -> str:
    """The device function of a `rank`-D `tile.tma_load`, with or without `evict_first`, to
    this block's shared memory or (`multicast`) to several blocks' of the cluster."""
    return (
        f"tinyopt_tma_load_{rank}d"
        + ("_multicast" if multicast else "")
        + ("_evict_first" if evict_first else "")
    )


def tma_load_helper(rank: int, evict_first: bool = False, multicast: bool = False) -> str:
    """Returns the device function of a `rank`-D `tile.tma_load` (coordinates innermost first);
    with `evict_first`, its copy carries an L2 evict-first cache policy; with `multicast`, it
    takes a 16-bit mask of cluster ranks after the mbarrier, and the box lands at the same
    shared-memory offset in each of those blocks, completing its bytes on the mbarrier at the
    same offset in each (`.multicast::cluster`)."""
    coords = ", ".join(f"int c{i}" for i in range(rank))
    operands = ", ".join(f"%{i + 2}" for i in range(rank))
    inputs = ", ".join(f'"r"(c{i})' for i in range(rank))
    after_bar = rank + 3  # the next operand's number after dst, map, coordinates and mbarrier
    mask_param, mask_operand, mask_input, cast = "", "", "", ""
    if multicast:
        mask_param, mask_input = "unsigned short mask, ", ', "h"(mask)'
        mask_operand, after_bar = f", %{after_bar}", after_bar + 1
        cast = ".multicast::cluster"
    hint, policy, policy_input, operands_end = "", [], "", ""
    if evict_first:
        hint, policy_input = ".L2::cache_hint", ', "l"(policy)'
        operands_end = f", %{after_bar}"
        policy = [
            "    unsigned long long policy;",
            '    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" '
            ': "=l"(policy));',
        ]
    return _lines(
        f"__device__ __forceinline__ void {tma_load_name(rank, evict_first, multicast)}("
        f"void* dst, const CUtensorMap* map, void* bar, {mask_param}{coords}) {{",
        *policy,
        f'    asm volatile("cp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.'
        f"mbarrier::complete_tx::bytes{cast}{hint} [%0], [%1, {{{operands}}}], [%{rank + 2}]"
        f'{mask_operand}{operands_end};"',
        f'                 :: "r"({_shared("dst")}), "l"(map), {inputs}, "r"({_shared("bar")})'
        f"{mask_input}{policy_input}",
        '                 : "memory");',
        "}",
    )


def tma_store_name(rank: int) -> str:
    """The device function of a `rank`-D `tile.tma_store`."""
    return f"tinyopt_tma_store_{rank}d"


def tma_store_helper(rank: int) -> str:
    """Returns the device function of a `rank`-D `tile.tma_store` (coordinates innermost
    first): the box at `src` in shared memory to the map's tensor, in the thread's bulk
    async-group."""
    coords = ", ".join(f"int c{i}" for i in range(rank))
    operands = ", ".join(f"%{i + 1}" for i in range(rank))
    inputs = ", ".join(f'"r"(c{i})' for i in range(rank))
    return _lines(
        f"__device__ __forceinline__ void {tma_store_name(rank)}("
        f"const CUtensorMap* map, const void* src, {coords}) {{",
        f'    asm volatile("cp.async.bulk.tensor.{rank}d.global.shared::cta.bulk_group '
        f'[%0, {{{operands}}}], [%{rank + 1}];"',
        f'                 :: "l"(map), {inputs}, "r"({_shared("src")})',
        '                 : "memory");',
        "}",
    )


def wgmma_desc_helper() -> str:
    """Returns the device function building a 128B-swizzled wgmma matrix descriptor."""
    return _lines(
        "__device__ __forceinline__ unsigned long long tinyopt_wgmma_desc(const void* start, "
        "unsigned lbo, unsigned sbo) {",
        f"    unsigned long long address = {_shared('start')};",
        "    return ((address & 0x3FFFF) >> 4) | ((unsigned long long)((lbo & 0x3FFFF) >> 4) "
        "<< 16) |",
        "           ((unsigned long long)((sbo & 0x3FFFF) >> 4) << 32) | (1ull << 62);",
        "}",
    )


def wgmma_name(op: tile.WgmmaOp | tile.WgmmaRegisterAOp) -> str:
    """Returns the helper name of a `tile.wgmma` or `tile.wgmma_reg_a` variant (shape, type,
    where A is, B orientation)."""
    major = "n" if op.b_mn_major is not None else "k"
    a = "_ra" if isinstance(op, tile.WgmmaRegisterAOp) else ""
    k = tile.wgmma_k(op.element)
    name = f"tinyopt_wgmma{a}_m64n{op.n.value.data}k{k}_{_wgmma_type(op)}_{major}"
    return name + ("_ta" if _a_mn_major(op) else "") + ("_set" if _overwrites(op) else "")


def _a_mn_major(op: tile.WgmmaOp | tile.WgmmaRegisterAOp) -> bool:
    """Whether the wgmma's A is an M-major tile in shared memory (wgmma's trans-a)."""
    return isinstance(op, tile.WgmmaOp) and op.a_mn_major is not None


def _overwrites(op: tile.WgmmaOp | tile.WgmmaRegisterAOp) -> bool:
    """Whether the wgmma replaces its accumulators (scale-d 0) rather than adding to them."""
    return op.overwrite is not None


_FP8_PTX = {"f8E4M3FN": "e4m3", "f8E5M2": "e5m2"}


def _wgmma_type(op: tile.WgmmaOp | tile.WgmmaRegisterAOp) -> str:
    """The PTX type of a wgmma's operands: f16, bf16, tf32 for f32 in shared memory, e4m3 or
    e5m2 for the 8-bit floats."""
    if op.element == f32:
        return "tf32"
    return _FP8_PTX.get(str(op.element), str(op.element))


def wgmma_helper(op: tile.WgmmaOp | tile.WgmmaRegisterAOp) -> str:
    """Returns the device function of one `tile.wgmma` or `tile.wgmma_reg_a` variant: all N/2
    accumulators are read-write operands, scale-d is 1 (accumulate) or, for an overwriting
    `tile.wgmma`, 0 (replace); A is a descriptor (K-major, or M-major: trans-a) or four
    packed registers, B a descriptor as the op says."""
    half = op.n.value.data // 2
    element = _wgmma_type(op)
    trans_b = 1 if op.b_mn_major is not None else 0
    registers = ", ".join(f"%{i}" for i in range(half))
    accumulators = ", ".join(f'"+f"(d[{i}])' for i in range(half))
    if isinstance(op, tile.WgmmaRegisterAOp):
        params = "unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned long long b"
        a_operand = "{" + ", ".join(f"%{half + i}" for i in range(4)) + "}"
        inputs = '"r"(a0), "r"(a1), "r"(a2), "r"(a3), "l"(b)'
        b_operand, trans = f"%{half + 4}", f"{trans_b}"  # no trans-a with A in registers
    else:
        params = "unsigned long long a, unsigned long long b"
        a_operand, inputs = f"%{half}", '"l"(a), "l"(b)'
        b_operand, trans = f"%{half + 1}", f"{int(_a_mn_major(op))}, {trans_b}"
    if element in ("tf32", *_FP8_PTX.values()):  # no transpose operands: K-major only
        trans = ""
    scale_d = half + inputs.count("(")
    return _lines(
        f"__device__ __forceinline__ void {wgmma_name(op)}(float (&d)[{half}], {params}) {{",
        '    asm volatile("{\\n.reg .pred p;\\n"',
        f'                 "setp.ne.b32 p, %{scale_d}, 0;\\n"',
        f'                 "wgmma.mma_async.sync.aligned.m64n{op.n.value.data}'
        f'k{tile.wgmma_k(op.element)}.f32.{element}.{element} "',
        f'                 "{{{registers}}}, "',
        f'                 "{a_operand}, {b_operand}, p, 1, 1{", " if trans else ""}{trans};\\n}}"',
        f"                 : {accumulators}",
        f'                 : {inputs}, "r"({0 if _overwrites(op) else 1}));',
        "}",
    )


def dynamic_layout(
    kernel: tile.KernelOp, ops: Iterable[Operation] | None = None
) -> tuple[dict[tile.AllocOp, int], int]:
    """Returns each dynamic `tile.alloc`'s byte offset in dynamic shared memory and the bytes
    the launch must request (the buffers, 1024-byte aligned, mbarrier arrays 16-byte aligned,
    plus 1024 of alignment slack).
    `ops`: the kernel's ops (or just its `tile.alloc`s) in walk order, where the caller has just
    walked it (the offsets follow that order)."""
    offsets: dict[tile.AllocOp, int] = {}
    end = 0
    for op in kernel.walk() if ops is None else ops:
        if isinstance(op, tile.AllocOp) and op.dynamic is not None:
            t = op.result.type
            assert isinstance(t, MemRefType)
            align = MBARRIER_ALIGN if t.element_type == i64 else DYNAMIC_ALIGN
            end = -(-end // align) * align
            offsets[op] = end
            end += math.prod(t.get_shape()) * t.element_type.bitwidth // 8  # type: ignore[attr-defined]
    return offsets, (end + DYNAMIC_ALIGN if offsets else 0)
