"""T5-base's encoder layers, written the way Hugging Face's T5 writes them.

    tinyopt capture examples/zoo/t5.py:model

Hidden 768, 12 heads with d_kv 64, FFN 3072 with ReLU, no biases anywhere, pre-norm residuals
with T5's RMS norm (no mean subtracted, a weight and no bias, the variance computed in fp32
whatever the model's dtype). The attention scores are not scaled by 1/sqrt(d_kv) (T5 folds that
into its initialization) and the softmax runs in fp32. Left out: the relative position bias that
HF adds to the first layer's scores (a bucketed embedding of key − query positions), the
decoder, and the embeddings; the model takes hidden states and runs `layers` encoder layers and
the final norm.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class T5LayerNorm(nn.Module):
    """T5's RMS norm: `weight * x / sqrt(mean(x²) + eps)`, mean(x²) in fp32."""

    def __init__(self, hidden: int, eps: float = 1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(hidden) + 0.5)
        self.variance_epsilon = eps

    def forward(self, x: Tensor) -> Tensor:
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        x = x * torch.rsqrt(variance + self.variance_epsilon)
        if self.weight.dtype in (torch.float16, torch.bfloat16):
            x = x.to(self.weight.dtype)
        return self.weight * x


class Attention(nn.Module):
    """T5's bidirectional self-attention, without the relative position bias."""

    def __init__(self, hidden: int, heads: int, d_kv: int):
        super().__init__()
        self.heads, self.d_kv = heads, d_kv
        self.q = nn.Linear(hidden, heads * d_kv, bias=False)
        self.k = nn.Linear(hidden, heads * d_kv, bias=False)
        self.v = nn.Linear(hidden, heads * d_kv, bias=False)
        self.o = nn.Linear(heads * d_kv, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        batch = x.shape[0]
        q, k, v = (
            p(x).view(batch, -1, self.heads, self.d_kv).transpose(1, 2)
            for p in (self.q, self.k, self.v)
        )
        scores = torch.matmul(q, k.transpose(3, 2))
        weights = F.softmax(scores.float(), dim=-1).type_as(scores)
        out = torch.matmul(weights, v).transpose(1, 2).contiguous()
        return self.o(out.view(batch, -1, self.heads * self.d_kv))


class DenseReluDense(nn.Module):
    """T5's feed-forward: `wo(relu(wi(x)))`, no biases."""

    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.wi = nn.Linear(hidden, ffn, bias=False)
        self.wo = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.wo(F.relu(self.wi(x)))


class Block(nn.Module):
    """A T5 encoder block: `x + attention(norm(x))`, then `x + ffn(norm(x))`."""

    def __init__(self, hidden: int, heads: int, d_kv: int, ffn: int):
        super().__init__()
        self.attention_norm = T5LayerNorm(hidden)
        self.attention = Attention(hidden, heads, d_kv)
        self.ffn_norm = T5LayerNorm(hidden)
        self.ffn = DenseReluDense(hidden, ffn)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attention(self.attention_norm(x))
        return x + self.ffn(self.ffn_norm(x))


class T5Encoder(nn.Module):
    """T5's encoder stack and final norm, on hidden states `[batch, tokens, hidden]`."""

    def __init__(
        self, hidden: int = 768, heads: int = 12, d_kv: int = 64, ffn: int = 3072, layers: int = 1
    ):
        super().__init__()
        self.block = nn.ModuleList(Block(hidden, heads, d_kv, ffn) for _ in range(layers))
        self.final_layer_norm = T5LayerNorm(hidden)

    def forward(self, x: Tensor) -> Tensor:
        for block in self.block:
            x = block(x)
        return self.final_layer_norm(x)


def example(batch: int = 1, tokens: int = 16, **sizes: int) -> tuple[T5Encoder, tuple[Tensor]]:
    """Return T5-base's encoder layers (`sizes` overrides hidden, heads, d_kv, ffn, layers) with
    seeded random weights in eval mode, and hidden states of `batch` × `tokens`."""
    torch.manual_seed(0)
    module = T5Encoder(**sizes).eval()
    hidden = module.final_layer_norm.weight.shape[0]
    x = torch.randn(batch, tokens, hidden, generator=torch.Generator().manual_seed(1))
    return module, (x,)


def model() -> T5Encoder:
    """Return the model `tinyopt capture examples/zoo/t5.py:model` captures (one layer)."""
    return example()[0]


def example_inputs() -> tuple[Tensor]:
    """Return the hidden states `model()` is captured on: 1 × 16 tokens."""
    return example()[1]
