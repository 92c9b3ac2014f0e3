"""Planning: each loop kernel gets the rule that schedules it and that rule's resolved knobs.

Planning may first rewrite the kernels (a paired contraction split in two, `splitk`, stream-K's
workspace); the kernels that result are planned in turn (docs/ir.md).
"""

from __future__ import annotations

from dataclasses import fields, replace

from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.dialects import loop, tile
from tinyopt.passes.loop_rewrites.collapse_dims import collapse_dims
from tinyopt.passes.tile.attention.attention_match import is_flash_attention
from tinyopt.passes.tile.gemm.contraction_match import (
    Contraction,
    match_contraction,
    operand_types,
)
from tinyopt.passes.tile.gemm.paired import match_paired_contraction, unpair
from tinyopt.passes.tile.gemm.split_k import SPLIT_PARTIAL, split_kernel
from tinyopt.passes.tile.gemm.split_k_plan import (
    SPLIT_TF32_STEP_SECONDS,
    auto_splits,
    auto_wgmma_splits,
    cluster_split_estimate,
    small_grid,
    square_split,
    swap_splits,
    wgmma_split_estimate,
)
from tinyopt.passes.tile.gemm.wgmma_3xtf32 import Wgmma3xTf32Tiles
from tinyopt.passes.tile.gemm.wgmma_plan import CLUSTER_SPLITS, WgmmaTiles, one_wave
from tinyopt.passes.tile.gemm.wgmma_staged import Staging
from tinyopt.passes.tile.knobs import Knobs, check
from tinyopt.passes.tile.registry import emittable, refusals, rules
from tinyopt.passes.tile.rule import Choice, plan_attr
from tinyopt.passes.tile.split_reduction import (
    flatten_reductions,
    split_reduction,
    split_strided_reduction,
)
from tinyopt.passes.tile.target import Target


CONTRACTION_KNOBS = ("dual", "splitk", "splitk_mode", "streamk", "swap")
"""Knobs the planner reads for every contraction, whichever rule takes it: `dual` decides
whether a paired contraction is split, `splitk`/`splitk_mode` cut K before a rule is chosen,
`streamk=on` is refused where a tensor-core rule took the kernel, and `swap=on` where the
3xTF32 rule did not take it swapped."""


def checked(knobs: Knobs) -> Knobs:
    """Returns the knobs, or raises the diagnostic naming the first outside its domain."""
    try:
        check(knobs)
    except ValueError as e:
        raise DiagnosticException(str(e)) from None
    return knobs


def kernel_knobs(kernel: loop.KernelOp, options: Knobs) -> Knobs:
    """The knobs a kernel is planned by: the pass options, and where an option is left at its
    default the kernel's tuned value (`#tile.knobs` from `apply-tuned`)."""
    tuned = kernel.attributes.get(tile.TUNED)
    if not isinstance(tuned, tile.KnobsAttr):
        return options
    values = tuned.values
    merged = {
        f.name: getattr(options, f.name)
        if getattr(options, f.name) != f.default
        else values.get(f.name, f.default)
        for f in fields(Knobs)
    }
    return checked(Knobs(**merged))


def plan_module(module: ModuleOp, options: Knobs, target: Target, why: bool = False) -> None:
    """Plans every loop kernel of the module that has no plan yet; with `why`, each kernel
    also gets the reason each rule before its own refused it (`tile.REFUSALS`)."""
    checked(options)
    for kernel in list(loop.kernels(module)):
        given = kernel.attributes.get(tile.PLAN)
        if given is not None and not isinstance(given, tile.PlanAttr):
            raise DiagnosticException(
                f"kernel @{kernel.sym_name.data}: its {tile.PLAN} attribute must be a "
                f"#tile.plan<rule, knobs>, got {given}"
            )
        if given is None:
            collapse_dims(module, kernel)
            plan_kernels(module, kernel, kernel_knobs(kernel, options), target, why=why)
        else:
            _refuse_overridden(kernel, given, options)


def _refuse_overridden(kernel: loop.KernelOp, plan: tile.PlanAttr, options: Knobs) -> None:
    """Refuses an option the kernel's existing plan contradicts (`-p 'fuse,plan{threads=64},
    tile{threads=128}'`, or `tile{...}` on IR that carries plans): the plan is followed, so
    the option would be dropped without a word."""
    for field in fields(Knobs):
        value = getattr(options, field.name)
        # Numbers only: a word may resolve to another in the plan (`evict=once` as "b").
        if type(value) is not int or value == field.default or field.name not in plan.knobs.data:
            continue
        planned = getattr(getattr(plan.knobs.data[field.name], "value", None), "data", None)
        if type(planned) is int and planned != value:
            name = getattr(options, "name", "tile")
            raise DiagnosticException(
                f"{name}: kernel @{kernel.sym_name.data} already has a plan with "
                f"{field.name} = {planned!r}, which {name}'s option {field.name}={value} would "
                "not change (a planned kernel is emitted from its plan): drop the earlier "
                "`plan` or give it the option, or edit the plan"
            )


