"""The forms of `graph.attention` beyond one shape for q, k and v: grouped-query heads read
natively (k and v `[B, KV, Skv, D]`), Sq ≠ Skv (decode, chunked prefill), a value head size of
its own, a boolean or additive mask, and causal masking aligned to the end of the keys.

The reference executor is checked against torch's `scaled_dot_product_attention` (CPU), and
the fused loop IR of `decompose,fuse,flash-attention` against the reference (float64); each
form lowers to one kernel, and the bf16 ones compile with NVRTC.
"""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.backends import check
from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import random_inputs, run_reference
from tinyopt.compiler import apply_pipeline, parse
from tinyopt.dialects import tile

FUSED = "decompose,fuse,flash-attention"


def attention(
    shape: tuple[int, int, int, int, int, int, int],
    dtype: str = "f32",
    causal: bool = False,
    mask: tuple[tuple[int, ...], str] | None = None,
) -> str:
    """`graph.attention` with q `[B, H, Sq, D]`, k `[B, KV, Skv, D]`, v `[B, KV, Skv, Dv]`
    for `shape` = (B, H, KV, Sq, Skv, D, Dv), and a mask of (shape, element type)."""
    b, h, kv, sq, skv, d, dv = shape

    def t(*dims: int, element: str = dtype) -> str:
        return f"tensor<{'x'.join(map(str, dims))}x{element}>"

    q, k, v, out = t(b, h, sq, d), t(b, kv, skv, d), t(b, kv, skv, dv), t(b, h, sq, dv)
    args, operands, types = f"%q: {q}, %k: {k}, %v: {v}", "%q, %k, %v", f"{q}, {k}, {v}"
    if mask is not None:
        m = t(*mask[0], element=mask[1])
        args, operands, types = f"{args}, %m: {m}", f"{operands}, %m", f"{types}, {m}"
    flag = ", causal = true" if causal else ""
    return (
        f"func.func @att({args}) -> {out} {{\n"
        f"  %y = graph.attention {operands} {{scale = 0.25 : f32{flag}}} : ({types}) -> {out}\n"
        f"  func.return %y : {out}\n}}"
    )


FORMS = {
    "decode_gqa": dict(shape=(2, 4, 2, 1, 37, 16, 16)),
    "chunk_causal_mqa": dict(shape=(1, 4, 1, 5, 40, 16, 8), causal=True),
    "bool_key_mask": dict(shape=(2, 2, 2, 3, 9, 8, 8), mask=((2, 1, 1, 9), "i1")),
    "float_mask_causal": dict(shape=(2, 2, 1, 6, 6, 8, 8), mask=((1, 2, 6, 6), "f32"), causal=True),
    "causal_square": dict(shape=(1, 2, 2, 7, 7, 8, 8), causal=True),
    "decode_causal_masked": dict(
        shape=(2, 4, 2, 1, 11, 8, 4), causal=True, mask=((2, 1, 1, 11), "i1")
    ),
    "chunk_causal_one_key_each": dict(shape=(1, 3, 1, 4, 4, 8, 8), causal=True),
}


def torch_sdpa(q, k, v, mask, causal, groups):  # noqa: ANN001, ANN201 (numpy in, numpy out)
    """torch's SDPA in float64, the causal diagonal aligned to the end of the keys (torch's
    own `is_causal` aligns it to the start, so it is passed as a boolean mask)."""
    torch = pytest.importorskip("torch")
    q, k, v = (torch.from_numpy(np.asarray(x, np.float64)) for x in (q, k, v))
    sq, skv = q.shape[-2], k.shape[-2]
    keep = None if mask is None else torch.from_numpy(mask)
    if keep is not None and keep.dtype != torch.bool:
        keep = keep.double()
    if causal:
        below = torch.ones(sq, skv, dtype=torch.bool).tril(skv - sq)
        if keep is None or keep.dtype == torch.bool:
            keep = below if keep is None else keep & below
        else:
            keep = keep.masked_fill(~below, float("-inf"))
    out = torch.nn.functional.scaled_dot_product_attention(
        q, k, v, attn_mask=keep, scale=0.25, enable_gqa=groups > 1
    )
    return out.numpy()


@pytest.mark.parametrize("form", FORMS, ids=list(FORMS))
def test_reference_matches_torch(form: str) -> None:
    spec = FORMS[form]
    program = parse(attention(**spec))
    inputs = random_inputs(program, seed=5)
    mask = inputs[3] if len(inputs) == 4 else None
    if mask is not None and mask.dtype == np.bool_:
        mask[..., 0] = True  # a row masked everywhere is NaN in torch, the mean of v here
    (ours,) = run_reference(program, *inputs)
    shape = spec["shape"]
    expected = torch_sdpa(*inputs[:3], mask, spec.get("causal", False), shape[1] // shape[2])
    np.testing.assert_allclose(ours, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("form", FORMS, ids=list(FORMS))
def test_fused_loop_ir_matches_reference(form: str) -> None:
    program = parse(attention(**FORMS[form]))
    fused = apply_pipeline(program.clone(), FUSED)
    kernels = [op for op in fused.ops if op.name == "loop.kernel"]
    assert len(kernels) == 1, "the attention forms fuse into one kernel"
    inputs = random_inputs(program, seed=7)
    graph = check.graph_function(program)
    (actual,) = run_loop_module(fused, graph.sym_name.data, *inputs)
    (exact,) = run_reference(program, *inputs)
    np.testing.assert_allclose(actual, exact, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("form", FORMS, ids=list(FORMS))
def test_bf16_forms_compile(form: str) -> None:
    from tinyopt.backends.cuda.cache import cached_compile

    spec = dict(FORMS[form])
    b, h, kv, sq, skv, _, _ = spec["shape"]
    spec["shape"] = (b, h, kv, sq, skv, 64, 64)
    if "mask" in spec:
        dims, element = spec["mask"]
        spec["mask"] = (dims, "bf16" if element == "f32" else element)
    module = apply_pipeline(parse(attention(**spec, dtype="bf16")), f"{FUSED},tile,to-cuda")
    (kernel,) = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    cached_compile(kernel.source.data, kernel.sym_name.data)


def test_mask_of_another_float_type_is_refused() -> None:
    text = attention((1, 2, 2, 3, 4, 8, 8), mask=((1, 1, 3, 4), "f16"))
    with pytest.raises(DiagnosticException, match="mask element type must be f32"):
        parse(text)
