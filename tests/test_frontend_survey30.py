"""What the thirtieth session's capture survey (about 370 building blocks: LLM attention
variants, MoE routers, sampling warpers, vision and audio blocks, numerics edge cases) found:
a Python float written into an integer tensor kept its fraction (`torch.full_like(ids, 2.7)`,
`torch.full(..., dtype=torch.long)`, `new_full`, `fill_`, `masked_fill`, `F.pad`'s value, and
`torch.arange` of an integer dtype from float bounds or step), where torch truncates it toward
zero; silently wrong as values and as indices. Then blocks of popular models that the survey
captured first, each checked against torch in float64 at the graph level and, after `fuse`, at
the loop level."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

import torch.nn.functional as F  # noqa: E402
from test_frontend_survey28 import assert_matches_float64  # noqa: E402
from test_frontend_torch import Fn  # noqa: E402
from torch import Tensor, nn  # noqa: E402

INF, NAN = float("inf"), float("nan")


def _integer_fills(m: nn.Module, ids: Tensor, x: Tensor) -> tuple[Tensor, ...]:
    bounded = ids.clamp(0, 3)
    return (
        x + torch.full_like(ids, 2.7),
        x + torch.full_like(ids, -2.7),
        x + torch.full((5,), -1.5, dtype=torch.int32),
        x + ids.new_full((5,), 2.7),
        x + torch.zeros(5, dtype=torch.long).fill_(3.9),
        x + bounded.masked_fill(x > 0, 2.7),
        x[:4] + F.pad(bounded[:2], (1, 1), value=-2.7),
        x + torch.arange(0.5, 5.5, dtype=torch.long),
    )


def _integer_fills_as_indices(m: nn.Module, ids: Tensor, x: Tensor) -> tuple[Tensor, ...]:
    return (
        m.table[torch.full_like(ids, 1.9)],
        m.table[ids.clamp(0, 3).masked_fill(x > 0, -1.5)],
        m.table[torch.arange(-2.5, 2.0, 1.7, dtype=torch.long)],
    )


def test_a_float_written_into_an_integer_tensor_is_truncated() -> None:
    torch.manual_seed(0)
    ids, x = torch.tensor([0, 3, 1, 2, 3]), torch.randn(5)
    assert_matches_float64(Fn(_integer_fills), ids, x)
    lookups = Fn(_integer_fills_as_indices, table=torch.randn(4, 2))
    assert_matches_float64(lookups, ids, x)


def test_a_float_into_a_float_or_promoted_result_is_kept() -> None:
    """`where` of integers and a float promotes (2.7 stays), as does a clamp by floats."""
    ids = torch.tensor([0, 3, 1, 2, 3])

    def kept(m: nn.Module, ids: Tensor) -> tuple[Tensor, ...]:
        bounded = ids.clamp(0, 3)
        return (
            torch.where(bounded > 1, bounded, 2.7),
            bounded.clamp(0.5, 2.5),
            torch.full_like(bounded, 2.7, dtype=torch.float32),
            torch.arange(0.5, 5.5) + bounded,
        )

    assert_matches_float64(Fn(kept), ids)


# Blocks of popular models the survey captured first.


class _GemmaRMSNorm(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(d) * 0.1)

    def forward(self, x: Tensor) -> Tensor:
        out = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        return out * (1.0 + self.weight)


def _soft_capped_causal_attention(m: nn.Module, q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """Gemma 2: tanh soft-cap of the logits before the causal mask."""
    s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    s = torch.tanh(s / 50.0) * 50.0
    keep = torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).tril()
    return torch.softmax(s.masked_fill(~keep, -INF), -1) @ v


def test_gemma_rms_norm_and_soft_capped_attention() -> None:
    torch.manual_seed(0)
    assert_matches_float64(_GemmaRMSNorm(13), torch.randn(2, 5, 13))
    qkv = [torch.randn(2, 3, 7, 8) * 20 for _ in range(3)]
    assert_matches_float64(Fn(_soft_capped_causal_attention), *qkv)


def _rotate_half(x: Tensor) -> Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def _partial_rotary(m: nn.Module, q: Tensor, positions: Tensor) -> Tensor:
    """Phi / GPT-NeoX: rotary on the first 4 of 10 dims, at input positions."""
    inv = 1.0 / (10000 ** (torch.arange(0, 4, 2).float() / 4))
    freqs = positions[:, :, None].float() * inv
    emb = torch.cat((freqs, freqs), -1)
    cos, sin = emb.cos()[:, None], emb.sin()[:, None]
    rotated, passed = q[..., :4], q[..., 4:]
    return torch.cat((rotated * cos + _rotate_half(rotated) * sin, passed), -1)


def _interleaved_rotary(m: nn.Module, x: Tensor) -> Tensor:
    """GPT-J: pairs (2i, 2i+1) rotated, the tables repeat_interleave'd."""
    n, d = x.shape[1], x.shape[-1]
    inv = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float) / d))
    angles = torch.einsum("i,j->ij", torch.arange(n, dtype=torch.float), inv)
    sin = torch.repeat_interleave(angles.sin()[None, :, None, :], 2, 3)
    cos = torch.repeat_interleave(angles.cos()[None, :, None, :], 2, 3)
    rotated = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).flatten(-2)
    return x * cos + rotated * sin


