"""`graph.attention` with a mask and causal masking together, where rows or whole key tiles are
masked, against the float64 reference on the CPU.

A boolean mask gives the keys it masks the lowest finite score, so a row whose every key is
masked averages v over its keys (torch gives NaN there); with `causal`, over the keys the row
sees (j ≤ i + Skv − Sq), never over keys past that bound (the tiled kernels do not load those).
Before the fix decompose applied the causal mask first with the lowest finite value, so such
a row averaged v over every key (run_gpu.py seed 1, cases 603-605 and 1842), and the
tensor-core kernels gave it 0 (the mask's fill, the lowest finite value, times log2 e is −inf;
decompose now fills with −2^127, and the kernel subtracts before multiplying where a score
expression selects a constant that low, as a spelled-out `masked_fill(~keep, finfo.min)`).

Checked: the reference itself (against torch SDPA where a row keeps a key, and the mean of the
visible v where it keeps none), the loop IR of several pipelines in f32, bf16 and f16, and the
generated CUDA run on the CPU emulation (tests/cpu_cuda.py, needs g++): the f32 generic kernel
of the fuzzer's pipeline, and the `attn=sync` tensor-core kernel over several query and key
tiles with Sq ≠ Skv and GQA.
"""

from __future__ import annotations

import numpy as np
import pytest
from cpu_cuda import COMPILER, run_on_cpu
from test_attention_forms import attention, torch_sdpa
from xdsl.dialects import func
from xdsl.ir import BlockArgument

from tinyopt.backends import check
from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import random_inputs, run_reference
from tinyopt.compiler import apply_pipeline, lower, parse
from tinyopt.dialects import loop, tile
from tinyopt.passes.loop_rewrites.flash_attention import FLASH_ATTR

requires_gxx = pytest.mark.skipif(COMPILER is None, reason="g++ not found")


def keys_off(count: int):  # noqa: ANN201 (a mask maker)
    """The first `count` keys masked for every query (a padding mask at the front)."""

    def make(mask: np.ndarray) -> None:
        mask[...] = True
        mask[..., :count] = False

    return make


def rows_off(*rows: int):  # noqa: ANN201
    """A random mask (seeded) with `rows` masked everywhere."""

    def make(mask: np.ndarray) -> None:
        mask[...] = np.random.default_rng(11).random(mask.shape) < 0.6
        mask[..., list(rows), :] = False

    return make


def minus_inf_rows(*rows: int):  # noqa: ANN201
    """A float mask of random values, a third of them −inf, with `rows` −inf everywhere: such
    rows give 0, as torch's attention does, on every pipeline (the decomposed softmax too)."""

    def make(mask: np.ndarray) -> None:
        rng = np.random.default_rng(13)
        mask[...] = np.where(rng.random(mask.shape) < 0.3, -np.inf, rng.standard_normal(mask.shape))
        mask[..., list(rows), :] = -np.inf

    return make


def random_mask(mask: np.ndarray) -> None:
    mask[...] = np.random.default_rng(12).random(mask.shape) < 0.5


CASES = {
    # The fuzzer's program (cases 603-605): a key mask broadcast over the query rows.
    "causal_key_mask_rows_fully_masked": (
        dict(shape=(2, 1, 1, 14, 14, 4, 8), causal=True, mask=((2, 1, 1, 14), "i1")),
        keys_off(5),
    ),
    "causal_random_key_mask": (
        dict(shape=(2, 1, 1, 14, 14, 4, 8), causal=True, mask=((2, 1, 1, 14), "i1")),
        random_mask,
    ),
    # Sq < Skv: row i sees the keys j ≤ i + 6; the first 9 keys masked leaves rows 0-2 none.
    "causal_chunk_gqa_key_mask": (
        dict(shape=(1, 4, 2, 5, 11, 8, 4), causal=True, mask=((1, 1, 1, 11), "i1")),
        keys_off(9),
    ),
    "causal_full_mask_rows_off_gqa": (
        dict(shape=(2, 2, 1, 6, 9, 8, 8), causal=True, mask=((2, 2, 6, 9), "i1")),
        rows_off(0, 4),
    ),
    "mask_rows_off": (
        dict(shape=(1, 2, 2, 7, 7, 8, 8), mask=((1, 2, 7, 7), "i1")),
        rows_off(2, 6),
    ),
    "every_key_masked": (
        dict(shape=(1, 2, 2, 3, 9, 8, 8), mask=((1, 1, 1, 1), "i1")),
        keys_off(1),
    ),
    "causal_additive_mask": (
        dict(shape=(2, 2, 1, 6, 6, 8, 8), causal=True, mask=((1, 2, 6, 6), "f32")),
        None,
    ),
    "additive_mask_rows_minus_inf": (
        dict(shape=(1, 4, 2, 7, 9, 8, 8), mask=((1, 4, 7, 9), "f32")),
        minus_inf_rows(0, 5),
    ),
    "causal_additive_mask_rows_minus_inf": (
        dict(shape=(2, 2, 1, 6, 6, 8, 8), causal=True, mask=((1, 2, 6, 6), "f32")),
        minus_inf_rows(3),
    ),
}

