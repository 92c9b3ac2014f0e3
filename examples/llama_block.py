"""A Llama/Qwen-style decoder block and a small model stacking it, in plain PyTorch.

    tinyopt capture examples/llama_block.py:block                 # graph-dialect MLIR
    tinyopt capture examples/llama_block.py:block | tinyopt -p decompose
    tinyopt capture examples/llama_block.py:model                 # embedding, 2 blocks, head
    tinyopt capture examples/llama_block.py:block_bf16            # the block in bf16

`block()` builds a block with random weights at a small size and `example_inputs()` gives the
hidden states it is captured on; `model()` and `model_inputs()` (token ids) do the same for
the stack.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class RMSNorm(nn.Module):
    """Llama's RMSNorm, written out (pow, mean, rsqrt, casts)."""

    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.rand(dim) + 0.5)

    def forward(self, x: Tensor) -> Tensor:
        normed = x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + self.eps)
        return normed.type_as(x) * self.weight


def rotate_half(x: Tensor) -> Tensor:
    """Return `cat(-x2, x1)` of the two halves of the last dim (RoPE's rotation)."""
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaBlock(nn.Module):
    """A Llama/Qwen-style decoder block: RMSNorm, RoPE, causal GQA attention, SwiGLU MLP."""

    def __init__(self, dim: int, heads: int, kv_heads: int, hidden: int, seq: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.attn_norm, self.mlp_norm = RMSNorm(dim), RMSNorm(dim)
        self.q_proj = nn.Linear(dim, heads * self.head_dim, bias=True)  # Qwen has q/k/v biases
        self.k_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=True)
        self.v_proj = nn.Linear(dim, kv_heads * self.head_dim, bias=True)
        self.o_proj = nn.Linear(heads * self.head_dim, dim, bias=False)
        self.gate_proj = nn.Linear(dim, hidden, bias=False)
        self.up_proj = nn.Linear(dim, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, dim, bias=False)
        inv_freq = 1.0 / 10000 ** (torch.arange(0, self.head_dim, 2).float() / self.head_dim)
        angles = torch.outer(torch.arange(seq).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos())
        self.register_buffer("sin", angles.sin())

    def forward(self, x: Tensor) -> Tensor:
        batch, seq, dim = x.shape
        h = self.attn_norm(x)
        q = self.q_proj(h).view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(h).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(h).view(batch, seq, self.kv_heads, self.head_dim).transpose(1, 2)
        q = q * self.cos + rotate_half(q) * self.sin
        k = k * self.cos + rotate_half(k) * self.sin
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o_proj(attn.transpose(1, 2).contiguous().view(batch, seq, dim))
        h = self.mlp_norm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class LlamaModel(nn.Module):
    """A small Llama-style language model: embedding, decoder blocks, RMSNorm, LM head."""

    def __init__(
        self, vocab: int, dim: int, heads: int, kv_heads: int, hidden: int, seq: int, layers: int
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(
            LlamaBlock(dim, heads, kv_heads, hidden, seq) for _ in range(layers)
        )
        self.norm = RMSNorm(dim)
        self.lm_head = nn.Linear(dim, vocab, bias=False)

    def forward(self, ids: Tensor) -> Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def block() -> LlamaBlock:
    """Return a small block: hidden 64, 4 query heads, 2 key/value heads, MLP 128, seq 16."""
    torch.manual_seed(0)
    return LlamaBlock(dim=64, heads=4, kv_heads=2, hidden=128, seq=16)


def example_inputs() -> tuple[Tensor]:
    """Return the hidden states `block()` is captured on: batch 1, seq 16, hidden 64."""
    return (torch.randn(1, 16, 64),)


def block_bf16() -> LlamaBlock:
    """Return `block()` in bf16 (its GEMMs go to the tensor cores)."""
    return block().to(torch.bfloat16)


def block_bf16_inputs() -> tuple[Tensor]:
    """Return `example_inputs()` in bf16."""
    return tuple(x.to(torch.bfloat16) for x in example_inputs())


def model() -> LlamaModel:
    """Return a small model: vocab 256, two blocks of `block()`'s size."""
    torch.manual_seed(0)
    return LlamaModel(vocab=256, dim=64, heads=4, kv_heads=2, hidden=128, seq=16, layers=2)


def model_inputs() -> tuple[Tensor]:
    """Return the token ids `model()` is captured on: batch 1, seq 16."""
    return (torch.randint(0, 256, (1, 16), generator=torch.Generator().manual_seed(0)),)
