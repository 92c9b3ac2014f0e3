"""The PyTorch frontend: each captured op verifies, round-trips and matches torch on the CPU."""

from __future__ import annotations

import copy
import math
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from programs import load_example

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from torch import Tensor, nn  # noqa: E402

from tinyopt.backends.reference import run_reference  # noqa: E402
from tinyopt.cli import main  # noqa: E402
from tinyopt.compiler import parse  # noqa: E402
from tinyopt.frontends.torch_fx import Capture, FrontendError, capture  # noqa: E402


class Fn(nn.Module):
    """A module whose forward is `fn`, holding optional parameters and buffers."""

    def __init__(self, fn: Callable[..., Tensor], **tensors: Tensor):
        super().__init__()
        self.fn = fn
        for name, tensor in tensors.items():
            self.register_buffer(name, tensor)

    def forward(self, *xs: Tensor) -> Tensor:
        return self.fn(self, *xs)


llama = load_example("llama_block.py")


def randn(*shape: int, positive: bool = False) -> Tensor:
    x = torch.randn(*shape)
    return x.abs() + 0.5 if positive else x


def captured(module: nn.Module, *inputs: Tensor) -> tuple[Capture, list[np.ndarray]]:
    """Capture, check that the MLIR prints and re-parses verbatim, run the reference."""
    cap = capture(module, *inputs)
    text = str(cap.module)
    reparsed = parse(text)  # parses and verifies
    assert str(reparsed) == text
    return cap, run_reference(reparsed, *cap.arguments(*inputs))


def assert_matches_float64(module: nn.Module, *inputs: Tensor) -> Capture:
    """Check the float64 reference on the captured f32 program against torch in float64."""
    cap, got = captured(module, *inputs)
    with torch.no_grad():
        doubled = (x.double() if x.is_floating_point() else x for x in inputs)
        want = copy.deepcopy(module).double()(*doubled)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == tuple(w.shape)
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-6, atol=1e-6)
    return cap


def t5_position_bias(m: nn.Module, scores: Tensor) -> Tensor:
    """HF T5's bidirectional relative position bucket (32 buckets, distance 128): the log
    bucket of a key's distance truncated to an integer, an embedding of it added to scores."""
    s = scores.shape[-1]
    distance = torch.arange(s)[None, :] - torch.arange(s)[:, None]
    buckets = (distance > 0).to(torch.long) * 16
    distance = torch.abs(distance)
    logarithmic = 8 + (torch.log(distance.float() / 8) / math.log(128 / 8) * 8).to(torch.long)
    logarithmic = torch.min(logarithmic, torch.full_like(logarithmic, 15))
    buckets = buckets + torch.where(distance < 8, distance, logarithmic)
    return scores + F.embedding(buckets, m.table).permute(2, 0, 1)[None]


torch.manual_seed(0)

