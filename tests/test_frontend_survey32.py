"""Capture bugs found by the thirty-second session's hunt over blocks nobody named, each
fixed or refused by name now:

- f16 norms whose eps f16 holds only as a subnormal or as 0 (BERT's LayerNorm eps 1e-12,
  RMSNorm eps 1e-8, a BatchNorm eps 1e-12): torch computes their statistics and eps in f32, so a
  row of equal values gives 0 (not NaN) and a row near 0 its exact scale. Checked against torch
  in f16 at the graph level (each op rounded to its type) and, after `decompose,fuse`, at the
  loop level.
- `F.interpolate` in linear, bilinear or trilinear mode with a scale factor that keeps a dim's
  size (1.19 on 4 rows, 1.1 on 5): torch's CPU kernels copy that dim whatever the scale, the
  capture interpolated it from the scale (errors of the order of the values). Checked against
  torch in float64 at the graph level and, after `decompose,fuse`, at the loop level.
- `F.interpolate(mode='nearest' | 'nearest-exact', scale_factor=...)` where the output keeps
  the input's size or doubles it while the scale is not 1 or 2: torch's CPU kernels compute
  each row from the scale in 1-D and 3-D and in nearest-exact (only its 2-D nearest copies or
  halves), and an f32 product that rounds up to an integer (3 · 1.6666666 = 5) gives torch's
  row also in the float64 reference. Checked bit for bit against torch at the graph level in
  float64 and, after `decompose,fuse`, at the loop level.
- An in-place op that reads another view of the tensor it writes, overlapping the elements
  it writes (`y[..., 1:] += y[..., :-1]`, `y[..., 1:].copy_(y[..., :-1])`): eager torch's
  result depends on the order it writes in (here a running sum, a copy that smears the first
  column; torch refuses the 1-D form), where the functional program capture makes reads
  everything first. Refused
  naming the op; reading the elements written themselves, or elements not written, is captured.
- `Tensor.view(dtype)` reinterprets a tensor's bits: to another dtype of the same width (bf16
  as f16, int32 as f32) it was captured as the values themselves (a silent wrong answer), to one
  of another width the captured IR did not verify. Refused naming it; a view to the tensor's
  own dtype is the tensor.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_frontend_survey28 import assert_matches_float64  # noqa: E402
from test_frontend_torch import Fn  # noqa: E402
from tinyopt.backends.loop_reference import run_loop_module  # noqa: E402
from tinyopt.backends.reference import run_reference  # noqa: E402
from tinyopt.compiler import apply_pipeline  # noqa: E402
from tinyopt.frontends.torch_fx import FrontendError, capture  # noqa: E402
from torch import Tensor, nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


ROWS = [[0.5, 0.5, 0.5, 0.5], [1e-4, -1e-4, 0.0, 2e-4], [0.0, 0.0, 0.0, 0.0], [1.0, 2.0, 3.0, 4.0]]


@pytest.mark.parametrize(
    "module",
    [
        nn.LayerNorm(4, eps=1e-12),
        nn.RMSNorm(4, eps=1e-8),
        nn.RMSNorm(4, eps=1e-6),
        Fn(lambda m, x: F.batch_norm(x, m.mean, m.var, eps=1e-12), mean=torch.zeros(4),
           var=torch.zeros(4)),
    ],
    ids=["layer_norm_1e-12", "rms_norm_1e-8", "rms_norm_1e-6", "batch_norm_1e-12"],
)  # fmt: skip
def test_f16_norm_with_an_eps_below_f16s_normal_range(module: nn.Module) -> None:
    module = module.half().eval()
    x = torch.tensor(ROWS).half()
    cap = capture(module, x)
    with torch.no_grad():
        want = module(x).float().numpy()
    fused = apply_pipeline(cap.module.clone(), "decompose,fuse")
    for (got,) in (
        run_reference(cap.module, *cap.arguments(x), dtype=None),
        run_loop_module(fused, "forward", *cap.arguments(x), round_f32=True),
    ):
        np.testing.assert_allclose(np.asarray(got, np.float32), want, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize(
    ("mode", "shape", "scales"),
    [
        ("linear", (1, 2, 4), (1.19,)),
        ("bilinear", (1, 2, 5, 6), (1.1, 1.1)),
        ("bilinear", (2, 1, 4, 4), (1.19, 1.3)),
        ("trilinear", (1, 1, 4, 5, 3), (1.19, 0.7, 2.3)),
    ],
)
def test_linear_modes_copy_a_dim_that_keeps_its_size(
    mode: str, shape: tuple[int, ...], scales: tuple[float, ...]
) -> None:
    torch.manual_seed(0)
    module = Fn(lambda m, x: F.interpolate(x, scale_factor=scales, mode=mode))
    assert_matches_float64(module, torch.randn(shape))


@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("spatial", [1, 2, 3])
@pytest.mark.parametrize(
    ("size", "scale"), [(2, 1.19), (2, 2.3), (3, 2.3), (4, 1.19), (7, 0.6), (11, 2.3), (6, 2.3)]
)
def test_nearest_rows_from_the_scale(mode: str, spatial: int, size: int, scale: float) -> None:
    torch.manual_seed(0)
    x = torch.randn(1, 2, size, *[3] * (spatial - 1))
    scales = (scale,) + (1.0,) * (spatial - 1)
    module = Fn(lambda m, x: F.interpolate(x, scale_factor=scales, mode=mode))
    cap = capture(module, x)
    want = module(x).numpy()
    fused = apply_pipeline(cap.module.clone(), "decompose,fuse")
    for (got,) in (
        run_reference(cap.module, *cap.arguments(x)),
        run_loop_module(fused, "forward", *cap.arguments(x), round_f32=True),
    ):
        np.testing.assert_array_equal(np.asarray(got, np.float32), want)


def _running(m: nn.Module, x: Tensor) -> Tensor:
    y = x * 1
    y[..., 1:].add_(y[..., :-1])
    return y


def _smeared(m: nn.Module, x: Tensor) -> Tensor:
    y = x * 1
    y[..., 1:].copy_(y[..., :-1])
    return y


@pytest.mark.parametrize("fn", [_running, _smeared], ids=["add_", "copy_"])
def test_in_place_op_reading_an_overlapping_view_refused(fn) -> None:
    with pytest.raises(FrontendError, match=r"aten\.(add|copy)_ writes a tensor in place while"):
        capture(Fn(fn), torch.randn(2, 3, 5))


def _disjoint_or_same(m: nn.Module, x: Tensor) -> Tensor:
    y = x * 1
    y[..., 1:].add_(y[..., :1])  # the column read is not written
    y.mul_(y)  # each element reads itself
    y[..., 0] = y[..., 2]
    return y


def test_in_place_op_reading_its_own_or_unwritten_elements_captured() -> None:
    assert_matches_float64(Fn(_disjoint_or_same), torch.randn(2, 3, 5))


@pytest.mark.parametrize(
    ("source", "target"),
    [
        (torch.bfloat16, torch.float16),
        (torch.float16, torch.bfloat16),
        (torch.int32, torch.float32),
        (torch.float32, torch.int32),
        (torch.float32, torch.bfloat16),
    ],
)
def test_view_as_another_dtype_refused(source: torch.dtype, target: torch.dtype) -> None:
    x = torch.randint(0, 100, (3, 8)).to(source)
    with pytest.raises(FrontendError, match=r"Tensor\.view\(.*\) of .* reinterprets their bits"):
        capture(Fn(lambda m, x: x.view(target).float() * 2), x)


def test_view_as_its_own_dtype_captured() -> None:
    x = torch.randn(3, 8)
    module = Fn(lambda m, x: x.view(torch.float32) * 2)
    cap = capture(module, x)
    (got,) = run_reference(cap.module, *cap.arguments(x))
    np.testing.assert_array_equal(got, module(x).numpy())