def _copies_k_in_boxes(choice: Choice | None) -> bool:
    """Whether the rule that plans a contraction unsplit copies K in TMA boxes (wgmma,
    wgmma_3xtf32): a split's chunks must then be whole boxes for it to take the partial
    kernel (`split_k.chunk_elements`)."""
    return choice is not None and choice.rule.name in ("wgmma", "wgmma_3xtf32")


def plan_kernels(
    module: ModuleOp,
    kernel: loop.KernelOp,
    knobs: Knobs,
    target: Target,
    split: bool = True,
    why: bool = False,
) -> None:
    """Plans `kernel`, or the kernels its plan puts in its place."""
    if (paired := match_paired_contraction(kernel)) is not None:
        if _dual(kernel, knobs, target, why):
            return
        for piece in unpair(module, kernel, paired):
            plan_kernels(module, piece, knobs, target, split, why)
        return
    splits, mode, found, clustered = knobs.splitk, knobs.splitk_mode, None, None
    aligned = knobs.mma in ("wgmma", "3xtf32")
    partial_knobs = knobs
    if split and not splits and (c := _small_grid(kernel, knobs, target)):
        found = refusals(kernel, knobs, target)
        splits, mode, clustered = _auto_splits(kernel, c, found[0], knobs, target)
        aligned = _copies_k_in_boxes(found[0])
        if (square := _square_split(c, found[0], knobs, target)) > 1:
            splits, mode = square, "twopass"
            partial_knobs = replace(knobs, bm=128, bn=128)
    hand_split = split and splits > 1 and found is None and knobs.mma == "auto"
    if hand_split and match_contraction(kernel) is not None:
        # A split set by hand: whole TMA box rows where the unsplit kernel is a wgmma rule's,
        # so that rule takes the partial kernel too (else its chunks of ⌈K / s⌉ leave it).
        aligned = _copies_k_in_boxes(refusals(kernel, knobs, target)[0])
    if split and splits > 1 and mode == "cluster" and match_contraction(kernel) is not None:
        _plan_cluster_split(
            kernel,
            replace(partial_knobs, splitk=splits, splitk_mode=mode),
            target,
            why,
            clustered,
        )
        return
    if split and splits > 1:
        pieces = split_kernel(module, kernel, splits, mode, aligned)
        if pieces != (kernel,):
            for piece in pieces:
                chosen = partial_knobs if SPLIT_PARTIAL in piece.attributes else knobs
                plan_kernels(module, piece, chosen, target, split=False, why=why)
            return
    if split and knobs.schedule == "auto":
        flatten_reductions(kernel)
        pieces = split_reduction(module, kernel, target)
        if pieces == (kernel,):
            pieces = split_strided_reduction(module, kernel, target)
        if pieces != (kernel,):
            for piece in pieces:
                plan_kernels(module, piece, knobs, target, split=False, why=why)
            return
    choice, refused = found or refusals(kernel, knobs, target)
    if choice is None:
        raise DiagnosticException(f"tile: {refused[-1][1]}")
    if knobs.mma != "auto" and choice.rule.selector is None and _sums_products(kernel):
        gemm = {r.name for r in rules(target) if r.selector and r.selector[0] == "mma"}
        reasons = "; ".join(f"{rule}: {reason}" for rule, reason in refused if rule in gemm)
        raise DiagnosticException(
            f"tile: mma={knobs.mma} cannot run kernel @{kernel.sym_name.data}, a sum of "
            f"products that no GEMM rule takes ({reasons})"
        )
    if knobs.attn not in ("auto", "none") and is_flash_attention(kernel):
        attention = {r.name for r in rules(target) if r.selector and r.selector[0] == "attn"}
        if choice.rule.name not in attention:
            reasons = "; ".join(
                f"{rule}: {why}"
                for rule, why in refused
                if rule in attention and not why.startswith("the knobs select other rules")
            )
            raise DiagnosticException(
                f"tile: attn={knobs.attn} cannot run kernel @{kernel.sym_name.data}, a "
                f"flash-attention kernel that no attention rule takes ({reasons})"
            )
    shares_k = choice.rule.name == "contraction" or (
        isinstance(choice.plan, WgmmaTiles) and choice.plan.streamk == "tail"
    )
    if knobs.streamk in ("on", "tail") and not shares_k and match_contraction(kernel) is not None:
        raise DiagnosticException(
            f"tile: streamk={knobs.streamk} does not apply: it runs on the CUDA cores' "
            "contraction rule (mma=none, or auto for f32) and, streamk=tail only, on the "
            "persistent wgmma GEMM"
        )
    _refuse_unswapped(kernel, knobs, choice, refused)
    pieces = choice.rule.rewrite(module, kernel, choice.match, choice.plan)
    # The GEMM on staged (padded) operands is a whole contraction whose K its small grid may
    # split; the pieces of other rewrites (a split's, a pair's) are not split again.
    split_pieces = split and isinstance(choice.plan, Staging)
    for piece in pieces:
        plan_kernels(module, piece, knobs, target, split=split_pieces, why=why)
    if not pieces:
        _attach(kernel, choice, refused if why else None, target)