def test_partial_and_interleaved_rotary() -> None:
    torch.manual_seed(0)
    positions = torch.tensor([[0, 1, 2, 3, 4], [3, 4, 5, 6, 7]])
    assert_matches_float64(Fn(_partial_rotary), torch.randn(2, 3, 5, 10), positions)
    assert_matches_float64(Fn(_interleaved_rotary), torch.randn(2, 7, 3, 8))


def _moe_router(m: nn.Module, x: Tensor) -> tuple[Tensor, ...]:
    """Top-2 of a softmax router, renormalized: dense gates by scatter, by one_hot, per-expert
    load by scatter_add and index_add, and the experts' outputs mixed by their gates."""
    logits = x @ m.gate
    weights, chosen = torch.topk(logits.softmax(-1), 2, -1)
    weights = weights / weights.sum(-1, keepdim=True)
    dense = torch.zeros_like(logits).scatter(-1, chosen, weights)
    by_one_hot = (F.one_hot(chosen, 4) * weights[..., None]).sum(1)
    load = torch.zeros_like(logits).scatter_add(1, chosen, weights)
    first = logits.new_zeros(4).index_add(0, chosen[:, 0], weights[:, 0])
    mixed = torch.einsum("td,tkde->tke", x, m.experts[chosen])
    return dense, by_one_hot, load, first, (mixed * weights[..., None]).sum(1)


def test_moe_router() -> None:
    torch.manual_seed(0)
    router = Fn(_moe_router, gate=torch.randn(6, 4), experts=torch.randn(4, 6, 6))
    assert_matches_float64(router, torch.randn(7, 6))


def _alibi_slopes(heads: int) -> Tensor:
    closest = 2 ** math.floor(math.log2(heads))
    base = 2 ** (-(2 ** -(math.log2(closest) - 3)))
    slopes = [base**i for i in range(1, closest + 1)]
    extra = 2 ** (-(2 ** -(math.log2(2 * closest) - 3)))
    slopes += [extra**i for i in range(1, 2 * (heads - closest) + 1, 2)]
    return torch.tensor(slopes)


def _bloom_alibi(m: nn.Module, scores: Tensor, mask: Tensor) -> Tensor:
    """BLOOM: positions as the padding mask's cumsum (of a bool mask: bounded), times the
    slopes of 6 heads (not a power of two)."""
    kept = mask > 0
    positions = ((kept.long().cumsum(-1) - 1) * kept)[:, None, :]
    return torch.softmax(scores + (m.slopes[None, :, None] * positions)[:, :, None, :], -1)


def _hf_causal_padding_mask(m: nn.Module, scores: Tensor, mask: Tensor) -> Tensor:
    """HF's 4-d causal mask with padding, in finfo.min, a left-padded row fully masked."""
    b, n = mask.shape
    lowest = torch.finfo(scores.dtype).min
    causal = torch.full((n, n), lowest, dtype=scores.dtype)
    index = torch.arange(n)
    causal.masked_fill_(index < (index + 1).view(n, 1), 0)
    causal = causal[None, None].expand(b, 1, n, n).clone()
    padded = (causal + mask[:, None, None, :].to(scores.dtype)) == 0
    return torch.softmax(scores + causal.masked_fill(padded, lowest), -1)


def test_alibi_and_hf_attention_masks() -> None:
    torch.manual_seed(0)
    mask = torch.tensor([[0, 1, 1, 1, 1], [1, 1, 1, 1, 1]])
    alibi = Fn(_bloom_alibi, slopes=_alibi_slopes(6))
    assert_matches_float64(alibi, torch.randn(2, 6, 5, 5), mask)
    left_padded = torch.tensor([[0, 0, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1]])
    assert_matches_float64(Fn(_hf_causal_padding_mask), torch.randn(2, 3, 6, 6), left_padded)


