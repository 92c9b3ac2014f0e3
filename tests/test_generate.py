"""Greedy generation (examples/llama_decode.py, examples/generate.py): the prefill and decode
step programs against the same torch model, in float64 at graph level, lowered at loop level,
their kernels through NVRTC, and on a GPU the generation loop replayed as CUDA graphs.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from conftest import requires_gpu

from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import run_reference
from tinyopt.compiler import apply_pipeline, parse
from xdsl.dialects.builtin import ModuleOp

torch = pytest.importorskip("torch")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import llama_decode as ld  # noqa: E402

SMALL = ld.Config(vocab=64, hidden=32, heads=4, kv_heads=2, ffn=48, layers=2, capacity=16)
PROMPT, STEPS, BATCH = 5, 6, 2


def random_prompt(seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, SMALL.vocab, (BATCH, PROMPT), generator=generator)


def torch_tokens(model: ld.LlamaLM, prompt: torch.Tensor) -> list[list[int]]:
    tokens, gaps = ld.torch_generate(model, prompt, STEPS)
    assert min(gaps) > 1e-3, "the test's model has a near tie: pick another seed"
    return tokens.tolist()


def generate_with(run, model: ld.LlamaLM, prompt: torch.Tensor) -> list[list[int]]:  # noqa: ANN001
    """Prefill then STEPS − 1 decode steps with `run(program, *arrays)` on numpy arrays."""
    config = model.config
    weights = [w.float().numpy() for w in ld.weights(model)]
    shape = (BATCH, config.kv_heads, config.capacity, config.head_dim)
    caches = [np.zeros(shape, np.float32) for _ in range(2 * config.layers)]
    history = np.zeros((BATCH, config.capacity + 1), np.int64)
    ids = prompt.numpy()
    for pos, tokens in [(0, PROMPT), *((PROMPT + s, 1) for s in range(STEPS - 1))]:
        program = ld.step_program(config, BATCH, tokens)
        scalars = (np.array(pos), np.array(pos + tokens))
        ids, *rest = run(program, *scalars, ids, *caches, history, *weights)
        caches = [np.asarray(c, np.float32) for c in rest[:-1]]
        history = np.asarray(rest[-1], np.int64)
        ids = np.asarray(ids, np.int64)
    return history[:, PROMPT : PROMPT + STEPS].tolist()


def test_step_programs_generate_torchs_tokens_in_float64() -> None:
    model = ld.random_model(SMALL, torch.float32)
    prompt = random_prompt(3)
    ours = generate_with(lambda p, *a: run_reference(parse(str(p)), *a), model, prompt)
    assert ours == torch_tokens(model, prompt)


def test_lowered_step_programs_generate_torchs_tokens() -> None:
    """The programs after decompose, fuse and flash-attention (caches written in place by the
    loop-level host function), run by the loop-level executor."""

    lowered: dict[str, ModuleOp] = {}  # the decode steps' program is one text: lowered once

    def run(program, *arrays):  # noqa: ANN001, ANN202
        text = str(program)
        if text not in lowered:
            lowered[text] = apply_pipeline(parse(text), "decompose,fuse,flash-attention")
        return run_loop_module(lowered[text].clone(), "step", *arrays)

    model = ld.random_model(SMALL, torch.float32, seed=1)
    prompt = random_prompt(4)
    assert generate_with(run, model, prompt) == torch_tokens(model, prompt)


def test_block_program_is_torchs_static_cache_layer_step() -> None:
    """One layer's decode step (`block_program`) against `TorchDecoder.layer`, the step the
    benchmark times torch on, at a position past the start of the cache."""
    model = ld.random_model(SMALL, torch.float32, seed=2)
    decoder = ld.TorchDecoder(model, BATCH)
    generator = torch.Generator().manual_seed(5)
    for cache in decoder.caches[:2]:
        cache.copy_(torch.randn(cache.shape, generator=generator))
    caches = [c.numpy().copy() for c in decoder.caches[:2]]
    x = torch.randn(BATCH, 1, SMALL.hidden, generator=generator)
    pos = 9
    with torch.no_grad():
        want = decoder.layer(0, x, torch.tensor([pos]))
    layer = [w.numpy() for w in ld.weights(model)[1 : 1 + ld.LAYER_WEIGHTS]]
    cos, sin = (t.numpy() for t in ld.rope_tables(model))
    program = parse(str(ld.block_program(SMALL, BATCH, 1)))
    scalars = (np.array(pos), np.array(pos + 1))
    got, keys, values = run_reference(program, *scalars, x.numpy(), *caches, *layer, cos, sin)
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(keys, decoder.caches[0].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(values, decoder.caches[1].numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(("tokens", "dtype"), [(1, "f32"), (16, "f32"), (1, "bf16")])
def test_step_kernels_compile_for_sm90a(tokens: int, dtype: str) -> None:
    from tinyopt.backends.cuda.runtime import compile_module
    from tinyopt.compiler import lower

    element = ld.element_type(torch.float32 if dtype == "f32" else torch.bfloat16)
    text = str(ld.step_program(ld.tiny(capacity=64), 2, tokens, element))
    _, module = lower(text, ld.PIPELINE.format(knobs=""))
    assert compile_module(module, arch="sm_90a").kernels


def test_a_step_position_past_the_cache_is_refused_before_anything_runs() -> None:
    from tinyopt.dialects.runtime_scalar import ScalarRangeError

    model = ld.random_model(SMALL, torch.float32)
    arrays = [w.numpy() for w in ld.weights(model)]
    shape = (1, SMALL.kv_heads, SMALL.capacity, SMALL.head_dim)
    caches = [np.zeros(shape, np.float32) for _ in range(2 * SMALL.layers)]
    history = np.zeros((1, SMALL.capacity + 1), np.int64)
    program = parse(str(ld.step_program(SMALL, 1, 1)))
    ids = np.zeros((1, 1), np.int64)
    with pytest.raises(ScalarRangeError, match="past its largest value"):
        scalars = (np.array(SMALL.capacity), np.array(SMALL.capacity + 1))
        run_reference(program, *scalars, ids, *caches, history, *arrays)


@requires_gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_generator_on_the_gpu_gives_torchs_greedy_tokens(dtype: torch.dtype) -> None:
    """The tiny model: prefill and 23 decode steps replayed as CUDA graphs, against torch's
    greedy tokens. fp32: equal up to a step where torch's two largest logits are within 1e-4.
    bf16: torch's logits are bf16, so exact ties are common (the H200, 2026-12-03: a gap of 0
    at step 1); tokens may first differ only where torch's gap is below 1/16, two bf16 ulps
    of a logit of 2 to 4 (both compute in bf16 with different rounding points)."""
    config = ld.tiny(capacity=64)
    model = ld.random_model(config, dtype, device="cuda")
    prompt = torch.randint(0, config.vocab, (2, 16), generator=torch.Generator().manual_seed(7))
    generator = ld.Generator(model, 2, 16)
    generator.run_prefill(prompt)
    generator.run_decode(23)
    ours = generator.tokens(24).tolist()
    theirs, gaps = ld.torch_generate(model, prompt.cuda(), 24)
    first = ld.first_difference(ours, theirs.cpu().tolist())
    if dtype == torch.float32:
        assert first is None or gaps[first] < 1e-4, (first, gaps)
    else:
        assert first is None or gaps[first] < 1 / 16, (first, gaps)


@requires_gpu
def test_bound_replay_checks_what_it_is_given() -> None:
    from tinyopt.backends.cuda.errors import CudaArgumentError
    from tinyopt.dialects.runtime_scalar import ScalarRangeError

    config = ld.tiny(capacity=32)
    model = ld.random_model(config, torch.float32, device="cuda")
    generator = ld.Generator(model, 1, 4)
    step, ids = generator.step, generator.ids
    with pytest.raises(CudaArgumentError, match="takes 3 values"):
        step(4, 5)
    with pytest.raises(CudaArgumentError, match="argument 2 must be a contiguous CUDA tensor"):
        step(4, 5, ids[0].float())
    with pytest.raises(ScalarRangeError, match="past its largest value"):
        step(config.capacity, config.capacity + 1, ids[0])
    with pytest.raises(CudaArgumentError, match="a result tensor must be contiguous"):
        step(4, 5, ids[0], outputs=[ids[1].cpu()])
