"""A Llama-style language model for generation: the torch model, and its prefill and decode
steps as graph-dialect programs that read and write a KV cache at a runtime position.

The torch side (`LlamaLM`) stacks `examples/zoo/llama3.py`'s decoder layers between a token
embedding and a final RMSNorm with an LM head; greedy generation with it recomputes the whole
sequence at each step (no cache): the reference. The tinyopt side is one program per chunk
length `tokens` (`step_program`): `tokens` new token ids at positions `pos …< pos + tokens`
go through every layer, each writing its rotated keys and its values into its caches in place
at `pos` (`graph.dynamic_update_slice`) and attending causally over the first `valid = pos +
tokens` cached keys (`graph.attention ... valid(%valid)`); the last position's logits give
the next token by a device-side `graph.argmax`, returned and also written into a history of
generated tokens at `valid`. A prefill is the program at the prompt's length, a decode step
the program at one token; `pos` and `valid` are runtime scalars, so one compiled step serves
every position up to the cache's capacity and is replayed as a CUDA graph (`Generator`).

    python examples/generate.py --model tiny --steps 64
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp, TensorType, bf16, f32, i64
from xdsl.ir import Attribute, Block, Operation, Region, SSAValue

sys.path.insert(0, os.path.dirname(__file__))
from zoo.llama3 import DecoderLayer, RMSNorm, RotaryEmbedding, rotate_half  # noqa: E402

from tinyopt.backends.cuda.graph_replay import BoundReplay  # noqa: E402
from tinyopt.backends.cuda.runtime import HostFunction  # noqa: E402
from tinyopt.dialects import graph  # noqa: E402


@dataclass(frozen=True)
class Config:
    """A Llama-style model's sizes; `capacity` is the KV cache's length in tokens."""

    vocab: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    layers: int
    capacity: int
    eps: float = 1e-5
    theta: float = 500000.0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def tiny(layers: int = 2, capacity: int = 256) -> Config:
    """A small model with the 8B's proportions (GQA 4:1, head dim 64)."""
    return Config(
        vocab=1024, hidden=256, heads=4, kv_heads=1, ffn=896, layers=layers, capacity=capacity
    )


def llama3_8b(layers: int = 2, capacity: int = 4096) -> Config:
    """Llama-3-8B's shapes (vocabulary 128256, hidden 4096, 32/8 heads, MLP 14336)."""
    return Config(
        vocab=128256, hidden=4096, heads=32, kv_heads=8, ffn=14336, layers=layers, capacity=capacity
    )


class LlamaLM(nn.Module):
    """Embedding, `layers` Llama-3 decoder layers, final RMSNorm and LM head (no tied weights)."""

    def __init__(self, config: Config):
        super().__init__()
        self.config = config
        self.embed = nn.Embedding(config.vocab, config.hidden)
        self.rotary_emb = RotaryEmbedding(config.head_dim, config.theta)
        self.layers = nn.ModuleList(
            DecoderLayer(config.hidden, config.heads, config.kv_heads, config.ffn)
            for _ in range(config.layers)
        )
        self.norm = RMSNorm(config.hidden, config.eps)
        self.lm_head = nn.Linear(config.hidden, config.vocab, bias=False)

    def forward(self, ids: Tensor) -> Tensor:
        """Logits `[batch, tokens, vocab]` of token ids `[batch, tokens]` at positions 0…"""
        x = self.embed(ids)
        cos, sin = self.rotary_emb(x)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.lm_head(self.norm(x))


def random_model(config: Config, dtype: torch.dtype, seed: int = 0, device: str = "cpu") -> LlamaLM:
    """A model with seeded random weights (drawn on `device`) scaled so that logits stay O(1)
    through the layers."""
    torch.manual_seed(seed)
    with torch.device(device):
        model = LlamaLM(config).eval()
    with torch.no_grad():
        model.embed.weight.normal_(0.0, 1.0)
        for p in model.parameters():
            if p.dim() == 2 and p is not model.embed.weight:
                p.normal_(0.0, p.shape[1] ** -0.5)
    return model.to(dtype)