TOLERANCE = {"f32": 1e-5, "bf16": 2e-2, "f16": 2e-2}


def program_and_inputs(
    spec: dict, make_mask, dtype: str = "f32", seed: int = 3
) -> tuple[str, list[np.ndarray]]:
    """The attention program of `spec` in `dtype` and its inputs, the mask made by
    `make_mask` (a float mask keeps its random values)."""
    spec = dict(spec)
    if dtype != "f32" and spec.get("mask", (None, "i1"))[1] != "i1":
        spec["mask"] = (spec["mask"][0], dtype)
    text = attention(**spec, dtype=dtype)
    inputs = random_inputs(parse(text), seed)
    if make_mask is not None:
        make_mask(inputs[3])
    return text, inputs


def relative(out: np.ndarray, ref: np.ndarray) -> float:
    assert np.isfinite(out).all()
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


def visible_mean(q, k, v, mask, causal: bool) -> np.ndarray:  # noqa: ANN001
    """Attention computed row by row over the keys each row sees and keeps: the mean of v
    over the keys it sees where it keeps none (float64; k and v repeated to the query heads)."""
    groups = q.shape[1] // k.shape[1]
    k, v = (np.repeat(np.asarray(x, np.float64), groups, axis=1) for x in (k, v))
    b, h, sq, _ = q.shape
    skv = k.shape[2]
    keep = np.broadcast_to(mask, (b, h, sq, skv))
    out = np.zeros((b, h, sq, v.shape[-1]))
    for n, head, i in np.ndindex(b, h, sq):
        seen = np.arange(skv) <= (i + skv - sq if causal else skv - 1)
        kept = seen & keep[n, head, i]
        if not kept.any():
            out[n, head, i] = v[n, head, seen].mean(axis=0)
            continue
        s = (k[n, head] @ np.asarray(q[n, head, i], np.float64)) * 0.25
        p = np.where(kept, np.exp(s - s[kept].max()), 0.0)
        out[n, head, i] = p @ v[n, head] / p.sum()
    return out


@pytest.mark.parametrize("case", [c for c in CASES if CASES[c][0]["mask"][1] == "i1"])
def test_reference_averages_the_visible_keys_of_a_fully_masked_row(case: str) -> None:
    spec, make_mask = CASES[case]
    text, inputs = program_and_inputs(spec, make_mask)
    (ours,) = run_reference(parse(text), *inputs)
    expected = visible_mean(*inputs, spec.get("causal", False))
    np.testing.assert_allclose(ours, expected, rtol=1e-10, atol=1e-12)


def test_reference_matches_torch_where_every_row_keeps_a_key() -> None:
    spec, make_mask = CASES["causal_random_key_mask"]
    text, inputs = program_and_inputs(spec, make_mask)
    inputs[3][..., 0] = True  # key 0 is visible to every row
    (ours,) = run_reference(parse(text), *inputs)
    expected = torch_sdpa(*inputs, causal=True, groups=1)
    np.testing.assert_allclose(ours, expected, rtol=1e-10, atol=1e-12)


LOOP_PIPELINES = (
    "decompose,fuse",
    "decompose,fuse,online-softmax",
    "decompose,fuse,flash-attention",
    "fuse,flash-attention,online-softmax,welford",
)


