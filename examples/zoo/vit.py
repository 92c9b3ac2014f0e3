"""ViT-B/16: patch embedding and encoder layers, written the way Hugging Face's ViT writes them.

    tinyopt capture examples/zoo/vit.py:model

A `Conv2d(3, 768, 16, stride=16)` cuts the image into 16×16 patches and projects each to 768
values; a class token is put first and position embeddings are added; then pre-LN encoder
layers (LayerNorm eps 1e-12, 12 heads of 64 through `scaled_dot_product_attention`, FFN 3072
with the exact GELU, biases everywhere) and the final LayerNorm. The pooler and classifier are
left out.

The token count is set by the image: a square image of side `patch · n` gives n² patches and
n² + 1 tokens (224×224 → 197). `image_side(tokens)` picks n = round(√(tokens − 1)), the square
grid nearest the asked count: 16 tokens → 64×64 (17 tokens), 512 → 368×368 (530),
2048 → 720×720 (2026). The position embeddings are sized for that image.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


def image_side(tokens: int, patch: int = 16) -> int:
    """Return the side of the square image whose patch count plus the class token is nearest
    `tokens`."""
    return patch * max(1, round((tokens - 1) ** 0.5))


class Embeddings(nn.Module):
    """Patches by a strided convolution, the class token first, position embeddings added."""

    def __init__(self, hidden: int, patch: int, channels: int, patches: int):
        super().__init__()
        self.cls_token = nn.Parameter(0.02 * torch.randn(1, 1, hidden))
        self.position_embeddings = nn.Parameter(0.02 * torch.randn(1, patches + 1, hidden))
        self.projection = nn.Conv2d(channels, hidden, kernel_size=patch, stride=patch)

    def forward(self, pixel_values: Tensor) -> Tensor:
        x = self.projection(pixel_values).flatten(2).transpose(1, 2)
        cls = self.cls_token.expand(x.shape[0], -1, -1)
        return torch.cat((cls, x), dim=1) + self.position_embeddings


class SelfAttention(nn.Module):
    """ViT's self-attention through `scaled_dot_product_attention` (HF's default)."""

    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.dense = nn.Linear(hidden, hidden)

    def forward(self, x: Tensor) -> Tensor:
        batch, tokens, hidden = x.shape
        q, k, v = (
            p(x).view(batch, tokens, self.heads, -1).transpose(1, 2)
            for p in (self.query, self.key, self.value)
        )
        context = F.scaled_dot_product_attention(q, k, v, dropout_p=0.0, is_causal=False)
        return self.dense(context.transpose(1, 2).reshape(batch, tokens, hidden))


class Layer(nn.Module):
    """A pre-LN ViT layer: `x + attention(norm(x))`, then `x + ffn(norm(x))`."""

    def __init__(self, hidden: int, heads: int, ffn: int):
        super().__init__()
        self.layernorm_before = nn.LayerNorm(hidden, eps=1e-12)
        self.attention = SelfAttention(hidden, heads)
        self.layernorm_after = nn.LayerNorm(hidden, eps=1e-12)
        self.intermediate = nn.Linear(hidden, ffn)
        self.output = nn.Linear(ffn, hidden)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.attention(self.layernorm_before(x))
        return x + self.output(F.gelu(self.intermediate(self.layernorm_after(x))))


class ViT(nn.Module):
    """ViT's embeddings, encoder layers and final LayerNorm, on `[batch, 3, image, image]`."""

    def __init__(
        self,
        image: int = 224,
        patch: int = 16,
        channels: int = 3,
        hidden: int = 768,
        heads: int = 12,
        ffn: int = 3072,
        layers: int = 1,
    ):
        super().__init__()
        self.channels = channels
        self.embeddings = Embeddings(hidden, patch, channels, (image // patch) ** 2)
        self.layer = nn.ModuleList(Layer(hidden, heads, ffn) for _ in range(layers))
        self.layernorm = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, pixel_values: Tensor) -> Tensor:
        x = self.embeddings(pixel_values)
        for layer in self.layer:
            x = layer(x)
        return self.layernorm(x)


def example(batch: int = 1, tokens: int = 16, **sizes: int) -> tuple[ViT, tuple[Tensor]]:
    """Return ViT-B/16 with one layer (`sizes` overrides patch, channels, hidden, heads, ffn,
    layers) for the square image of about `tokens` tokens (`image_side`), with seeded random
    weights in eval mode, and `batch` random images."""
    torch.manual_seed(0)
    side = image_side(tokens, sizes.get("patch", 16))
    module = ViT(image=side, **sizes).eval()
    shape = (batch, module.channels, side, side)
    return module, (torch.randn(*shape, generator=torch.Generator().manual_seed(1)),)


def model() -> ViT:
    """Return the model `tinyopt capture examples/zoo/vit.py:model` captures (64×64 images)."""
    return example()[0]


def example_inputs() -> tuple[Tensor]:
    """Return the image `model()` is captured on: one 64×64 image, 17 tokens."""
    return example()[1]