def rope_tables(model: LlamaLM) -> tuple[Tensor, Tensor]:
    """cos and sin `[capacity, head_dim]` for positions 0 … capacity − 1, as the model
    computes them (fp32, then its dtype)."""
    config = model.config
    dtype = model.lm_head.weight.dtype
    probe = torch.zeros(1, config.capacity, 1, dtype=dtype, device=model.lm_head.weight.device)
    cos, sin = model.rotary_emb(probe)
    return cos[0].contiguous(), sin[0].contiguous()


def weights(model: LlamaLM) -> list[Tensor]:
    """The model's tensors in the order `step_program` takes them after the caches."""
    tensors = [model.embed.weight]
    for layer in model.layers:
        attn, mlp = layer.self_attn, layer.mlp
        tensors += [
            layer.input_layernorm.weight,
            torch.cat([attn.q_proj.weight, attn.k_proj.weight, attn.v_proj.weight]),
            attn.o_proj.weight,
            layer.post_attention_layernorm.weight,
            mlp.gate_proj.weight,
            mlp.up_proj.weight,
            mlp.down_proj.weight,
        ]
    tensors += [model.norm.weight, model.lm_head.weight, *rope_tables(model)]
    return [t.detach().contiguous() for t in tensors]


LAYER_WEIGHTS = 7
"""A layer's tensors in `weights(model)`: the two norms' weights, q, k and v's projections as
one `[(heads + 2·kv_heads)·head_dim, hidden]` matrix (one GEMV for the three, as serving
engines fuse them), o, gate, up and down."""

SCALARS = 2
"""`step_program`'s first arguments are the runtime scalars `pos` and `valid`."""

PER_CALL = 3
"""... then the token ids: what changes from one step to the next (`Generator`)."""


class _Builder:
    """Appends graph ops to one block and returns their results."""

    def __init__(self, block: Block):
        self.block = block

    def __call__(self, op: Operation) -> SSAValue:
        self.block.add_op(op)
        return op.results[0]

    def shape(self, x: SSAValue) -> tuple[int, ...]:
        return x.type.get_shape()  # type: ignore[attr-defined]

    def heads(self, x: SSAValue, count: int, head_dim: int) -> SSAValue:
        """`[B, S, count · D]` → `[B, count, S, D]`."""
        b, s, _ = self.shape(x)
        split = self(graph.ReshapeOp(x, (b, s, count, head_dim)))
        return self(graph.TransposeOp(split, (0, 2, 1, 3)))

    def rope(self, x: SSAValue, cos: SSAValue, sin: SSAValue) -> SSAValue:
        """`x · cos + rotate_half(x) · sin` with cos and sin `[S, D]` broadcast over `x`."""
        shape = self.shape(x)
        half = shape[-1] // 2
        lo = self(graph.SliceOp(x, 3, 0, half))
        hi = self(graph.SliceOp(x, 3, half, half))
        rotated = self(graph.ConcatOp([self(graph.NegOp(hi)), lo], 3))
        c = self(graph.BroadcastOp(cos, shape))
        s = self(graph.BroadcastOp(sin, shape))
        return self(graph.AddOp(self(graph.MulOp(x, c)), self(graph.MulOp(rotated, s))))


def _layer_types(c: Config, dtype: Attribute) -> list[TensorType]:
    """The types of a layer's `LAYER_WEIGHTS` weights, in `weights(model)`'s order."""
    d = c.head_dim
    shapes = [
        (c.hidden,),
        ((c.heads + 2 * c.kv_heads) * d, c.hidden),
        (c.hidden, c.heads * d),
        (c.hidden,),
        (c.ffn, c.hidden),
        (c.ffn, c.hidden),
        (c.hidden, c.ffn),
    ]
    return [TensorType(dtype, shape) for shape in shapes]


