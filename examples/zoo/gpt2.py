"""GPT-2 small's transformer layers, written the way Hugging Face's GPT-2 writes them.

    tinyopt capture examples/zoo/gpt2.py:model

Hidden 768, 12 heads of 64, MLP 3072 with GPT-2's tanh GELU written out ("gelu_new"),
LayerNorm before the attention and the MLP, biases everywhere, one fused q/k/v projection split
in three. The causal mask is built in `forward` (`torch.tril(torch.ones(T, T))`) and applied
with `masked_fill(mask == 0, -inf)` before the softmax. The model takes hidden states (token
and position embeddings, and the LM head, are left out: the layers are what is measured), runs
`layers` blocks and the final LayerNorm. HF's `Conv1D` is a linear with its weight stored
transposed (`addmm`); `nn.Linear` stands for it here.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def gelu_new(x: Tensor) -> Tensor:
    """GPT-2's activation: the tanh approximation of GELU, as HF's `NewGELUActivation` has it."""
    inner = math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))
    return 0.5 * x * (1.0 + torch.tanh(inner))


class CausalSelfAttention(nn.Module):
    """Multi-head attention with one q/k/v projection and an explicit causal mask."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)

    def forward(self, x: Tensor) -> Tensor:
        batch, tokens, hidden = x.shape
        q, k, v = self.c_attn(x).split(hidden, dim=2)
        q, k, v = (
            t.view(batch, tokens, self.heads, hidden // self.heads).transpose(1, 2)
            for t in (q, k, v)
        )
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        mask = torch.tril(torch.ones(tokens, tokens, device=x.device))
        att = att.masked_fill(mask == 0, float("-inf"))
        y = F.softmax(att, dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(batch, tokens, hidden))


class MLP(nn.Module):
    """GPT-2's feed-forward: linear, tanh GELU, linear."""

    def __init__(self, hidden: int, ffn: int):
        super().__init__()
        self.c_fc = nn.Linear(hidden, ffn)
        self.c_proj = nn.Linear(ffn, hidden)

    def forward(self, x: Tensor) -> Tensor:
        return self.c_proj(gelu_new(self.c_fc(x)))


class Block(nn.Module):
    """A pre-LN GPT-2 block: `x + attn(ln_1(x))`, then `x + mlp(ln_2(x))`."""

    def __init__(self, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden, eps=1e-5)
        self.attn = CausalSelfAttention(hidden, heads)
        self.ln_2 = nn.LayerNorm(hidden, eps=1e-5)
        self.mlp = MLP(hidden, ffn)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    """GPT-2's stack of blocks and final LayerNorm, on hidden states `[batch, tokens, hidden]`."""

    def __init__(self, hidden: int = 768, heads: int = 12, ffn: int = 3072, layers: int = 1):
        super().__init__()
        self.h = nn.ModuleList(Block(hidden, heads, ffn) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden, eps=1e-5)

    def forward(self, x: Tensor) -> Tensor:
        for block in self.h:
            x = block(x)
        return self.ln_f(x)


def example(batch: int = 1, tokens: int = 16, **sizes: int) -> tuple[GPT2, tuple[Tensor]]:
    """Return GPT-2 small's layers (`sizes` overrides hidden, heads, ffn, layers) with seeded
    random weights in eval mode, and hidden states of `batch` × `tokens` to run it on."""
    torch.manual_seed(0)
    module = GPT2(**sizes).eval()
    hidden = module.ln_f.normalized_shape[0]
    x = torch.randn(batch, tokens, hidden, generator=torch.Generator().manual_seed(1))
    return module, (x,)


def model() -> GPT2:
    """Return the model `tinyopt capture examples/zoo/gpt2.py:model` captures (one layer)."""
    return example()[0]


def example_inputs() -> tuple[Tensor]:
    """Return the hidden states `model()` is captured on: 1 × 16 tokens."""
    return example()[1]
