"""Schedule rule for f16/bf16 GEMMs whose operand rows TMA cannot address: copy those operands
into padded, aligned workspaces, then run the wgmma GEMM on them.

TMA needs every global stride but the innermost to be a multiple of 16 bytes, so the wgmma rule
(`wgmma.py`) refuses an operand whose rows are not: A `[b?, M, K]` or a K-major B `[b?, N, K]`
where K is not a multiple of 8 (a 4095-wide bf16 row is 8190 bytes), an N-major B `[b?, K, N]`
where N is not. Such a GEMM otherwise runs on `mma.sync` with 2-byte global loads (the rows
are not 16-byte aligned either), measured at 0.30x cuBLAS on the H200 (batched 4095³,
2026-12-03, benchmarks/bench_gemm_sweep.py) where wgmma runs 0.9-1.0x at aligned sizes.

The rule is tried after the wgmma rule and before `mma_sync`. Where it takes a kernel, planning
puts three kinds of loop kernels in its place (`stage_operands`): for each misaligned operand
a copy kernel writing it into a workspace whose rows are padded to `ROW_ALIGN` elements (128
bytes: one swizzle row, whole L2 lines for each TMA box row), zeros past the row's end; then
the GEMM itself reading the workspaces where it read the operands. The loop-level GEMM reads
only the original extents, so its meaning is unchanged; the wgmma rule takes it because its
check is on the buffers' rows, and TMA reads the padded columns as the zeros they hold (and
zero-fills past the workspace), so the padded products add zero. The copies are elementwise
kernels (the `elementwise` rule).

Whether the copy pays is an estimate from bytes against FLOPs (`staging_pays`): the copies read
each staged operand and write its padded workspace at `COPY_BYTES_PER_SECOND`, plus
`LAUNCH_SECONDS` for each copy kernel, and the GEMM then takes its FLOPs at
`WGMMA_FLOPS_PER_SECOND` plus its K loop (`staged_k_loop_seconds`: its steps at
`split_k_plan.WGMMA_STEP_SECONDS`, a small grid's latency, or the split the planner then gives
the GEMM on the workspaces, as any GEMM); left on `mma.sync` it would take its FLOPs at
`SYNC_FLOPS_PER_SECOND` (measured on misaligned rows) plus the time `split_k_plan` estimates
for its K loop's latency and its split (`sync_seconds`). The rule takes the kernel where the
copies and the wgmma GEMM take less time. Adding
the two terms (rather than taking the longer) chose the faster plan on 26 of the 28 misaligned
linears of the thirty-sixth session's run 1 (H100; geometric mean 1.16× cuBLAS on that run's
figures, against 1.10× for the longer), e.g. staging 1054×72×2014 (24.0 → 17.6 µs) and
1260×110×3367 (38.8 → 25.4). Square GEMMs are staged from about 1000³; small ones (a batch of
127³) stay on `mma.sync`, where two more launches would cost more than the whole product;
small products of a few hundred rows and columns and short K are staged (373×496×443 13.6 →
10.7 µs, 91×647×911 17.3 → 13.9), and so are long K loops on few blocks, the staged GEMM's K
split (H100, benchmarks/RESULTS.md thirty-ninth session run 7: 24 such linears that had run on
`mma.sync`'s split, 0.868 → 1.128× cuBLAS; 668×43×8093 42.4 → 23.8 µs). A split-K partial
kernel whose chunks are not whole 64-wide boxes is not staged: the wgmma rule would not take it
(`chunk_refusal`). At most `SKINNY_ROWS` rows per batch entry
are never staged in `auto` (the skinny and GEMV rules' shapes keep their plans).

Rows TMA addresses but that start off 32-byte L2 sectors (16 bytes past a multiple of 32: a
bf16 K ≡ 8 mod 16) slow the wgmma GEMM itself: on an H100 (benchmarks/RESULTS.md, thirty-fourth
session run 7) its kernel took 1.36-1.67 times as long as on the same operands copied to
aligned rows (3000³ 106.3 against 75.5 µs, 1000×4704×4600 118.4 against 70.7), B's rows costing
more than A's. Such operands are staged where `sector_staging` estimates the copies cheaper
than what they save (`SECTOR_SAVINGS`); the wgmma rule steps aside for it (`steps_aside`).

The knob `align` turns the rule off (`off`), or on wherever it can stage (`on`: no estimate,
and M ≤ 64 too); `auto` decides by the estimate. Under `mma=sync` or `none` the rule is not
tried; under `mma=wgmma` the wgmma rule's refusal of the misaligned kernel stands, and it keeps
rows off sectors unstaged.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import FloatAttr, MemRefType, ModuleOp
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.pattern_rewriter import PatternRewriter

from tinyopt.dialects import loop
from tinyopt.passes.tile.emit import Emitter
from tinyopt.passes.tile.gemm.contraction_match import Contraction, match_contraction
from tinyopt.passes.tile.gemm.mma_sync import tensor_core_contraction
from tinyopt.passes.tile.gemm.split_k import derived_kernel, replace_kernels
from tinyopt.passes.tile.gemm.split_k_plan import (
    WGMMA_STEP_SECONDS,
    cluster_split_estimate,
    sync_seconds,
    wgmma_split_estimate,
)
from tinyopt.passes.tile.gemm.wgmma_plan import (
    SMALL_M,
    TMA_ALIGN,
    Operands,
    chunk_refusal,
    operand_buffers,
    plain_operands,
    row_misaligned,
    wide_split_fits,
)
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.target import Target
from tinyopt.passes.tile.rule import Rule

ROW_ALIGN = 64
"""Elements a staged row is padded to a multiple of: 128 bytes of f16/bf16."""

SKINNY_ROWS = 64
"""Rows per batch entry at most which `align=auto` never stages (the skinny rules' M)."""

WGMMA_FLOPS_PER_SECOND = 660e12
"""The wgmma GEMM's bf16 rate the estimate assumes: README, 4096³ at 692 TFLOP/s on the
H200 (2026-12-01), rounded down."""

COPY_BYTES_PER_SECOND = 3.0e12
"""A copy kernel's bytes read and written per second: the H200's HBM3e gives 4.8 TB/s at most;
2-byte loads of misaligned rows are assumed to get well below that. Measured on an H100 for
rows TMA addresses (benchmarks/RESULTS.md, fifty-second session, ncu): 5000³'s two copies
(50.0 MB read, 50.6 MB written each) took 33.3 and 33.0 µs, 3.0 TB/s."""

LAUNCH_SECONDS = 3e-6
"""What one more kernel in the sequence costs besides its bytes: its launch and its ramp-up
and tail (an estimate)."""

SECTOR = 32
"""Bytes of an L2 sector: rows starting off a multiple of it read one more per TMA box row."""

SECTOR_SLOWDOWN = 1.4
"""The wgmma GEMM's time on rows off sectors over `WGMMA_FLOPS_PER_SECOND`'s (H100, thirty-fourth
session run 7: 1.30 at 3000³, 1.80 at 1000×4704×4600, 1.39 at 5000³, 1.42 at 4096×1024×3000)."""

SECTOR_SAVINGS = {"a": 0.13, "b": 0.25, "a,b": 0.32}
"""The share of that time staging the operands saves (same run, the GEMM kernel alone: A 11-15%,
B 17-32%, both 26-40% over those four shapes)."""

SYNC_FLOPS_PER_SECOND = 45e12
"""`mma.sync`'s rate on misaligned rows (2-byte loads, one 32-element row segment a warp per
load), measured on the H200: batched 3×4095³ at 45 TFLOP/s (0.30x cuBLAS's 151, 2026-12-03),
and the sweep's misaligned linears of at least 0.9 GFLOP at 25-63 TFLOP/s with their launch
(thirty-fourth session run 9: 1260×110×3367 25, 8178×773×93 29, 2448×1102×205 47,
491×5727×655 63). An earlier estimate took 0.35 of the wgmma rate (231 TFLOP/s) from that
0.30x, as if cuBLAS ran the misaligned batch at its aligned rate; it runs it at a quarter."""


@dataclass(frozen=True)
class Staging:
    """The plan: the operands copied (`a`, `b` or `a,b`). It never reaches a kernel: the
    planner puts the copies and the GEMM in the kernel's place and plans those."""

    operands: str


STAGING_IN_A_PLAN = (
    "the staging copies are made when the kernel is planned (they put kernels in its place): "
    "set align as an option of plan or tile, not in a plan"
)


@dataclass(frozen=True)
class _Operand:
    """One operand buffer to stage: its kernel argument and its type."""

    name: str
    arg: int
    type: MemRefType

    @property
    def padded(self) -> MemRefType:
        """The workspace: the buffer with its rows padded to `ROW_ALIGN` elements."""
        *outer, row = self.type.get_shape()
        return MemRefType(self.type.element_type, [*outer, -(-row // ROW_ALIGN) * ROW_ALIGN])

    def bytes_moved(self) -> int:
        """Bytes a copy reads and writes."""
        width = self.type.element_type.bitwidth // 8  # type: ignore[attr-defined]
        count = 1
        for extent in self.type.get_shape():
            count *= extent
        padded = 1
        for extent in self.padded.get_shape():
            padded *= extent
        return width * (count + padded)


def _operands_where(
    kernel: loop.KernelOp, operands: Operands, test: Callable[[MemRefType], bool]
) -> list[_Operand]:
    """A and each B of `operands` whose buffer passes `test`, each buffer once."""
    args = list(kernel.body.block.args)
    found: list[_Operand] = []
    for name, position in (("a", operands.a), *(("b", b) for b in operands.bs)):
        t = args[position].type
        assert isinstance(t, MemRefType)
        if test(t) and all(o.arg != position for o in found):
            found.append(_Operand(name, position, t))
    return found


def misaligned_operands(kernel: loop.KernelOp, c: Contraction) -> list[_Operand] | str:
    """The operand buffers of a plain-load contraction whose rows TMA cannot address, or why
    the contraction is not one the wgmma rule could take once they are staged."""
    operands = operand_buffers(c)
    if isinstance(operands, str):
        return operands
    if why := chunk_refusal(operands):  # staged, the GEMM would still be left to mma.sync
        return why
    staged = _operands_where(kernel, operands, row_misaligned)
    if not staged:
        return f"the operands' rows are multiples of {TMA_ALIGN} bytes: nothing to stage"
    return staged


def off_sectors(t: MemRefType) -> bool:
    """Whether a buffer's rows TMA addresses (whole 16 bytes) start off 32-byte sectors."""
    width = t.element_type.bitwidth // 8  # type: ignore[attr-defined]
    return not row_misaligned(t) and (t.get_shape()[-1] * width) % SECTOR != 0


def sector_staging(
    kernel: loop.KernelOp, c: Contraction, knobs: Knobs, target: Target
) -> list[_Operand] | str:
    """The operands whose rows start off sectors to stage (`off_sectors`), or why none: all of
    them under `align=on`, else those whose copies save the most by the estimate

        saved = SECTOR_SAVINGS[staged] · SECTOR_SLOWDOWN · FLOPs / WGMMA_FLOPS_PER_SECOND
                - (copies: bytes / COPY_BYTES_PER_SECOND + LAUNCH_SECONDS each)

    where that is positive (calibrated without multicast, H100, thirty-fourth session run 7:
    3000³ B, 109.4 → 101.1 µs; 5000³ both, 515.6 → 461.2; 1000×4704×4600 A, 117.8 → 105.4;
    4096×1024×3000 B, 56.4 → 46.5; not 1000³ nor 2048×2048×1000, where every copy lost). Not
    where 128×256 blocks split in two would fit one wave, a grid whose K the planner may split
    (the copies are weighed against the unsplit GEMM only); nor where the wgmma rule would not
    take the staged GEMM either (`plain_operands`: a split's chunks that are not whole TMA
    boxes); nor where the wgmma rule would share B's tiles by multicast unstaged
    (`multicasts_unstaged`)."""
    operands = plain_operands(c, c.extents[3], c.extents[2])
    if isinstance(operands, str):
        return operands
    off = _operands_where(kernel, operands, off_sectors)
    if not off:
        return f"the operands' rows start on {SECTOR}-byte sectors"
    if knobs.align == "on":
        return off
    batch, m, n, k = c.extents
    if wide_split_fits(batch, m, n, target.sms):
        return (
            "a small grid, whose K the planner may split (the copies are weighed against "
            "unsplit GEMMs only)"
        )
    if m <= SKINNY_ROWS:
        return f"M = {m} rows: the skinny and GEMV shapes are not staged (align=on does)"
    gemm = SECTOR_SLOWDOWN * 2 * batch * m * n * k / WGMMA_FLOPS_PER_SECOND
    best, best_saved = [], 0.0
    for subset in [[o] for o in off] + ([off] if len(off) > 1 else []):  # A, B, both
        copies = sum(LAUNCH_SECONDS + o.bytes_moved() / COPY_BYTES_PER_SECOND for o in subset)
        saved = SECTOR_SAVINGS[_names(subset)] * gemm - copies
        if saved > best_saved:
            best, best_saved = subset, saved
    if not best:
        return (
            f"rows start off {SECTOR}-byte sectors, but no copy would pay by the estimate "
            f"(~{gemm * 1e6:.3g} us of wgmma; align=on stages anyway)"
        )
    # Last: it plans the whole wgmma GEMM once more, which the estimate may spare.
    if knobs.multicast == "auto" and multicasts_unstaged(kernel, c, knobs, target):
        return (
            f"B's rows off {SECTOR}-byte sectors are shared by multicast instead, which halves "
            "the boxes the L2 serves (align=on stages anyway)"
        )
    return best


def multicasts_unstaged(
    kernel: loop.KernelOp, c: Contraction, knobs: Knobs, target: Target
) -> bool:
    """Whether the wgmma rule, on the operands as they are (`align=off`), would share B's tiles
    by multicast (`wgmma_multicast.multicast_pays`, which asks for B's rows off sectors, so it
    never holds after staging). Where it does, nothing is staged: on an H100 (2026-12-07,
    benchmarks/RESULTS.md forty-fifth session, calls 2 and 4) the eight linears where it held
    ran 0.747x cuBLAS (geometric mean) staged and 0.828x unstaged with multicast (3206×584×3928
    0.64 → 0.93x, 1769×2696×6616 0.56 → 0.69x, 2000×3000×8200 0.85 → 1.04x; 5788×512×4600 0.82
    → 0.78x); staging A alone beside the multicast B lost (2000×3000×8200 0.96x) or tied. The
    shapes it does not pair (3400³, 4040³, 5000³, 6000×5000×3000: odd rows of tiles or many
    waves) ran 0.65-0.74x unstaged against 0.78-0.83x staged, and stay staged."""
    from tinyopt.passes.tile.gemm.wgmma import WgmmaRule  # wgmma.py imports this module

    plan = WgmmaRule(target).plan(kernel, c, replace(knobs, align="off"))
    return not isinstance(plan, str) and plan.multicast != "off"


def steps_aside(kernel: loop.KernelOp, c: Contraction, knobs: Knobs, target: Target) -> str | None:
    """Why the wgmma rule leaves a kernel to this rule's copies (f16/bf16 operands off sectors
    worth staging, `sector_staging`), or None. Never for 8-bit floats, which this rule does not
    stage (the wgmma rule stepping aside left an FP8 GEMM to FMA on the CUDA cores)."""
    asked = knobs.streamk in ("on", "tail") or knobs.splitk > 1  # of the wgmma rule itself
    if asked or not WgmmaStagedRule.considered_under(knobs):
        return None
    if isinstance(tensor_core_contraction(c), str):  # 8-bit floats: this rule stages f16/bf16
        return None
    staged = sector_staging(kernel, c, knobs, target)
    if isinstance(staged, str):
        return None
    names = ", ".join(o.name.upper() for o in staged)
    return (
        f"steps aside for wgmma_staged: rows of {names} start off {SECTOR}-byte sectors, and "
        "copying them to aligned rows pays by the estimate (align=off keeps them)"
    )


def staged_k_loop_seconds(c: Contraction, target: Target) -> float:
    """The staged GEMM's K loop: its steps at `WGMMA_STEP_SECONDS`, or, where a small grid of
    64×64 blocks splits its K (the planner splits the GEMM on the workspaces as any other), the
    cheaper of the split's estimates, in two passes or over a cluster
    (`split_k_plan.wgmma_split_estimate`, `cluster_split_estimate`)."""
    unsplit = -(-c.extents[3] // ROW_ALIGN) * WGMMA_STEP_SECONDS
    splits, two_pass = wgmma_split_estimate(c, SMALL_M, SMALL_M, target)  # 64×64 blocks
    _, clustered = cluster_split_estimate(c, SMALL_M, SMALL_M, target)
    return min(unsplit, clustered, two_pass if splits > 1 else unsplit)


def staging_pays(c: Contraction, operands: list[_Operand], target: Target) -> tuple[bool, str]:
    """Whether the copies and the wgmma GEMM are estimated to take less time than `mma.sync`
    on the misaligned operands (module docstring), and why in words."""
    batch, m, n, k = c.extents
    flops = 2 * batch * m * n * k
    gemm = flops / WGMMA_FLOPS_PER_SECOND + staged_k_loop_seconds(c, target)
    sync = flops / SYNC_FLOPS_PER_SECOND + sync_seconds(c, target)
    moved = sum(o.bytes_moved() for o in operands)
    copies = len(operands) * LAUNCH_SECONDS + moved / COPY_BYTES_PER_SECOND
    words = (
        f"by the estimate: {len(operands)} copies of {moved / 1e6:.3g} MB "
        f"(~{copies * 1e6:.3g} us) and wgmma (~{gemm * 1e6:.3g} us) against mma_sync "
        f"(~{sync * 1e6:.3g} us)"
    )
    if copies + gemm >= sync:
        return False, words
    return True, words


class WgmmaStagedRule(Rule[Contraction, Staging]):
    """Copies the operands TMA cannot address into padded workspaces for the wgmma rule."""

    name = "wgmma_staged"
    reads = "align"
    plan_type = Staging
    selector = ("align", "on")

    def considered(self, knobs: Knobs) -> bool:
        return self.considered_under(knobs)

    @staticmethod
    def considered_under(knobs: Knobs) -> bool:
        """mma=wgmma leaves a misaligned kernel to the wgmma rule's refusal; sync and none ask
        for other rules."""
        return knobs.schedule == "auto" and knobs.align != "off" and knobs.mma == "auto"

    def match(self, kernel: loop.KernelOp) -> Contraction | str:
        return tensor_core_contraction(match_contraction(kernel))

    def plan(self, kernel: loop.KernelOp, c: Contraction, knobs: Knobs) -> Staging | str:
        operands = misaligned_operands(kernel, c)
        if isinstance(operands, str):
            off = sector_staging(kernel, c, knobs, self.target)
            return f"{operands}; {off}" if isinstance(off, str) else Staging(_names(off))
        m = c.extents[1]
        if knobs.align == "auto":
            if m <= SKINNY_ROWS:
                return f"M = {m} rows: the skinny and GEMV shapes are not staged (align=on does)"
            pays, words = staging_pays(c, operands, self.target)
            if not pays:
                return f"the copies would not pay, {words} (align=on stages anyway)"
        return Staging(_names(operands))

    def check(self, kernel: loop.KernelOp, c: Contraction, plan: Staging) -> str | None:
        return STAGING_IN_A_PLAN

    def rewrite(
        self, module: ModuleOp, kernel: loop.KernelOp, c: Contraction, plan: Staging
    ) -> list[loop.KernelOp]:
        operands = misaligned_operands(kernel, c)
        if isinstance(operands, str):  # rows off sectors: the ones the plan names
            # as `sector_staging` found them (`plain_operands`): A may be one matrix for every
            # batch entry of B (a 1×1 convolution's weight)
            found = operand_buffers(c, shared_a=True)
            assert not isinstance(found, str)
            named = plan.operands.split(",")
            operands = [o for o in _operands_where(kernel, found, off_sectors) if o.name in named]
        return stage_operands(module, kernel, operands)

    def emit(
        self, kernel: loop.KernelOp, c: Contraction, plan: Staging, rewriter: PatternRewriter
    ) -> None:
        raise AssertionError(STAGING_IN_A_PLAN)  # `check` refuses every written plan


def _names(operands: list[_Operand]) -> str:
    return ",".join(o.name for o in operands)


def stage_operands(
    module: ModuleOp, kernel: loop.KernelOp, operands: list[_Operand]
) -> list[loop.KernelOp]:
    """Puts a copy kernel per operand (`copy_kernel`) and the kernel reading the workspaces in
    `kernel`'s place; returns them in launch order."""
    name = kernel.sym_name.data
    copies = [copy_kernel(f"{name}_pad_{o.name}", o) for o in operands]
    gemm, em, mapping = derived_kernel(kernel, name, [o.padded for o in operands])
    for op in kernel.body.block.ops:
        em.op(op.clone(value_mapper=mapping))
    args = gemm.body.block.args
    extra = len(args) - len(operands)
    for i, o in enumerate(operands):
        args[o.arg].replace_all_uses_with(args[extra + i])
    kept = [i for i, arg in enumerate(args) if arg.uses]
    for arg in [a for a in args if not a.uses]:
        gemm.body.block.erase_arg(arg)

    def with_workspaces(launch: list[SSAValue]) -> tuple[list[Operation], list[list[SSAValue]]]:
        allocs = [memref.AllocOp([], [], o.padded) for o in operands]
        passed = [*launch, *(a.memref for a in allocs)]
        copied = [[launch[o.arg], a.memref] for o, a in zip(operands, allocs, strict=True)]
        return allocs, [*copied, [passed[i] for i in kept]]

    replace_kernels(module, kernel, [*copies, gemm], with_workspaces)
    return [*copies, gemm]


def copy_kernel(name: str, o: _Operand) -> loop.KernelOp:
    """`parallel(..., r, c) in the workspace { ws[..., r, c] = c < row ? src[..., r, c] : 0 }`,
    reading the source at a clamped column so every load stays in bounds."""
    padded = o.padded
    new = loop.KernelOp(name, [o.type, padded])
    source, workspace = new.body.block.args
    nest = loop.ParallelOp(padded.get_shape())
    em = Emitter(new.body.block)
    em.op(nest)
    row = o.type.get_shape()[-1]
    element: Attribute = o.type.element_type
    with em.into(nest.body.block):
        *outer, column = nest.body.block.args
        inside = em.less(column, row)
        clamped = em.value(arith.MinSIOp(column, em.index(row - 1)))
        value = em.value(memref.LoadOp.get(source, [*outer, clamped]))
        zero = em.value(arith.ConstantOp(FloatAttr(0.0, element)))  # type: ignore[arg-type]
        padded_value = em.value(arith.SelectOp(inside, value, zero))
        em.op(memref.StoreOp.get(padded_value, workspace, [*outer, column]))
    return new