def _layer(
    e: _Builder,
    c: Config,
    x: SSAValue,
    where: tuple[SSAValue, SSAValue, SSAValue, SSAValue],
    layer_weights: Sequence[SSAValue],
    caches: Sequence[SSAValue],
) -> tuple[SSAValue, SSAValue, SSAValue]:
    """A decoder layer on `x [B, S, hidden]` at positions `pos …< pos + S` (`where`: pos,
    valid, and the cos and sin rows of those positions): returns the new x and the layer's
    caches with the chunk's keys and values written at pos."""
    pos, valid, cos, sin = where
    norm1, wqkv, wo, norm2, wg, wu, wd = layer_weights
    b, s, _ = e.shape(x)
    d = c.head_dim
    h = e(graph.RmsNormOp(x, norm1, c.eps))
    qkv = e(graph.LinearOp(h, wqkv))
    q_cols, kv_cols = c.heads * d, c.kv_heads * d
    q = e.rope(e.heads(e(graph.SliceOp(qkv, 2, 0, q_cols)), c.heads, d), cos, sin)
    k = e(graph.SliceOp(qkv, 2, q_cols, kv_cols))
    k = e.rope(e.heads(k, c.kv_heads, d), cos, sin)
    v = e.heads(e(graph.SliceOp(qkv, 2, q_cols + kv_cols, kv_cols)), c.kv_heads, d)
    keys = e(graph.DynamicUpdateSliceOp(caches[0], k, pos, 2))
    values = e(graph.DynamicUpdateSliceOp(caches[1], v, pos, 2))
    o = e(graph.AttentionOp(q, keys, values, d**-0.5, causal=True, valid=valid))
    o = e(graph.ReshapeOp(e(graph.TransposeOp(o, (0, 2, 1, 3))), (b, s, c.heads * d)))
    x = e(graph.AddOp(x, e(graph.LinearOp(o, wo))))
    h = e(graph.RmsNormOp(x, norm2, c.eps))
    gated = e(graph.MulOp(e(graph.SiluOp(e(graph.LinearOp(h, wg)))), e(graph.LinearOp(h, wu))))
    return e(graph.AddOp(x, e(graph.LinearOp(gated, wd)))), keys, values


def block_program(config: Config, batch: int, tokens: int, dtype: Attribute = f32) -> ModuleOp:
    """One decoder layer's step alone, `@block`: arguments `pos`, `valid`, the hidden states
    `x [batch, tokens, hidden]`, the layer's k and v caches, its `LAYER_WEIGHTS` weights, the
    cos and sin tables; results the new hidden states and the caches (written in place)."""
    c = config
    cache = TensorType(dtype, (batch, c.kv_heads, c.capacity, c.head_dim))
    table = TensorType(dtype, (c.capacity, c.head_dim))
    types = [
        TensorType(i64, ()),
        TensorType(i64, ()),
        TensorType(dtype, (batch, tokens, c.hidden)),
        cache,
        cache,
        *_layer_types(c, dtype),
        table,
        table,
    ]
    block = Block(arg_types=types)
    e = _Builder(block)
    pos, valid, x, kcache, vcache = block.args[:5]
    cos = e(graph.DynamicSliceOp(block.args[-2], pos, 0, tokens))
    sin = e(graph.DynamicSliceOp(block.args[-1], pos, 0, tokens))
    layer_weights = block.args[5 : 5 + LAYER_WEIGHTS]
    out = _layer(e, c, x, (pos, valid, cos, sin), layer_weights, (kcache, vcache))
    block.add_op(func.ReturnOp(*out))
    results = [v.type for v in out]
    return ModuleOp([func.FuncOp("block", (types, results), Region(block))])