def _small_grid(kernel: loop.KernelOp, knobs: Knobs, target: Target) -> Contraction | None:
    """The contraction of a kernel `splitk=0` may split (`split_k_plan.small_grid`), or None."""
    c = match_contraction(kernel) if knobs.schedule == "auto" else None
    return c if c is not None and small_grid(c, knobs, target) else None


Planned = tuple[Choice | None, list[tuple[str, str]]]
"""A kernel's choice and the refusals before it (`refusals`)."""


def _auto_splits(
    kernel: loop.KernelOp, c: Contraction, choice: Choice | None, knobs: Knobs, target: Target
) -> tuple[int, str, Planned | None]:
    """`splitk=0`: the split count (and `splitk_mode`) of a small-grid contraction the
    mma.sync, the wgmma or the 3xTF32 rule takes unsplit (`choice`; `split_k_plan.py`); the
    wgmma rules' partial kernels fold in a second pass (they store their sums as they are),
    or, under `splitk_mode=auto`, the wgmma rule's split over a cluster where its clusters fit
    one wave and its estimate, with no fold, is the cheaper (`cluster_split_estimate`): then
    with the plan `_clusters_fit` checked, which `_plan_cluster_split` attaches."""
    if choice is not None and choice.rule.name == "mma_sync":  # no clusters on mma.sync
        return auto_splits(c, target), knobs.splitk_mode.replace("cluster", "auto"), None
    if (
        choice is not None
        and choice.rule.name == "wgmma"
        and isinstance(t := choice.plan, WgmmaTiles)
    ):
        if t.dual == "off" and not t.persistent:
            if t.swap == "on":  # a grid of bn of M by bm of N, split in two passes only
                return wgmma_split_estimate(c, t.bn, t.bm, target)[0], "twopass", None
            splits, two_pass = wgmma_split_estimate(c, t.bm, t.tile_n, target)
            if knobs.splitk_mode == "cluster":
                return min(splits, CLUSTER_SPLITS[-1]), "cluster", None
            if knobs.splitk_mode == "auto":
                size, clustered = cluster_split_estimate(c, t.bm, t.tile_n, target)
                if (
                    size > 1
                    and clustered < two_pass
                    and (checked := _clusters_fit(kernel, c, knobs, size, target))
                ):
                    return size, "cluster", checked
            return splits, "twopass", None
    if choice is not None and isinstance(t := choice.plan, Wgmma3xTf32Tiles):
        if t.swap == "on":
            return swap_splits(c, t.bm, t.tile_n, target), "twopass", None
        splits = auto_wgmma_splits(c, t.bm, t.tile_n, target, SPLIT_TF32_STEP_SECONDS)
        return splits, "twopass", None
    return 1, knobs.splitk_mode, None


def _clusters_fit(
    kernel: loop.KernelOp, c: Contraction, knobs: Knobs, size: int, target: Target
) -> Planned | None:
    """The wgmma rule's plan of `kernel` split over clusters of `size` blocks (with the
    refusals before it) where it takes it so and its clusters, on the blocks it plans then,
    all run in one wave; else None."""
    planned = refusals(kernel, replace(knobs, splitk=size, splitk_mode="cluster"), target)
    choice = planned[0]
    if choice is None or not isinstance(t := choice.plan, WgmmaTiles) or t.cluster != size:
        return None
    return planned if one_wave(t, *c.extents[:3], target) else None


