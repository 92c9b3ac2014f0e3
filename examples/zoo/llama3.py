"""A Llama-3-8B decoder layer, written the way Hugging Face's Llama writes it.

    tinyopt capture examples/zoo/llama3.py:model

Hidden 4096, 32 query heads and 8 key/value heads of 128 (grouped-query attention: each KV head
serves 4 query heads, repeated as HF's `repeat_kv` does), RoPE with theta 500000, RMSNorm
(eps 1e-5, in fp32), SwiGLU MLP 14336, no biases, causal attention through
`scaled_dot_product_attention(is_causal=True)`. RoPE's cos and sin are computed in `forward`
from `torch.arange` positions, as HF's `LlamaRotaryEmbedding` does; Llama 3's rescaling of the
low frequencies (rope_type "llama3") is left out, and `.to(torch.bfloat16)` rounds the
`inv_freq` buffer too (HF keeps it fp32; every implementation compared reads the same buffer).
The model takes hidden states and runs `layers` decoder layers (no embedding, final norm or LM
head).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class RMSNorm(nn.Module):
    """Llama's RMSNorm: normalized in fp32, cast back, times the weight."""

    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(hidden) + 0.5)
        self.variance_epsilon = eps

    def forward(self, x: Tensor) -> Tensor:
        dtype = x.dtype
        x = x.to(torch.float32)
        variance = x.pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * x.to(dtype)


class RotaryEmbedding(nn.Module):
    """RoPE's cos and sin for positions 0 … tokens − 1, computed in fp32."""

    def __init__(self, head_dim: int, theta: float = 500000.0):
        super().__init__()
        exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
        self.register_buffer("inv_freq", 1.0 / theta**exponents, persistent=False)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor]:
        position_ids = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
        inv_freq = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        freqs = (inv_freq @ position_ids[:, None, :].float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def rotate_half(x: Tensor) -> Tensor:
    """Return `cat(-x2, x1)` of the two halves of the last dim."""
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def repeat_kv(x: Tensor, groups: int) -> Tensor:
    """Repeat each key/value head `groups` times: `[b, kv, s, d]` → `[b, kv · groups, s, d]`."""
    batch, kv_heads, tokens, head_dim = x.shape
    x = x[:, :, None, :, :].expand(batch, kv_heads, groups, tokens, head_dim)
    return x.reshape(batch, kv_heads * groups, tokens, head_dim)


class Attention(nn.Module):
    """Grouped-query causal attention with RoPE on q and k."""

    def __init__(self, hidden: int, heads: int, kv_heads: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, hidden // heads
        self.q_proj = nn.Linear(hidden, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, hidden, bias=False)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        batch, tokens, _ = x.shape
        q, k, v = (
            p(x).view(batch, tokens, -1, self.head_dim).transpose(1, 2)
            for p in (self.q_proj, self.k_proj, self.v_proj)
        )
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        groups = self.heads // self.kv_heads
        k, v = repeat_kv(k, groups), repeat_kv(v, groups)
        out = F.scaled_dot_product_attention(
            q, k, v, dropout_p=0.0, scale=self.head_dim**-0.5, is_causal=True
        )
        return self.o_proj(out.transpose(1, 2).contiguous().reshape(batch, tokens, -1))


class MLP(nn.Module):
    """SwiGLU: `down(silu(gate(x)) * up(x))`."""

    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, ffn, bias=False)
        self.up_proj = nn.Linear(hidden, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    """A Llama decoder layer: `x + attention(norm(x))`, then `x + mlp(norm(x))`."""

    def __init__(self, hidden: int, heads: int, kv_heads: int, ffn: int):
        super().__init__()
        self.input_layernorm = RMSNorm(hidden)
        self.self_attn = Attention(hidden, heads, kv_heads)
        self.post_attention_layernorm = RMSNorm(hidden)
        self.mlp = MLP(hidden, ffn)

    def forward(self, x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
        x = x + self.self_attn(self.input_layernorm(x), cos, sin)
        return x + self.mlp(self.post_attention_layernorm(x))


class Llama3(nn.Module):
    """Llama-3-8B's decoder layers on hidden states `[batch, tokens, hidden]`."""

    def __init__(
        self,
        hidden: int = 4096,
        heads: int = 32,
        kv_heads: int = 8,
        ffn: int = 14336,
        layers: int = 1,
    ):
        super().__init__()
        self.hidden = hidden
        self.rotary_emb = RotaryEmbedding(hidden // heads)
        self.layers = nn.ModuleList(
            DecoderLayer(hidden, heads, kv_heads, ffn) for _ in range(layers)
        )

    def forward(self, x: Tensor) -> Tensor:
        cos, sin = self.rotary_emb(x)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return x


def example(batch: int = 1, tokens: int = 16, **sizes: int) -> tuple[Llama3, tuple[Tensor]]:
    """Return a Llama-3-8B layer (`sizes` overrides hidden, heads, kv_heads, ffn, layers) with
    seeded random weights in eval mode, and hidden states of `batch` × `tokens`."""
    torch.manual_seed(0)
    module = Llama3(**sizes).eval()
    x = torch.randn(batch, tokens, module.hidden, generator=torch.Generator().manual_seed(1))
    return module, (x,)


def model() -> Llama3:
    """Return the model `tinyopt capture examples/zoo/llama3.py:model` captures (one layer)."""
    return example()[0]


def example_inputs() -> tuple[Tensor]:
    """Return the hidden states `model()` is captured on: 1 × 16 tokens."""
    return example()[1]