def test_softmax_over_rows_masked_with_minus_inf() -> None:
    """A fully masked row is NaN in softmax and log_softmax, as torch; nan_to_num after."""
    keep = torch.tensor([[True, False, True, True, False], [False] * 5, [True] * 5])

    def masked(m: nn.Module, s: Tensor, keep: Tensor) -> tuple[Tensor, ...]:
        filled = s.masked_fill(~keep, -INF)
        probs = torch.softmax(filled, -1)
        return probs, torch.log_softmax(filled, -1), torch.nan_to_num(probs)

    torch.manual_seed(0)
    assert_matches_float64(Fn(masked), torch.randn(3, 5), keep)


def _sampling_warpers(m: nn.Module, logits: Tensor) -> tuple[Tensor, ...]:
    """HF's top-p (ascending sort, the removal mask scattered back), top-k with temperature,
    and a beam step's flat top-k split into beam and token by floor division and modulo."""
    ordered, order = torch.sort(logits, descending=False)
    removed = ordered.softmax(-1).cumsum(-1) <= 0.1
    removed[..., -1:] = 0
    top_p = logits.masked_fill(removed.scatter(1, order, removed), -INF)
    top_k = logits.masked_fill(logits < torch.topk(logits, 3)[0][..., -1, None], -INF) / 0.7
    beams = logits.log_softmax(-1).view(1, -1)
    best, flat = torch.topk(beams, 4, dim=1)
    n = logits.shape[-1]
    return top_p, top_k, best, torch.div(flat, n, rounding_mode="floor"), flat % n


def test_sampling_warpers() -> None:
    torch.manual_seed(0)
    assert_matches_float64(Fn(_sampling_warpers), torch.randn(3, 11) * 2)


def _relative_positions(m: nn.Module, attn: Tensor, q: Tensor, k: Tensor) -> tuple[Tensor, ...]:
    """Swin V2's log-spaced continuous position bias with cosine attention, and DeBERTa's
    content-to-position scores gathered at clamped relative distances."""
    ws = 3
    steps = torch.arange(-(ws - 1), ws, dtype=q.dtype)
    table = torch.stack(torch.meshgrid(steps, steps, indexing="ij")).permute(1, 2, 0)
    table = table / (ws - 1) * 8
    table = torch.sign(table) * torch.log2(torch.abs(table) + 1.0) / math.log2(8)
    bias_table = F.relu(table.reshape(-1, 2) @ m.w1) @ m.w2
    coords = torch.stack(torch.meshgrid(torch.arange(ws), torch.arange(ws), indexing="ij"))
    coords = coords.flatten(1)
    rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0)
    index = (rel[..., 0] + ws - 1) * (2 * ws - 1) + rel[..., 1] + ws - 1
    bias = 16 * torch.sigmoid(bias_table[index.view(-1)].view(9, 9, -1).permute(2, 0, 1))
    cosine = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
    scale = torch.clamp(m.logit_scale, max=math.log(100.0)).exp()
    swin = (cosine * scale + bias).softmax(-1)
    n = q.shape[-2]
    distance = torch.arange(n)[:, None] - torch.arange(n)[None, :]
    c2p = torch.gather(q @ m.pos_k.t(), -1, torch.clamp(distance + 4, 0, 7).expand(2, 3, n, n))
    return swin, (q @ k.transpose(-1, -2) + c2p + attn).softmax(-1)


def test_swin_v2_and_deberta_relative_positions() -> None:
    torch.manual_seed(0)
    module = Fn(
        _relative_positions,
        w1=torch.randn(2, 8),
        w2=torch.randn(8, 3),
        logit_scale=torch.tensor([math.log(10.0), math.log(30.0), 6.0])[:, None, None],
        pos_k=torch.randn(8, 4),
    )
    inputs = torch.randn(2, 3, 9, 9), torch.randn(2, 3, 9, 4), torch.randn(2, 3, 9, 4)
    assert_matches_float64(module, *inputs)


