"""The model zoo (examples/zoo/) captured by the PyTorch frontend and run by tinyopt.

On the CPU each model runs at a tiny configuration of its own code (heads of 16, 8 tokens,
batch 2, two layers where the model stacks them): the captured graph program, run by the
float64 reference executor, and the loop-level program after `decompose,fuse,flash-attention`,
run by the loop executor, match the model run by torch in float64; captured in bf16, the
reference (rounding where the program casts) stays within bf16's tolerance of it. On a GPU each
model at its real size runs 1 × 16 tokens through `CompiledModel` in fp32 and bf16.
benchmarks/bench_zoo.py's CPU parts (its dry run, its geometric means) are checked here too.
"""

from __future__ import annotations

import copy
import math
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import requires_gpu
from programs import load_example

torch = pytest.importorskip("torch")

from torch import Tensor, nn  # noqa: E402
from xdsl.dialects.builtin import bf16, f32  # noqa: E402

from tinyopt.backends.check import TOLERANCES  # noqa: E402
from tinyopt.backends.loop_reference import run_loop_module  # noqa: E402
from tinyopt.backends.reference import run_reference  # noqa: E402
from tinyopt.compiler import apply_pipeline  # noqa: E402
from tinyopt.frontends.compiled_model import CompiledModel  # noqa: E402
from tinyopt.frontends.torch_fx import capture  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
from bench_zoo import dry_run, geomeans  # noqa: E402

TINY: dict[str, dict[str, int]] = {
    "gpt2": {"hidden": 32, "heads": 2, "ffn": 64, "layers": 2},
    "bert": {"hidden": 32, "heads": 2, "ffn": 64, "layers": 2},
    "t5": {"hidden": 32, "heads": 2, "d_kv": 16, "ffn": 64, "layers": 2},
    "vit": {"patch": 4, "hidden": 32, "heads": 2, "ffn": 64},
    "llama3": {"hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 128},
    "resnet": {"width": 2, "blocks": 1, "stages": 2, "classes": 5, "side": 8},
}
"""Each model's sizes small enough for the scalar loop executor (ViT: 12×12 images, 10 tokens;
ResNet: the first two stages, one bottleneck each, 8×8 images)."""

ON_GPU: dict[str, dict[str, int]] = {"resnet": {"blocks": 1}}
"""Sizes the GPU test overrides: ResNet with one block a stage (as the others, one layer)."""

BATCH, TOKENS = 2, 8

DTYPES = {"fp32": (torch.float32, f32), "bf16": (torch.bfloat16, bf16)}


def _tiny(name: str, dtype: torch.dtype = torch.float32) -> tuple[nn.Module, tuple[Tensor, ...]]:
    module, inputs = load_example(f"zoo/{name}.py").example(BATCH, TOKENS, **TINY[name])
    return module.to(dtype), tuple(x.to(dtype) for x in inputs)


def _float64(module: nn.Module, inputs: tuple[Tensor, ...]) -> Tensor:
    """Return `module` run in float64 (a copy of its weights, whatever their dtype)."""
    with torch.no_grad():
        return copy.deepcopy(module).double()(*(x.double() for x in inputs))


def _relative(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


@pytest.mark.parametrize("name", list(TINY))
def test_captured_program_matches_float64(name: str) -> None:
    module, inputs = _tiny(name)
    cap = capture(module, *inputs)
    (got,) = run_reference(cap.module, *cap.arguments(*inputs))
    np.testing.assert_allclose(got, _float64(module, inputs).numpy(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("name", list(TINY))
def test_loop_level_program_matches_float64(name: str) -> None:
    """decompose, fuse and flash-attention keep the numbers: the loop executor computes each
    kernel in the program's precision (f32), hence the looser tolerance."""
    module, inputs = _tiny(name)
    cap = capture(module, *inputs)
    lowered = apply_pipeline(cap.module.clone(), "decompose,fuse,flash-attention")
    (got,) = run_loop_module(lowered, cap.function.sym_name.data, *cap.arguments(*inputs))
    np.testing.assert_allclose(got, _float64(module, inputs).numpy(), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", list(TINY))
def test_bf16_capture_stays_within_bf16_tolerance(name: str) -> None:
    module, inputs = _tiny(name, torch.bfloat16)
    cap = capture(module, *inputs)
    (got,) = run_reference(cap.module, *cap.arguments(*inputs), dtype=None)
    error = _relative(got, _float64(module, inputs).numpy())
    assert error < TOLERANCES[bf16], error


@requires_gpu
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("name", list(TINY))
def test_compiled_model_at_1x16_matches_float64(name: str, dtype: str) -> None:
    """The real sizes (one layer), batch 1, 16 tokens (ViT: a 64×64 image, 17 tokens; ResNet:
    a 128×128 image, one block a stage)."""
    torch_dtype, element_type = DTYPES[dtype]
    module, inputs = load_example(f"zoo/{name}.py").example(1, 16, **ON_GPU.get(name, {}))
    module = module.to("cuda", torch_dtype)
    inputs = tuple(x.to("cuda", torch_dtype) for x in inputs)
    out = CompiledModel(module, *inputs)(*inputs)
    exact = _float64(module, inputs)
    with torch.no_grad():
        eager = module(*inputs)
    error = ((out.double() - exact).norm() / exact.norm()).item()
    eager_error = ((eager.double() - exact).norm() / exact.norm()).item()
    print(f"{name} {dtype}: tinyopt {error:.2e}, eager {eager_error:.2e} (vs float64)")
    assert error < TOLERANCES[element_type], error


def test_bench_dry_run_lowers_at_the_smallest_size() -> None:
    """BERT at its real size: the dry run picks 1x16 of the sizes given and lowers it."""
    lines = dry_run(["bert"], ["8x512", "1x16"], ["bf16"])
    title, _, header, rule, row = lines
    assert "1x16" in title
    assert row.startswith("| bert | bf16 | ") and row.endswith("| lowered |")
    assert int(row.split("|")[3]) > 0  # kernels
    assert row.count("|") == header.count("|") == rule.count("|")


def test_bench_geomeans_name_the_rows_without_a_figure() -> None:
    speedups = {
        ("gpt2", "8x512", "bf16"): 1.0,
        ("bert", "8x512", "bf16"): 4.0,
        ("t5", "8x512", "bf16"): None,
        ("vit", "1x16", "bf16"): 9.0,
    }
    (line,) = geomeans(speedups)
    assert f"at 8x512: {math.sqrt(1.0 * 4.0):.2f}x over 2 rows" in line
    assert line.endswith("(no tinyopt figure: t5 bf16)")