@pytest.mark.parametrize("dtype", ["f32", "bf16", "f16"])
@pytest.mark.parametrize("case", list(CASES))
def test_loop_ir_matches_reference(case: str, dtype: str) -> None:
    spec, make_mask = CASES[case]
    text, inputs = program_and_inputs(spec, make_mask, dtype)
    program = parse(text)
    (exact,) = run_reference(program, *inputs)
    (rounded,) = run_reference(program, *inputs, dtype=None)
    for pipeline in LOOP_PIPELINES:
        module = apply_pipeline(parse(text), pipeline)
        (out,) = run_loop_module(module, "att", *inputs)
        error = min(relative(out, exact), relative(out, rounded))
        assert error < TOLERANCE[dtype], (pipeline, error)


@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_float_mask_attention_is_still_one_flash_kernel(dtype: str) -> None:
    """decompose's softmax for a float mask (floored maximum, sum at least 1) is the form
    flash-attention fuses: one kernel, its (m, l, acc) reduction tagged for the tile rules."""
    spec, make_mask = CASES["additive_mask_rows_minus_inf"]
    text, _ = program_and_inputs(spec, make_mask, dtype)
    module = apply_pipeline(parse(text), "decompose,fuse,flash-attention")
    (kernel,) = loop.kernels(module)
    assert any(FLASH_ATTR in op.attributes for op in kernel.walk())