def step_program(config: Config, batch: int, tokens: int, dtype: Attribute = f32) -> ModuleOp:
    """The program `@step` of `tokens` new tokens per sequence (see the module docstring).

    Arguments: `pos`, `valid` (runtime scalars), `ids [batch, tokens]` (i64), the caches
    (`k` then `v` of each layer, `[batch, kv_heads, capacity, head_dim]`), the history of
    generated tokens `[batch, capacity + 1]` (i64), then `weights(model)`'s tensors. Results:
    the next token ids `[batch, 1]`, the updated caches and history (the arguments' buffers,
    written in place).
    """
    c, b, s = config, batch, tokens

    def t(*shape: int, element: Attribute = dtype) -> TensorType:
        return TensorType(element, shape)

    cache = t(b, c.kv_heads, c.capacity, c.head_dim)
    layer_weights = _layer_types(c, dtype)
    types = [
        t(element=i64),
        t(element=i64),
        t(b, s, element=i64),
        *([cache] * (2 * c.layers)),
        t(b, c.capacity + 1, element=i64),
        t(c.vocab, c.hidden),
        *(layer_weights * c.layers),
        t(c.hidden),
        t(c.vocab, c.hidden),
        t(c.capacity, c.head_dim),
        t(c.capacity, c.head_dim),
    ]
    block = Block(arg_types=types)
    e = _Builder(block)
    pos, valid, ids = block.args[:3]
    caches = list(block.args[3 : 3 + 2 * c.layers])
    history = block.args[3 + 2 * c.layers]
    embed = block.args[4 + 2 * c.layers]
    per_layer = block.args[5 + 2 * c.layers : 5 + 2 * c.layers + LAYER_WEIGHTS * c.layers]
    final_norm, lm_head, cos_table, sin_table = block.args[-4:]

    x = e(graph.GatherOp(embed, ids))
    cos = e(graph.DynamicSliceOp(cos_table, pos, 0, s))
    sin = e(graph.DynamicSliceOp(sin_table, pos, 0, s))
    new_caches = []
    for layer in range(c.layers):
        x, keys, values = _layer(
            e,
            c,
            x,
            (pos, valid, cos, sin),
            per_layer[LAYER_WEIGHTS * layer : LAYER_WEIGHTS * (layer + 1)],
            caches[2 * layer : 2 * layer + 2],
        )
        new_caches += [keys, values]
    last = e(graph.SliceOp(x, 1, s - 1, 1))
    logits = e(graph.LinearOp(e(graph.RmsNormOp(last, final_norm, c.eps)), lm_head))
    logits = e(graph.ReshapeOp(logits, (b, c.vocab)))
    next_ids = e(graph.ArgmaxOp(logits, 1, keepdim=True))
    new_history = e(graph.DynamicUpdateSliceOp(history, next_ids, valid, 1))
    block.add_op(func.ReturnOp(next_ids, *new_caches, new_history))
    results = [next_ids.type, *(v.type for v in new_caches), new_history.type]
    step = func.FuncOp("step", (types, results), Region(block))
    return ModuleOp([step])


def element_type(dtype: torch.dtype) -> Attribute:
    return {torch.float32: f32, torch.bfloat16: bf16}[dtype]


def torch_generate(model: LlamaLM, prompt: Tensor, steps: int) -> tuple[Tensor, list[float]]:
    """Greedy tokens `[batch, steps]` by recomputing the whole sequence at each step, and at
    each step the smallest gap between the two largest logits over the batch."""
    ids, gaps = prompt, []
    with torch.no_grad():
        for _ in range(steps):
            logits = model(ids)[:, -1].float()
            top = logits.topk(2, dim=-1).values
            gaps.append((top[:, 0] - top[:, 1]).min().item())
            ids = torch.cat([ids, logits.argmax(-1, keepdim=True)], dim=1)
    return ids[:, prompt.shape[1] :], gaps


class TorchDecoder:
    """torch's decode step with static caches (as Hugging Face's `StaticCache`): each layer's
    caches of the full capacity, written with `index_copy_` at a position tensor, attention
    over the whole capacity with a boolean mask of the valid keys. The shapes never change,
    so `torch.compile` (and its CUDA graphs, `mode="reduce-overhead"`) can take a step."""

    def __init__(self, model: LlamaLM, batch: int) -> None:
        config = self.config = model.config
        self.model = model
        dtype, device = model.lm_head.weight.dtype, model.lm_head.weight.device
        shape = (batch, config.kv_heads, config.capacity, config.head_dim)
        self.caches = [
            torch.zeros(shape, dtype=dtype, device=device) for _ in range(2 * config.layers)
        ]
        self.cos, self.sin = rope_tables(model)
        self.keys = torch.arange(config.capacity, device=device)

    def layer(self, index: int, x: Tensor, pos: Tensor) -> Tensor:
        """Decoder layer `index` on one token per sequence `x [B, 1, hidden]` at position
        `pos` (a one-element int64 tensor), writing that layer's caches."""
        layer = self.model.layers[index]
        attn, batch, d = layer.self_attn, x.shape[0], self.config.head_dim
        kcache, vcache = self.caches[2 * index : 2 * index + 2]
        h = layer.input_layernorm(x)
        q, k, v = (
            p(h).view(batch, 1, -1, d).transpose(1, 2)
            for p in (attn.q_proj, attn.k_proj, attn.v_proj)
        )
        cos, sin = self.cos.index_select(0, pos), self.sin.index_select(0, pos)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        kcache.index_copy_(2, pos, k)
        vcache.index_copy_(2, pos, v)
        mask = (self.keys <= pos)[None, None, None, :]
        o = F.scaled_dot_product_attention(
            q, kcache, vcache, attn_mask=mask, scale=d**-0.5, enable_gqa=True
        )
        x = x + attn.o_proj(o.transpose(1, 2).reshape(batch, 1, -1))
        return x + layer.mlp(layer.post_attention_layernorm(x))

    def step(self, ids: Tensor, pos: Tensor) -> Tensor:
        """The next token ids `[B, 1]` after `ids [B, 1]` at position `pos`."""
        x = self.model.embed(ids)
        for index in range(self.config.layers):
            x = self.layer(index, x, pos)
        logits = self.model.lm_head(self.model.norm(x[:, -1]))
        return logits.argmax(-1, keepdim=True)


