"""BERT-base's encoder layers, written the way Hugging Face's BERT writes them (eager attention).

    tinyopt capture examples/zoo/bert.py:model

Hidden 768, 12 heads of 64, FFN 3072 with the exact (erf) GELU, post-LN (`LayerNorm(x + f(x))`,
eps 1e-12), biases everywhere. The padding mask is an input, `attention_mask[batch, tokens]`
(1 for a token, 0 for padding), turned into an additive mask the way HF's
`get_extended_attention_mask` does: `(1.0 - mask[:, None, None, :]) * torch.finfo(dtype).min`,
added to the scores before the softmax. HF passes the mask as int64 and casts it to the model's
dtype first; here it is given in the model's dtype already (the same values after that cast).
The model takes hidden states (the embeddings and the pooler are left out) and runs `layers`
layers.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class SelfAttention(nn.Module):
    """BERT's self-attention: q/k/v projections, scaled scores plus the mask, softmax, P·V."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, hidden // heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)

    def split_heads(self, x: Tensor) -> Tensor:
        """`[batch, tokens, hidden]` → `[batch, heads, tokens, head_dim]` (HF's
        `transpose_for_scores`)."""
        return x.view(*x.shape[:-1], self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        q, k, v = (self.split_heads(p(x)) for p in (self.query, self.key, self.value))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = F.softmax(scores + mask, dim=-1)
        context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
        return context.view(*context.shape[:-2], -1)


class Layer(nn.Module):
    """A post-LN BERT layer: attention, dense, add & norm; FFN with GELU, add & norm."""

    def __init__(self, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.attention = SelfAttention(hidden, heads)
        self.attention_dense = nn.Linear(hidden, hidden)
        self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, ffn)
        self.output = nn.Linear(ffn, hidden)
        self.output_norm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x: Tensor, mask: Tensor) -> Tensor:
        x = self.attention_norm(self.attention_dense(self.attention(x, mask)) + x)
        return self.output_norm(self.output(F.gelu(self.intermediate(x))) + x)


class Bert(nn.Module):
    """BERT's encoder on hidden states `[batch, tokens, hidden]` and a padding mask."""

    def __init__(self, hidden: int = 768, heads: int = 12, ffn: int = 3072, layers: int = 1):
        super().__init__()
        self.layer = nn.ModuleList(Layer(hidden, heads, ffn) for _ in range(layers))

    def forward(self, x: Tensor, attention_mask: Tensor) -> Tensor:
        extended = attention_mask[:, None, None, :].to(x.dtype)
        extended = (1.0 - extended) * torch.finfo(x.dtype).min
        for layer in self.layer:
            x = layer(x, extended)
        return x


def padding_mask(batch: int, tokens: int) -> Tensor:
    """Return a `[batch, tokens]` mask of 1s then 0s: row b keeps `tokens - (b + 1) * tokens //
    (2 * batch)` tokens, so every row is padded and none by more than half."""
    kept = torch.tensor([tokens - (b + 1) * tokens // (2 * batch) for b in range(batch)])
    return (torch.arange(tokens)[None, :] < kept[:, None]).float()


def example(batch: int = 1, tokens: int = 16, **sizes: int) -> tuple[Bert, tuple[Tensor, Tensor]]:
    """Return BERT-base's layers (`sizes` overrides hidden, heads, ffn, layers) with seeded
    random weights in eval mode, and hidden states and a padding mask of `batch` × `tokens`."""
    torch.manual_seed(0)
    module = Bert(**sizes).eval()
    hidden = module.layer[0].attention_norm.normalized_shape[0]
    x = torch.randn(batch, tokens, hidden, generator=torch.Generator().manual_seed(1))
    return module, (x, padding_mask(batch, tokens))


def model() -> Bert:
    """Return the model `tinyopt capture examples/zoo/bert.py:model` captures (one layer)."""
    return example()[0]


def example_inputs() -> tuple[Tensor, Tensor]:
    """Return the hidden states and padding mask `model()` is captured on: 1 × 16 tokens."""
    return example()[1]