def run_one_launch_on_cpu(text: str, pipeline: str, inputs: list[np.ndarray]) -> np.ndarray:
    """Lowers `text` to one kernel launch, runs it on the CPU emulation, returns its output
    as float64."""
    program, module = lower(text, pipeline)
    graph = check.graph_function(program)
    types = [check.element_type(t) for t in graph.function_type.inputs]
    arrays = [check.to_storage(a, t) for a, t in zip(inputs, types, strict=True)]
    arrays = [a.view(np.uint16) if a.dtype == np.float16 else a for a in arrays]
    (function,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    (launch,) = [op for op in function.walk() if isinstance(op, loop.LaunchOp)]
    (kernel,) = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    (output,) = [a for a in launch.args if not isinstance(a, BlockArgument)]
    element = check.element_type(output.type)
    out = np.zeros(output.type.get_shape(), np.float32 if str(element) == "f32" else np.uint16)
    buffers = [out if a is output else arrays[a.index] for a in launch.args]
    result = run_on_cpu(kernel, buffers)[list(launch.args).index(output)]
    if str(element) == "f16":
        return result.view(np.float16).astype(np.float64)
    return check.from_storage(result, element)


@requires_gxx
def test_generic_kernel_of_the_fuzz_case_on_cpu() -> None:
    """The f32 flash-attention kernel on the generic rule (the fuzzer's pipeline)."""
    spec, make_mask = CASES["causal_key_mask_rows_fully_masked"]
    text, inputs = program_and_inputs(spec, make_mask)
    pipeline = (
        "decompose,fuse,flash-attention,online-softmax,welford,"
        "tile{bk=32 schedule=auto split=1 splitk=4 vec=16},to-cuda"
    )
    out = run_one_launch_on_cpu(text, pipeline, inputs)
    (exact,) = run_reference(parse(text), *inputs)
    assert relative(out, exact) < 1e-5


TENSOR_CORE_CASES = {
    # 130 queries and keys: two query tiles of 128 and three key tiles of 64. The first 70 keys
    # masked: key tile 0 masked entirely, rows 0-69 keep no key they see.
    "causal_key_tile_masked": (
        dict(shape=(1, 2, 2, 130, 130, 16, 16), causal=True, mask=((1, 1, 1, 130), "i1")),
        keys_off(70),
        "bf16",
    ),
    # Sq < Skv (row i sees j ≤ i + 60) and GQA: rows 0-9 keep no key they see.
    "causal_chunk_gqa_key_mask": (
        dict(shape=(1, 4, 2, 40, 100, 16, 16), causal=True, mask=((1, 1, 1, 100), "i1")),
        keys_off(71),
        "f16",
    ),
    "rows_masked_everywhere": (
        dict(shape=(2, 1, 1, 40, 40, 16, 16), mask=((2, 1, 40, 40), "i1")),
        rows_off(3, 39),
        "bf16",
    ),
}


@requires_gxx
@pytest.mark.parametrize("case", list(TENSOR_CORE_CASES))
def test_tensor_core_kernel_on_cpu(case: str) -> None:
    """The `attn=sync` kernel: a row keeping no key it sees averages v over those keys, not 0."""
    spec, make_mask, dtype = TENSOR_CORE_CASES[case]
    text, inputs = program_and_inputs(spec, make_mask, dtype)
    pipeline = "decompose,fuse,flash-attention,tile{attn=sync},to-cuda"
    out = run_one_launch_on_cpu(text, pipeline, inputs)
    (exact,) = run_reference(parse(text), *inputs)
    assert relative(out, exact) < 2e-2
    mask = np.broadcast_to(inputs[3], (*exact.shape[:-1], inputs[1].shape[2]))
    masked_rows = ~mask.any(axis=-1)  # rows masked everywhere (not only where they see)
    if masked_rows.any():
        assert np.abs(out[masked_rows]).max() > 0.01, "a masked row averages v, not 0"


def masked_fill_lowest(bh: int, s: int, d: int, dtype: str = "bf16") -> str:
    """softmax(where(keep, q·kᵀ·0.25, lowest finite)) · v spelled out in graph ops with an
    [s, s] boolean `keep` (`scores.masked_fill(~keep, torch.finfo(dtype).min)`)."""
    x, kt = f"tensor<{bh}x{s}x{d}x{dtype}>", f"tensor<{bh}x{d}x{s}x{dtype}>"
    sc, one = f"tensor<{bh}x{s}x{s}x{dtype}>", f"tensor<1x1x1x{dtype}>"
    keep, keep_b = f"tensor<{s}x{s}xi1>", f"tensor<{bh}x{s}x{s}xi1>"
    return f"""func.func @attention(%q: {x}, %k: {x}, %v: {x}, %keep: {keep}) -> {x} {{
  %kt = graph.transpose %k {{perm = array<i64: 0, 2, 1>}} : {x} -> {kt}
  %s = graph.matmul %q, %kt : ({x}, {kt}) -> {sc}
  %c = graph.constant dense<0.25> : {one}
  %cb = graph.broadcast %c : {one} -> {sc}
  %scaled = graph.mul %s, %cb : {sc}
  %low = graph.constant dense<-3.3895313892515355e+38> : {one}
  %lowb = graph.broadcast %low : {one} -> {sc}
  %kb = graph.broadcast %keep : {keep} -> {keep_b}
  %masked = graph.select %kb, %scaled, %lowb : {keep_b}, {sc}
  %p = graph.softmax %masked {{dim = 2 : i64}} : {sc}
  %y = graph.matmul %p, %v : ({sc}, {x}) -> {x}
  func.return %y : {x}
}}"""


@requires_gxx
def test_tensor_core_kernel_of_a_fill_with_the_lowest_value_on_cpu() -> None:
    """A user's fill with the lowest finite value (x·log2 e = −inf for it): the kernel takes
    the softmax with the subtraction first, so rows 3 and 39, masked everywhere, average v
    (they gave 0)."""
    text = masked_fill_lowest(2, 40, 16)
    inputs = random_inputs(parse(text), 3)
    inputs[3][[3, 39], :] = False
    pipeline = "fuse,flash-attention,tile{attn=sync},to-cuda"
    out = run_one_launch_on_cpu(text, pipeline, inputs)
    (exact,) = run_reference(parse(text), *inputs)
    assert relative(out, exact) < 2e-2
    assert (np.abs(out[:, [3, 39]]).max(axis=-1) > 0.01).all(), "a masked row averages v"


@requires_gxx
def test_unfused_kernels_give_rows_masked_everywhere_zero_on_cpu() -> None:
    """The CUDA of the unfused pipeline (scores, the row softmax, P·V: what runs without
    flash-attention) on the CPU emulation: rows a float mask makes −inf everywhere are 0."""
    from cpu_wgmma import run_program_on_cpu

    spec, make_mask = CASES["additive_mask_rows_minus_inf"]
    text, inputs = program_and_inputs(spec, make_mask)
    _, module = lower(text, "decompose,fuse,tile,to-cuda")
    (out,) = run_program_on_cpu(module, [np.asarray(a) for a in inputs])
    (want,) = run_reference(parse(text), *inputs)
    assert np.all(out[:, :, [0, 5]] == 0)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