def first_difference(ours: Sequence[Sequence[int]], theirs: Sequence[Sequence[int]]) -> int | None:
    """The first step at which any sequence's tokens differ, or None."""
    for step in range(len(ours[0])):
        if any(a[step] != b[step] for a, b in zip(ours, theirs, strict=True)):
            return step
    return None


PIPELINE = "decompose,fuse,flash-attention,apply-tuned,tile{knobs},to-cuda"


def compile_step(
    config: Config, batch: int, tokens: int, dtype: torch.dtype, knobs: str = ""
) -> HostFunction:
    """Compile `step_program` and return its host function (unpoisoned, asynchronous)."""
    from tinyopt.compiler import compile_text

    text = str(step_program(config, batch, tokens, element_type(dtype)))
    pipeline = PIPELINE.format(knobs=f"{{{knobs}}}" if knobs else "")
    return compile_text(text, pipeline, poison=False, sync=False).function("step")


class Generator:
    """Greedy generation on the GPU with tinyopt: a prefill of the prompt, then decode steps
    replayed as one CUDA graph each, the position advanced between replays.

    The caches and the history live on the device; a step's input token is the previous
    step's result (two buffers, used in turn), so no step waits for the host.
    """

    def __init__(self, model: LlamaLM, batch: int, prompt: int, knobs: str = "") -> None:
        config = self.config = model.config
        dtype = model.lm_head.weight.dtype
        self.batch, self.prompt = batch, prompt
        self.prefill = compile_step(config, batch, prompt, dtype, knobs)
        self.decode = compile_step(config, batch, 1, dtype, knobs)
        cache = (batch, config.kv_heads, config.capacity, config.head_dim)
        self.caches = [
            torch.zeros(cache, dtype=dtype, device="cuda") for _ in range(2 * config.layers)
        ]
        self.history = torch.zeros(batch, config.capacity + 1, dtype=torch.int64, device="cuda")
        self.weights = [w.cuda() for w in weights(model)]
        self.ids = [torch.zeros(batch, 1, dtype=torch.int64, device="cuda") for _ in range(2)]
        bound = [*self.caches, self.history, *self.weights]
        self.step = BoundReplay(self.decode, [prompt, prompt + 1, self.ids[0], *bound], PER_CALL)

    def run_prefill(self, prompt: Tensor) -> None:
        """Write the prompt's keys and values into the caches and its next token at
        `history[:, prompt]` (and into the first decode step's input)."""
        bound = [*self.caches, self.history, *self.weights]
        (next_ids, *_) = self.prefill(0, self.prompt, prompt.cuda(), *bound)
        self.ids[0].copy_(next_ids)

    def run_decode(self, steps: int, progress: object | None = None) -> None:
        """`steps` decode steps after the prefill, queued without waiting. A progress bar
        that is drawn (`tinyopt.progress.Progress` on a terminal) advances as steps finish:
        the host then waits for the device every 16 steps."""
        shown = progress is not None and not progress.quiet  # type: ignore[attr-defined]
        for step in range(steps):
            pos = self.prompt + step
            self.step(pos, pos + 1, self.ids[step % 2], outputs=[self.ids[(step + 1) % 2]])
            if shown and (step % 16 == 15 or step == steps - 1):
                torch.cuda.current_stream().synchronize()
                progress.advance(steps=step % 16 + 1)  # type: ignore[union-attr]

    def tokens(self, count: int) -> Tensor:
        """The `count` tokens generated so far, `[batch, count]` (waits for the device)."""
        return self.history[:, self.prompt : self.prompt + count].cpu()