def _plan_cluster_split(
    kernel: loop.KernelOp, knobs: Knobs, target: Target, why: bool, checked: Planned | None
) -> None:
    """Plans contraction `kernel` with K split over clusters of `knobs.splitk` blocks
    (`splitk_mode=cluster`, `wgmma_cluster.py`; `checked`: the plan `_auto_splits` made under
    these knobs, else planned here), raising where the wgmma rule does not take it so."""
    choice, refused = checked or refusals(kernel, knobs, target)
    if choice is not None:
        _refuse_unswapped(kernel, knobs, choice, refused)
    planned = choice is not None and isinstance(choice.plan, WgmmaTiles)
    if not planned or choice.plan.cluster != knobs.splitk:  # type: ignore[union-attr]
        reasons = dict(refused)
        reason = reasons.get("wgmma") or (
            f"the {choice.rule.name} rule takes it" if choice else "no rule takes it"
        )
        raise DiagnosticException(
            f"tile: splitk_mode=cluster splits K over a cluster of blocks of the wgmma GEMM "
            f"(f16/bf16, mma=auto or wgmma), and kernel @{kernel.sym_name.data} is not "
            f"planned so: {reason}"
        )
    _attach(kernel, choice, refused if why else None, target)


def _refuse_unswapped(
    kernel: loop.KernelOp, knobs: Knobs, choice: Choice, refused: list[tuple[str, str]]
) -> None:
    """Raises where `swap=on` asks for a contraction no wgmma rule took swapped (the staging
    copies' GEMM is planned on its own)."""
    swapped = isinstance(choice.plan, WgmmaTiles) and choice.plan.swap == "on"
    swapped = swapped or isinstance(choice.plan, Staging)
    c = match_contraction(kernel)
    if knobs.swap != "on" or swapped or c is None:
        return
    taken = f"the {choice.rule.name} rule takes it ({' and '.join(operand_types(c))} operands)"
    reasons = dict(refused)
    raise DiagnosticException(
        f"tile: swap=on does not apply to kernel @{kernel.sym_name.data}: it swaps the sides "
        f"of the wgmma GEMMs (f16/bf16 operands, or f32 with B [N, K] on 3xTF32); "
        f"{reasons.get('wgmma') or reasons.get('wgmma_3xtf32', taken)}"
    )


def _square_split(c: Contraction, choice: Choice | None, knobs: Knobs, target: Target) -> int:
    """`splitk=0` with the block left to the rule: where the wgmma rule takes a small grid on
    64×64 blocks, the split its partial kernel runs on 128×128 blocks instead
    (`split_k_plan.square_split`), or 1."""
    if knobs.bm or knobs.bn or choice is None or not isinstance(t := choice.plan, WgmmaTiles):
        return 1
    if choice.rule.name != "wgmma" or (t.bm, t.bn) != (64, 64) or t.dual != "off":
        return 1
    return square_split(c, target)


def _sums_products(kernel: loop.KernelOp) -> bool:
    """Tells whether the kernel holds a K loop that `fuse` built from a matmul."""
    return any("tinyopt.contraction" in op.attributes for op in kernel.walk())


def _attach(
    kernel: loop.KernelOp,
    choice: Choice,
    refused: list[tuple[str, str]] | None,
    target: Target,
) -> None:
    """Puts the choice's plan on the kernel, and the rules' refusals where they are asked for;
    a plan `tile` would not emit (`emittable`) is a diagnostic here, never printed."""
    kernel.attributes[tile.PLAN] = plan_attr(choice.rule, choice.plan)
    if isinstance(found := emittable(kernel, target), str):
        raise DiagnosticException(found)
    if refused is not None:
        kernel.attributes[tile.REFUSALS] = ArrayAttr(
            [StringAttr(f"{rule}: {reason}") for rule, reason in refused]
        )


def _dual(kernel: loop.KernelOp, knobs: Knobs, target: Target, why: bool) -> bool:
    """Plans a paired contraction as one dual GEMM where a rule runs it whole and `dual`
    allows; returns whether it did (else it is to be split), raising where `dual=on` asked."""
    if knobs.dual == "off":
        return False
    choice, refused = refusals(kernel, knobs, target, paired=True)
    if choice is not None:
        _attach(kernel, choice, refused if why else None, target)
        return True
    if knobs.dual == "on":
        takers = [rule for rule in rules(target) if rule.takes_paired]
        reasons = dict(refused)
        if any(rule.considered(knobs) for rule in takers):
            reason = next(reasons[r.name] for r in reversed(takers) if r.name in reasons)
        else:
            reason = (
                f"only the {' or '.join(r.name for r in takers)} rule runs a dual GEMM "
                f"(schedule={knobs.schedule}, mma={knobs.mma})"
            )
        raise DiagnosticException(
            f"tile: dual=on cannot run kernel @{kernel.sym_name.data} as one dual GEMM: {reason}"
        )
    return False