CASES: dict[str, tuple[nn.Module, tuple[Tensor, ...]]] = {
    "linear": (nn.Linear(8, 6), (randn(2, 3, 8),)),
    "linear_no_bias": (nn.Linear(8, 6, bias=False), (randn(5, 8),)),
    "matmul_2d": (Fn(lambda m, a, b: a @ b), (randn(4, 8), randn(8, 5))),
    "matmul_3d_2d": (Fn(lambda m, a, b: torch.matmul(a, b)), (randn(2, 4, 8), randn(8, 5))),
    "matmul_batch_broadcast": (Fn(lambda m, a, b: a @ b), (randn(2, 3, 4, 8), randn(3, 8, 5))),
    "bmm": (Fn(lambda m, a, b: torch.bmm(a, b)), (randn(3, 4, 8), randn(3, 8, 5))),
    "add_broadcast": (Fn(lambda m, a, b: a + b), (randn(2, 4, 8), randn(4, 1))),
    "sub_alpha": (Fn(lambda m, a, b: torch.sub(a, b, alpha=2)), (randn(4, 8), randn(8))),
    "mul": (Fn(lambda m, a, b: a * b), (randn(4, 8), randn(4, 8))),
    "div": (Fn(lambda m, a, b: a / b), (randn(4, 8), randn(1, 8, positive=True))),
    "scalar_operands": (Fn(lambda m, a: (a + 1.5) * 2 - 0.25 / a + (3 - a) / 4), (randn(4, 8),)),
    "pow_scalar": (Fn(lambda m, a: a.pow(2) + a**3), (randn(4, 8),)),
    "pow_tensor": (Fn(lambda m, a, b: a**b), (randn(4, 8, positive=True), randn(4, 8))),
    "rsqrt": (Fn(lambda m, a: torch.rsqrt(a)), (randn(4, 8, positive=True),)),
    "mean_keepdim": (Fn(lambda m, a: a.mean(-1, keepdim=True)), (randn(2, 4, 8),)),
    "mean_dims": (Fn(lambda m, a: a.mean(dim=(0, 2))), (randn(2, 4, 8),)),
    "mean_all": (Fn(lambda m, a: a.mean()), (randn(2, 4, 8),)),
    "sum": (Fn(lambda m, a: a.sum(1) + a.amax(1)), (randn(2, 4, 8),)),
    "softmax": (Fn(lambda m, a: F.softmax(a, dim=-1) + a.softmax(1)), (randn(2, 4, 8),)),
    "sdpa_causal": (
        Fn(lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
        (randn(2, 4, 8, 16), randn(2, 4, 8, 16), randn(2, 4, 8, 16)),
    ),
    "sdpa_scale_rank3": (
        Fn(lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.3)),
        (randn(3, 8, 16), randn(3, 8, 16), randn(3, 8, 16)),
    ),
    "sdpa_gqa_causal": (
        Fn(
            lambda m, q, k, v: F.scaled_dot_product_attention(
                q, k, v, is_causal=True, enable_gqa=True
            )
        ),
        (randn(1, 8, 6, 16), randn(1, 2, 6, 16), randn(1, 2, 6, 16)),
    ),
    # Decode and chunked prefill: Sq != Skv, GQA read natively, value heads of another size,
    # masks (boolean keeps, float adds), and torch's causal diagonal at the first key.
    "sdpa_decode_gqa": (
        Fn(lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)),
        (randn(2, 8, 1, 16), randn(2, 2, 9, 16), randn(2, 2, 9, 8)),
    ),
    "sdpa_bool_mask": (
        Fn(lambda m, q, k, v, keep: F.scaled_dot_product_attention(q, k, v, attn_mask=keep)),
        (randn(2, 3, 4, 8), randn(2, 3, 7, 8), randn(2, 3, 7, 8), torch.arange(7).view(1, 7) < 5),
    ),
    "sdpa_float_mask": (
        Fn(lambda m, q, k, v, b: F.scaled_dot_product_attention(q, k, v, attn_mask=b)),
        (randn(1, 2, 3, 8), randn(1, 2, 5, 8), randn(1, 2, 5, 8), randn(3, 5)),
    ),
    "sdpa_causal_chunk": (
        Fn(lambda m, q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True)),
        (randn(1, 2, 3, 8), randn(1, 2, 6, 8), randn(1, 2, 6, 8)),
    ),
    "silu": (Fn(lambda m, a: F.silu(a)), (randn(4, 8),)),
    "gelu": (Fn(lambda m, a: F.gelu(a)), (randn(4, 8),)),
    "gelu_tanh": (Fn(lambda m, a: F.gelu(a, approximate="tanh")), (randn(4, 8),)),
    "unary": (
        Fn(
            lambda m, a: (
                a.exp() + a.abs().log() + a.abs().sqrt() + a.tanh() + a.sigmoid() + a.relu()
            )
        ),
        (randn(4, 8),),
    ),
    "slice": (Fn(lambda m, a: a[..., :4] + a[..., 1::2] - a[:, -4:]), (randn(3, 8),)),
    "select": (Fn(lambda m, a: a[1] + a[:, -1, None]), (randn(4, 4),)),
    # A select of a dim of 1 drops it (it was kept: the next transpose moved the wrong dims).
    "select_of_a_dim_of_one": (
        Fn(lambda m, a: a[:, None][:, 0].transpose(1, 2) + a.unsqueeze(0)[0].transpose(1, 2)),
        (randn(2, 3, 4),),
    ),
    "cat_neg": (Fn(lambda m, a, b: torch.cat([-b, a], dim=-1)), (randn(2, 3), randn(2, 5))),
    "rope_tables": (
        Fn(
            lambda m, x: x * m.cos + torch.cat([-x[..., 4:], x[..., :4]], dim=-1) * m.sin,
            cos=torch.randn(6, 8).cos(),
            sin=torch.randn(6, 8).sin(),
        ),
        (randn(2, 3, 6, 8),),
    ),
    "reshape_view": (Fn(lambda m, a: a.view(4, 2, 4).reshape(8, 4).flatten()), (randn(4, 8),)),
    "transpose_permute": (
        Fn(lambda m, a: a.transpose(0, 2).contiguous().permute(1, 2, 0) + a.permute(1, 2, 0).mT),
        (randn(2, 4, 4),),
    ),
    "expand_unsqueeze": (
        Fn(lambda m, a: a[:, None].expand(-1, 3, -1) + a.unsqueeze(0)),
        (randn(3, 5),),
    ),
    "rms_norm_module": (nn.RMSNorm(8, eps=1e-5), (randn(2, 4, 8),)),
    "embedding": (nn.Embedding(10, 8), (torch.tensor([[1, 2, 9], [0, 0, 5]]),)),
    "embedding_int32_table_buffer": (
        Fn(lambda m, ids: F.embedding(ids, m.table) * 2, table=torch.randn(7, 3)),
        (torch.tensor([[6, 0], [3, 3]], dtype=torch.int32),),
    ),
    "embedding_of_computed_positions": (  # HF GPT-2's wpe(arange(S)), ids computed in f32
        Fn(
            lambda m, x: x + F.embedding(torch.arange(x.shape[1])[None] + 2, m.table),
            table=torch.randn(9, 8),
        ),
        (randn(2, 5, 8),),
    ),
    "t5_relative_position_bucket": (  # a truncation of constants, folded by torch at capture
        Fn(t5_position_bias, table=torch.randn(32, 2)),
        (randn(1, 2, 140, 140),),
    ),
    "layer_norm_module": (nn.LayerNorm(8), (randn(2, 4, 8),)),
    # nn.utils weight norm (Wav2Vec2's positional conv): v · g / ‖v‖ over all dims but one.
    "weight_norm_conv": (
        nn.utils.parametrizations.weight_norm(nn.Conv1d(4, 4, 5, padding=2, groups=2)),
        (randn(1, 4, 9),),
    ),
    "weight_norm_linear_dim_1": (
        nn.utils.parametrizations.weight_norm(nn.Linear(6, 3), dim=1),
        (randn(2, 6),),
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_op_matches_torch_in_float64(name: str) -> None:
    module, inputs = CASES[name]
    assert_matches_float64(module.eval(), *inputs)


CASTS: dict[str, Callable[[nn.Module, Tensor], Tensor]] = {
    "to_half": lambda m, a: a.to(torch.float16) * 2,
    "half_then_float": lambda m, a: a.half().float() + a,
    "bfloat16": lambda m, a: a.bfloat16() + 1,
    "to_bfloat16_and_back": lambda m, a: a.to(torch.bfloat16).to(torch.float32),
    "mixed_promotion": lambda m, a: a.bfloat16() * a,
}


@pytest.mark.parametrize("name", list(CASTS))
def test_cast_matches_torch(name: str) -> None:
    x = randn(4, 8)
    module = Fn(CASTS[name])
    cap, (got,) = captured(module, x)
    assert "graph.cast" in str(cap.module)
    want = module(x)
    np.testing.assert_allclose(got, want.float().numpy(), rtol=1e-2, atol=1e-2)


def test_bf16_module_matches_torch_within_bf16_tolerance() -> None:
    module = nn.Linear(16, 8).to(torch.bfloat16)
    x = randn(4, 16).bfloat16()
    cap, (got,) = captured(module, x)
    assert "tensor<4x16xbf16>" in str(cap.module)
    want = module(x).float().detach().numpy()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 1e-2


def test_weights_follow_inputs_in_signature_order() -> None:
    class Weighted(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Linear(4, 4)
            self.register_buffer("table", torch.ones(4))
            self.scale = nn.Parameter(torch.full((4,), 2.0))

        def forward(self, x: Tensor) -> Tensor:
            return self.proj(x) * self.scale + self.table

    cap = assert_matches_float64(Weighted(), randn(3, 4))
    assert list(cap.weights) == [name for name, _ in Weighted().named_parameters()] + ["table"]
    assert list(cap.weights) == ["scale", "proj.weight", "proj.bias", "table"]
    names = [arg.name_hint for arg in cap.function.args]
    assert names == ["x", "p_scale", "p_proj_weight", "p_proj_bias", "b_table"]


def test_llama_block_matches_torch_in_float64() -> None:
    block = llama.LlamaBlock(dim=32, heads=4, kv_heads=2, hidden=48, seq=6)
    cap = assert_matches_float64(block, randn(2, 6, 32))
    text = str(cap.module)
    for op in ("graph.attention", "graph.concat", "graph.slice", "graph.rsqrt", "graph.silu"):
        assert op in text
    assert "causal = true" in text


def test_llama_block_in_bf16_matches_torch_within_bf16_tolerance() -> None:
    block = llama.LlamaBlock(dim=32, heads=4, kv_heads=2, hidden=48, seq=6).to(torch.bfloat16)
    x = randn(1, 6, 32).bfloat16()
    cap = capture(block, x)
    (got,) = run_reference(cap.module, *cap.arguments(x), dtype=None)
    with torch.no_grad():
        want = block(x).float().numpy()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < 2e-2


def test_unsupported_op_is_named_with_its_node() -> None:
    with pytest.raises(FrontendError, match=r"cannot capture aten\.erfc \(node erfc"):
        capture(Fn(lambda m, a: torch.erfc(a)), randn(4, 8))


def test_embedding_becomes_gather_on_integer_ids() -> None:
    cap = capture(nn.Embedding(10, 4), torch.tensor([[1, 2, 3]]))
    assert "graph.gather %p_weight, %input : (tensor<10x4xf32>, tensor<1x3xi64>)" in str(cap.module)


def test_truncation_of_constants_is_folded_into_an_argument() -> None:
    """T5's buckets: torch computes the truncated log of positions at capture (a device log
    could round across an integer where torch's does not); the result is one more trailing
    argument, the integers in f32."""
    cap = capture(Fn(t5_position_bias, table=torch.randn(32, 2)), randn(1, 2, 140, 140))
    (folded,) = [name for name in cap.weights if name.startswith("_folded.")]
    assert list(cap.weights)[-1] == folded
    assert cap.weights[folded].dtype == torch.float32
    assert str(cap.function.args[-1].type) == "tensor<140x140xf32>"
    assert "graph.log" not in str(cap.module)


def test_truncation_of_a_value_computed_from_the_inputs_is_refused() -> None:
    with pytest.raises(FrontendError, match=r"truncation\) of a value computed from the inputs"):
        capture(Fn(lambda m, a: (a * 3).long()), randn(4, 8))


def test_integer_arithmetic_on_an_input_is_refused() -> None:
    """Integer results are computed in f32: exact only while bounded, which an input is not."""
    with pytest.raises(FrontendError, match="aten.mul computes integers unbounded"):
        capture(Fn(lambda m, a: a * 2), torch.tensor([1, 2, 3]))


def test_batch_norm_module_in_training_mode_is_refused_by_name() -> None:
    """Refused before the trace: torch.export would make its running-statistics update
    functional, and the first op refused would be that update's integer counter."""
    block = nn.Sequential(nn.Conv1d(2, 2, 1), nn.BatchNorm1d(2), nn.ReLU(inplace=True))
    with pytest.raises(FrontendError, match=r"^BatchNorm1d 1 is in training mode .* module.eval"):
        capture(block.train(), randn(3, 2, 5))


def test_user_error_beside_a_decomposed_op_is_not_blamed_on_the_decomposition() -> None:
    """cross_entropy is captured through torch's decomposition; a refusal of the user's own
    op elsewhere in the program names that op's line and no decomposition."""
    module = Fn(lambda m, a, t: nn.functional.cross_entropy(a, t) + (t.clamp(min=0) * 2).sum())
    with pytest.raises(FrontendError, match="aten.clamp computes integers unbounded") as error:
        capture(module, randn(3, 4), torch.tensor([0, 2, 1]))
    assert "decomposition" not in str(error.value)


@pytest.mark.parametrize(
    ("fn", "op"),
    [
        (lambda m, a: a[a > 0].sum(), "aten.index"),
        (lambda m, a: a[torch.where(a > 0)[1]], "aten.where"),
    ],
)
def test_a_shape_the_values_decide_is_refused_at_the_op(fn: Callable, op: str) -> None:
    """A boolean-mask index or torch.where(cond) gives a size torch.export leaves symbolic:
    refused at that op, saying why, not at the `sym_size` node export adds after it."""
    with pytest.raises(FrontendError, match=rf"^{op} gives a result whose shape depends on the"):
        capture(Fn(fn), randn(4, 4))


def test_refusal_names_the_op_without_a_decomposition_not_one_beside_it() -> None:
    """affine_grid and pdist both lack handlers; affine_grid's decomposition is taken,
    pdist's leads to ops without one: the error names pdist (it named the first op of the
    program, affine_grid, which captures alone)."""
    module = Fn(
        lambda m, th, x: (
            F.affine_grid(th, [2, 1, 4, 4], align_corners=False).sum() + F.pdist(x).sum()
        )
    )
    with pytest.raises(FrontendError, match=r"^cannot capture aten\.pdist \(node"):
        capture(module, randn(2, 2, 3), randn(3, 4))


def test_transformer_layers_given_a_float_causal_mask_get_a_hint() -> None:
    """nn.TransformerEncoder compares a float mask with a causal one to choose its path: a
    read of the values torch.export cannot trace. The error says to pass is_causal, with
    which the same module captures."""
    layer = nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False).eval()
    mask = nn.Transformer.generate_square_subsequent_mask(5)

    class Encode(nn.Module):
        def __init__(self, is_causal: bool | None) -> None:
            super().__init__()
            self.encoder, self.is_causal = encoder, is_causal

        def forward(self, x: Tensor) -> Tensor:
            return self.encoder(x, mask=mask, is_causal=self.is_causal)

    with pytest.raises(FrontendError, match="pass is_causal=True"):
        capture(Encode(None), randn(2, 5, 16))  # torch's default: look at the mask
    assert "graph.attention" in str(capture(Encode(True), randn(2, 5, 16)).module)


def test_float64_is_rejected() -> None:
    with pytest.raises(FrontendError, match="dtype torch.float64 is not supported"):
        capture(Fn(lambda m, a: a * 2), randn(4, 8).double())


def test_untraceable_module_is_a_frontend_error() -> None:
    def data_dependent(m: nn.Module, a: Tensor) -> Tensor:
        return a if a.sum() > 0 else -a

    with pytest.raises(FrontendError, match="torch.export cannot trace Fn"):
        capture(Fn(data_dependent), randn(4, 8))


def test_capture_is_one_trace_with_the_garbage_collector_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A capture runs torch.export once (no second trace, no run_decompositions), with the
    cyclic garbage collector off: its full passes over torch's objects during the first
    export's imports were a third of a cold capture (compile time, issue 21). The collector is
    back on after, an error included; one the caller turned off stays off."""
    import gc

    from torch.export import ExportedProgram

    export, collecting = torch.export.export, []

    def traced(*args: object, **kwargs: object) -> ExportedProgram:
        collecting.append(gc.isenabled())
        return export(*args, **kwargs)

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("capture ran run_decompositions")

    monkeypatch.setattr(torch.export, "export", traced)
    monkeypatch.setattr(ExportedProgram, "run_decompositions", refused)
    assert gc.isenabled()
    capture(llama.block(), *llama.example_inputs())
    assert collecting == [False] and gc.isenabled()
    with pytest.raises(FrontendError):
        capture(Fn(lambda m, a: torch.erfc(a)), randn(4, 8))
    assert collecting == [False, False] and gc.isenabled()
    gc.disable()
    try:
        capture(nn.Linear(4, 4), randn(2, 4))
        assert not gc.isenabled()
    finally:
        gc.enable()
    assert collecting == [False, False, False]


EXAMPLE = str(Path(__file__).parent.parent / "examples" / "llama_block.py")


def test_cli_captures_the_example_block(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capture", f"{EXAMPLE}:block"]) == 0
    module = parse(capsys.readouterr().out)
    block = llama.block()
    (x,) = llama.example_inputs()
    cap = capture(block, x)
    assert str(module) == str(cap.module)


def test_cli_captures_the_example_model_on_its_token_ids(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`model_inputs()` gives the ids: NAME_inputs() is preferred over example_inputs()."""
    assert main(["capture", f"{EXAMPLE}:model"]) == 0
    text = capsys.readouterr().out
    assert "func.func @forward(%ids: tensor<1x16xi64>" in text
    assert text.count("graph.attention") == 2 and "graph.gather" in text
    assert main(["capture", f"{EXAMPLE}:model", "--inputs", "1x16xi32"]) == 0
    assert "func.func @forward(%ids: tensor<1x16xi32>" in capsys.readouterr().out


def test_cli_capture_with_input_shapes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "mlp.py"
    source.write_text(
        "import torch\nmlp = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.SiLU())\n"
    )
    assert main(["capture", f"{source}:mlp", "--inputs", "3x8xf32", "--name", "mlp"]) == 0
    text = capsys.readouterr().out
    assert "func.func @mlp(%input: tensor<3x8xf32>" in text
    assert "graph.silu" in text and "graph.linear" in text


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["nofile.py:m"], "cannot load nofile.py"),
        ([f"{EXAMPLE}:missing"], "defines no 'missing'"),
        ([f"{EXAMPLE}:rotate_half"], "TypeError"),
        ([f"{EXAMPLE}:block", "--inputs", "2x3xf64"], "bad input spec '2x3xf64'"),
        ([f"{EXAMPLE}:block", "--inputs", "1x16x32xf32"], "torch.export cannot trace"),
    ],
)
def test_cli_capture_errors(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["capture", *argv]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tinyopt: error: ") and message in err


def test_cli_capture_without_torch_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    assert main(["capture", f"{EXAMPLE}:block"]) == 1
    assert "needs PyTorch: pip install -e '.[torch]'" in capsys.readouterr().err


class _Recurrent(nn.Module):
    """An RNN module's outputs as a flat tuple: the sequence, then h_n (and c_n)."""

    def __init__(self, rnn: nn.Module):
        super().__init__()
        self.rnn = rnn

    def forward(self, x: Tensor, *states: Tensor) -> tuple[Tensor, ...]:
        given = (states if len(states) > 1 else states[0]) if states else None
        y, state = self.rnn(x, given) if given is not None else self.rnn(x)
        return (y, *state) if isinstance(state, tuple) else (y, state)


RECURRENT = {
    "lstm_batch_first": (nn.LSTM(4, 5, batch_first=True), (randn(2, 3, 4),)),
    "lstm_two_layers_initial_states": (
        nn.LSTM(4, 5, num_layers=2),
        (randn(3, 2, 4), randn(2, 2, 5), randn(2, 2, 5)),
    ),
    "lstm_bidirectional_no_bias": (
        nn.LSTM(4, 6, num_layers=2, bidirectional=True, bias=False),
        (randn(4, 1, 4),),
    ),
    "gru_bidirectional_two_layers": (
        nn.GRU(4, 5, num_layers=2, bidirectional=True, batch_first=True),
        (randn(2, 5, 4), randn(4, 2, 5)),
    ),
    "rnn_tanh_two_layers": (nn.RNN(4, 5, num_layers=2), (randn(3, 2, 4), randn(2, 2, 5))),
    "rnn_relu_bidirectional": (
        nn.RNN(4, 5, nonlinearity="relu", bidirectional=True, batch_first=True),
        (randn(2, 3, 4),),
    ),
}


@pytest.mark.parametrize("name", list(RECURRENT))
def test_recurrent_modules_unroll_as_torch_computes_them(name: str) -> None:
    """nn.LSTM / nn.GRU / nn.RNN unrolled over their time steps (layers, directions, batch_first,
    initial states, no biases): every output equals torch's in float64."""
    rnn, inputs = RECURRENT[name]
    assert_matches_float64(_Recurrent(rnn).eval(), *inputs)


@pytest.mark.parametrize("cell", [nn.LSTMCell(4, 5), nn.GRUCell(4, 5, bias=False)])
def test_recurrent_cells_match_torch(cell: nn.Module) -> None:
    lstm = isinstance(cell, nn.LSTMCell)
    states = (randn(3, 5), randn(3, 5)) if lstm else (randn(3, 5),)

    class Step(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.cell = cell

        def forward(self, x: Tensor, *s: Tensor) -> tuple[Tensor, ...]:
            out = self.cell(x, s if lstm else s[0])
            return out if isinstance(out, tuple) else (out,)

    assert_matches_float64(Step().eval(), randn(3, 4), *states)


def test_recurrent_module_in_training_mode_is_refused() -> None:
    with pytest.raises(FrontendError, match=r"aten\.lstm in training mode"):
        capture(_Recurrent(nn.LSTM(4, 5)).train(), randn(3, 2, 4))
