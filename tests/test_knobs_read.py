"""Each schedule rule reads exactly the knobs it declares (its `reads` and its selector).

On one program per rule: setting a knob the rule does not declare to another value of its
domain leaves the CUDA byte-identical, and each declared knob changes the CUDA for some value
(where a knob only acts beside another, `CONTEXT` sets that one too).
"""

from dataclasses import fields

import pytest
from attention_programs import attention, decode_attention
from programs import bias_gelu, matmul_plain, shifted_row_max, skinny, softmax, swiglu

from tinyopt.compiler import apply_pipeline, context, parse
from tinyopt.dialects import tile
from tinyopt.passes.tile.knobs import KNOB, Knobs, check
from tinyopt.passes.tile.planner import CONTRACTION_KNOBS
from tinyopt.passes.tile.registry import RULE_TYPES
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import DiagnosticException

RULES = {rule.name: rule for rule in RULE_TYPES}

PROGRAMS = {
    # rule: (program, the passes before tile, the knobs that make the rule take it)
    "contraction": (matmul_plain(256, 192, 128, "f32", relu=False), "fuse", ""),
    "skinny": (skinny(8, 512, 256), "fuse", ""),
    "skinny_mma": (skinny(16, 512, 256, "bf16"), "fuse", "skinny_mma=on"),
    "mma_sync": (matmul_plain(256, 192, 128), "fuse", "mma=sync"),
    "wgmma": (swiglu(2048, 128, 2560), "fuse", ""),
    "tf32": (matmul_plain(256, 192, 128, "f32"), "fuse", "mma=tf32"),
    "wgmma_3xtf32": (matmul_plain(1024, 128, 64, "f32", "nk"), "fuse", "mma=3xtf32 splitk=1"),
    "attention_decode": (
        decode_attention(1, 8, 2, 1, 300, 64),
        "decompose,fuse,flash-attention",
        "",
    ),
    # 140 heads: more work items than the H200's 132 SMs (`persistent`); 320 keys: last key
    # tiles of 64 and 128 (`atail`).
    "attention_wgmma": (
        attention(1, 140, 320, 64, "bf16", causal=True),
        "decompose,fuse,flash-attention",
        "",
    ),
    "attention": (attention(1, 1, 128, 64, "bf16"), "decompose,fuse,flash-attention", "attn=sync"),
    "attention_simt": (attention(1, 1, 128, 64, "f32"), "decompose,fuse,flash-attention", ""),
    # Rows read once past a shared vector (`evict`) beside a softmax's, read twice (`cache`).
    "row_reduction": (softmax((8, 1000)) + shifted_row_max(64, 1000), "decompose,fuse", ""),
    "elementwise": (bias_gelu((64, 256)), "fuse", ""),
    "sequential": (bias_gelu((64, 256)), "fuse", "schedule=sequential"),
}

CONTEXT = {
    ("contraction", "ws"): "copy=tma",
    ("contraction", "swizzle"): "copy=cp_async",
    ("contraction", "splitk_mode"): "splitk=2",
    ("contraction", "stages"): "copy=cp_async",
    ("wgmma", "fastmath"): "store=direct",
    ("row_reduction", "rows"): "threads=32",
}
"""Knobs that act only beside another: the other's setting."""

_fused: dict[str, ModuleOp] = {}
_lowered: dict[tuple[str, str], list[str] | None] = {}
"""`_cuda`'s results in this process: both tests lower the same (rule, knobs) pairs, and the
second lowers each rule's reference once per knob."""


def _cuda(rule: str, knobs: str) -> list[str] | None:
    """The CUDA of the rule's program under `tile{knobs}` (each kernel's source and the tensor
    maps it is launched with), or None where the knobs are refused."""
    if (rule, knobs) not in _lowered:
        _lowered[rule, knobs] = _lower(rule, knobs)
    found = _lowered[rule, knobs]
    return None if found is None else list(found)


def _lower(rule: str, knobs: str) -> list[str] | None:
    text, before, _ = PROGRAMS[rule]
    if rule not in _fused:
        _fused[rule] = apply_pipeline(parse(text), before)
    module = _fused[rule].clone()
    try:
        apply_pipeline(module, f"tile{{{knobs}}},to-cuda", context())
    except DiagnosticException:
        return None
    return [
        op.source.data + str(tile.tensor_maps(op))
        for op in module.walk()
        if isinstance(op, tile.CudaKernelOp)
    ]


def _settings(base: str, name: str) -> list[str]:
    """`base` with `name` at each other value of its domain that the domains admit (the
    domain's first such value first)."""
    given = dict(word.split("=") for word in base.split())
    default = KNOB[name].default
    out = []
    for value in KNOB[name].domain.values:
        values = {k: int(v) if v.isdigit() else v for k, v in given.items()} | {name: value}
        try:
            check(Knobs(**values))
        except ValueError:
            continue
        if value != default and str(given.get(name)) != str(value):
            out.append(" ".join(f"{k}={v}" for k, v in values.items()))
    return out


def _declared(rule: str) -> set[str]:
    declared = {name for name, _ in RULES[rule].read_knobs()} | {"schedule"}
    if RULES[rule].selector:
        declared.add(RULES[rule].selector[0])
    if rule in ("contraction", "mma_sync", "wgmma", "wgmma_3xtf32", "tf32", "skinny", "skinny_mma"):
        declared |= set(CONTRACTION_KNOBS) | {"mma"}
    return declared


def _combined(base: str, names: list[str]) -> str:
    """`base` with each of `names` in turn at the first other value its domain admits beside
    the values set before it (a name none is admitted for is left as it is)."""
    knobs = base
    for name in names:
        if settings := _settings(knobs, name)[:1]:
            knobs = settings[0]
    return knobs


@pytest.mark.parametrize("rule", list(PROGRAMS))
def test_undeclared_knobs_leave_the_cuda_unchanged(rule: str) -> None:
    """All undeclared knobs changed at once first (one lowering); where that changes the CUDA,
    each alone, so the failure names the knob."""
    base = PROGRAMS[rule][2]
    reference = _cuda(rule, base)
    assert reference, "the program must lower"
    assert f"plan = #tile.plan<{rule}," in str(_planned(rule, base))
    undeclared = sorted({f.name for f in fields(Knobs)} - _declared(rule))
    combined = _combined(base, undeclared)
    if combined != base and _cuda(rule, combined) == reference:
        return
    for name in undeclared:
        for knobs in _settings(base, name)[:1]:
            assert _cuda(rule, knobs) == reference, f"{rule} changed under {knobs}"


@pytest.mark.parametrize("rule", list(PROGRAMS))
def test_each_declared_knob_changes_the_cuda(rule: str) -> None:
    base = PROGRAMS[rule][2]
    for name, _ in RULES[rule].read_knobs():
        context_knobs = " ".join(filter(None, [base, CONTEXT.get((rule, name), "")]))
        reference = _cuda(rule, context_knobs)
        settings = _settings(context_knobs, name)
        changes = any(_cuda(rule, knobs) not in (None, reference) for knobs in settings)
        assert changes, f"no value of {name} changes the CUDA of the {rule} program"


def _planned(rule: str, knobs: str) -> ModuleOp:
    module = _fused[rule].clone()
    return apply_pipeline(module, f"plan{{{knobs}}}", context())