def _detr_and_whisper(m: nn.Module, x: Tensor, padded: Tensor, spec: Tensor) -> tuple[Tensor, ...]:
    """DETR's sine position embedding from cumsums of a padding mask, and Whisper's log-mel
    (clamped log10, floored at the whole tensor's max − 8)."""
    not_mask = ~padded
    y = not_mask.cumsum(1, dtype=torch.float32)
    xs = not_mask.cumsum(2, dtype=torch.float32)
    y = y / (y[:, -1:, :] + 1e-6) * 2 * math.pi
    xs = xs / (xs[:, :, -1:] + 1e-6) * 2 * math.pi
    dim_t = 10000 ** (2 * (torch.arange(4, dtype=torch.float32) // 2) / 4)
    px, py = xs[..., None] / dim_t, y[..., None] / dim_t
    px = torch.stack((px[..., 0::2].sin(), px[..., 1::2].cos()), dim=4).flatten(3)
    py = torch.stack((py[..., 0::2].sin(), py[..., 1::2].cos()), dim=4).flatten(3)
    detr = x + torch.cat((py, px), dim=3).permute(0, 3, 1, 2)
    log_spec = torch.clamp(m.filters @ spec, min=1e-10).log10()
    log_spec = torch.maximum(log_spec, log_spec.max() - 8.0)
    return detr, (log_spec + 4.0) / 4.0


def test_detr_sine_embedding_and_whisper_log_mel() -> None:
    torch.manual_seed(0)
    padded = torch.zeros(2, 5, 7, dtype=torch.bool)
    padded[0, :, 5:] = True
    padded[0, 4:] = True
    spec = torch.rand(2, 9, 11) ** 4
    module = Fn(_detr_and_whisper, filters=torch.rand(5, 9))
    assert_matches_float64(module, torch.randn(2, 8, 5, 7), padded, spec)


def _numerics(m: nn.Module, x: Tensor, y: Tensor, halves: Tensor) -> tuple[Tensor, ...]:
    """clamp with min > max, round half to even (with decimals), floor and truncating
    division and remainder and fmod of negatives, float and integer."""
    i = x.argmax(-1) - 3
    return (
        x.clamp(1.0, -1.0),
        torch.round(halves),
        torch.round(halves, decimals=1),
        x // y,
        torch.div(x, y, rounding_mode="trunc"),
        torch.remainder(x, y),
        torch.fmod(x, y),
        (i // 2).float(),
        torch.div(i, -2, rounding_mode="trunc").float(),
        (i % 4).float(),
        torch.fmod(i, -4).float(),
    )


def test_numerics_edge_cases() -> None:
    x = torch.tensor([-7.0, 7.0, -7.0, 7.0, -0.5, 5.0, 0.0, -0.0, INF, 1.0])
    y = torch.tensor([2.0, -2.0, -2.0, 2.0, 2.0, 0.0, -3.0, 3.0, 2.0, -INF])
    halves = torch.tensor([0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.25, 0.35, 15.0, 1e7 + 0.5])
    assert_matches_float64(Fn(_numerics), x, y, halves)


def test_inverse_hyperbolic_functions() -> None:
    """asinh, acosh and atanh (refused by name before) through log1p, at tiny, moderate and
    huge arguments, ±1, ±0, ±inf and NaN: within 1e-5 of float64 and NaN where torch's is."""
    x = torch.tensor(
        [0.0, -0.0, 1e-8, -1e-8, 1e-30, 0.3, -0.7, 0.999, -0.9999, 1.0, -1.0, 1.0000001, 1.5,
         2.0, -3.0, 1e5, -1e10, 3e19, -3e38, INF, -INF, NAN]
    )  # fmt: skip
    for name in ("asinh", "acosh", "atanh", "arcsinh", "arccosh", "arctanh"):
        function = getattr(torch, name)
        assert_matches_float64(Fn(lambda m, v, f=function: f(v)), x)


def test_repeated_ids_before_a_gather() -> None:
    """`repeat` of input ids before a gather (MAE's unshuffle) is taken as `expand` is (it was
    refused as integers unbounded before the ids' bounds came from their lookups)."""
    ids = torch.tensor([[3, 0, 2, 1], [0, 1, 2, 3]])

    def unshuffle(m: nn.Module, x: Tensor, ids: Tensor) -> Tensor:
        return torch.gather(x, 1, ids.unsqueeze(-1).repeat(1, 1, 4))

    assert_matches_float64(Fn(unshuffle), torch.randn(2, 4, 4), ids)
    expanded = Fn(lambda m, x, ids: torch.gather(x, 1, ids.unsqueeze(-1).expand(-1, -1, 4)))
    assert_matches_float64(expanded, torch.randn(2, 4, 4), ids)
