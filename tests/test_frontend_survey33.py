"""Capture bugs found by the thirty-third session, each fixed or refused by name now:

- A picked −0.0 came out +0.0: `torch.gather`, `take_along_dim`, the values of `topk`, `sort`,
  `kthvalue`, `median`, `quantile`, `scatter` at distinct indices, `index_put` without
  `accumulate` and `nll_loss`'s picked class took their element by a masked sum over the dim,
  and a sum starts at +0.0 (+0.0 + −0.0 is +0.0). They take it by a masked maximum over −inf
  now (`_picked`), exact for every float, checked bit for bit (the sign of zeros included) at
  the graph level, at the loop level and in the CUDA the GPU pipeline prints, run on the CPU
  emulation.
- `F.cross_entropy` with class weights, label smoothing and the mean reduction was refused as
  "aten.masked_fill computes integers unbounded": torch's decomposition of it fills the
  ignored targets with 0 (an integer `masked_fill` of an input) to gather their weights. The
  capture replaces that decomposition's weight sum by a match of each target with the class
  index; checked against torch in float64.
- Integer `torch.linspace` was refused as "aten.linspace computes integers unbounded" (its
  bounds are numbers): its values are taken from torch at capture, with their bound.

Found by the hunt over awkward inputs:

- `torch.where(x > 0, x, -0.0)` gave +0.0 at the loop level (and in CUDA): `fuse` made each
  f32 constant once per kernel in a dict keyed by its value, where −0.0 is +0.0. Keyed by the
  sign too now.
- `F.pad(x, ..., value=-0.0)` and `torch.nan_to_num(x, nan=-0.0)` padded / replaced with +0.0
  (`value or 0`).
- A mask (`bool` tensor) flipped, indexed by ids (`x[:, ids]`, `index_select`, an embedding of a
  mask table), gathered (`gather`, `take_along_dim`) or `masked_scatter`ed failed with "captured
  IR does not verify" (`graph.gather`/`graph.select` take float tensors): moved as 0/1 floats.
- A number past the range of the type an op computes in (`x + 1e5`, `torch.where(m, x, -1e9)`
  of f16 tensors) failed with "OverflowError: float too large to pack with e format"; refused
  now naming the number and the type.
- `torch.arange` of a float dtype with a fractional start or step was one ulp off (f32's
  `i · step + start` rounds twice, torch computes in float64 and rounds once): its values are
  taken from torch at capture.
- The reference executor with `dtype=None` (each op rounded to its type) stored a cast's
  result in its source's numpy dtype: f16's 65504 cast to bf16 (65536) became inf.
"""

from __future__ import annotations

import math

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

ZEROS = torch.tensor([[-0.0, 1.0, -2.0, 3.0, 0.5], [5.0, -0.0, -3.0, 4.0, -1.5]])
"""Rows with a −0.0 and no other zero (torch's order of ties is its own)."""
INDEX = torch.tensor([[0, 2, 0, 4], [1, 1, 3, 0]])


def _assert_same_bits(got: np.ndarray, want: Tensor) -> None:
    want = want.numpy()
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


PICKS: dict[str, tuple[nn.Module, tuple[Tensor, ...]]] = {
    "gather": (Fn(lambda m, x, i: torch.gather(x, 1, i)), (ZEROS, INDEX)),
    "gather_dim0": (Fn(lambda m, x: torch.gather(x, 0, m.i), i=INDEX[:, :3] % 2), (ZEROS,)),
    "take_along_dim": (Fn(lambda m, x, i: torch.take_along_dim(x, i, -1)), (ZEROS, INDEX)),
    "topk": (Fn(lambda m, x: torch.topk(x, 3, dim=1).values), (ZEROS,)),
    "topk_smallest": (Fn(lambda m, x: torch.topk(x, 4, largest=False).values), (ZEROS,)),
    "sort": (Fn(lambda m, x: torch.sort(x, dim=-1, descending=True).values), (ZEROS,)),
    "kthvalue": (Fn(lambda m, x: torch.kthvalue(x, 3, dim=1).values), (ZEROS,)),
    "median": (Fn(lambda m, x: torch.median(x[:, :3], dim=1).values), (ZEROS,)),
    "scatter": (
        Fn(lambda m, x, s: x.scatter(1, torch.argsort(s, dim=1), s)),
        (torch.ones(2, 5), ZEROS),
    ),
    "index_put": (
        Fn(lambda m, x, v: x.index_put((torch.arange(2),), v)),
        (torch.ones(2, 5), ZEROS),
    ),
    "nll_loss": (
        Fn(lambda m, x: F.nll_loss(x, m.t, reduction="none"), t=torch.tensor([0, 1])),
        (ZEROS,),
    ),
}


@pytest.mark.parametrize("name", list(PICKS))
def test_a_picked_negative_zero_keeps_its_sign(name: str) -> None:
    module, inputs = PICKS[name]
    cap = capture(module, *inputs)
    with torch.no_grad():
        want = module(*inputs)
    (got,) = run_reference(cap.module, *cap.arguments(*inputs))
    _assert_same_bits(np.asarray(got, np.float32), want)
    for pipeline in ("fuse", "decompose,fuse"):
        lowered = apply_pipeline(cap.module.clone(), pipeline)
        (got,) = run_loop_module(lowered, "forward", *cap.arguments(*inputs))
        _assert_same_bits(np.asarray(got, np.float32), want)


@pytest.mark.parametrize("name", ["gather", "topk", "sort", "scatter"])
def test_a_picked_negative_zero_keeps_its_sign_in_cuda_on_the_cpu(name: str) -> None:
    from cpu_cuda import COMPILER
    from cpu_wgmma import run_program_on_cpu

    if COMPILER is None:
        pytest.skip("g++ not found")
    module, inputs = PICKS[name]
    cap = capture(module, *inputs)
    with torch.no_grad():
        want = module(*inputs)
    lowered = apply_pipeline(cap.module.clone(), "decompose,fuse,tile,to-cuda")
    (got,) = run_program_on_cpu(lowered, [np.asarray(a) for a in cap.arguments(*inputs)])
    _assert_same_bits(got, want)


def test_a_picked_f16_negative_zero_keeps_its_sign() -> None:
    module = Fn(lambda m, x: (torch.gather(x, 1, m.i), torch.topk(x, 2).values), i=INDEX)
    x = ZEROS.half()
    cap = capture(module, x)
    want = module(x)
    got = run_reference(cap.module, *cap.arguments(x), dtype=None)
    for g, w in zip(got, want, strict=True):
        _assert_same_bits(np.asarray(g, np.float32), w.float())


@pytest.mark.parametrize(
    ("shape", "target", "ignore_index"),
    [
        ((4, 5), [0, 3, 4, 1], -100),
        ((4, 5), [0, -100, 4, -100], -100),
        ((4, 5), [0, 2, 4, 2], 2),
        ((5,), 3, -100),
        ((2, 5, 3, 2), [[[0, 1], [4, 2], [3, 3]], [[1, -100], [0, 4], [2, 2]]], -100),
    ],
)
def test_cross_entropy_with_weights_and_label_smoothing(
    shape: tuple[int, ...], target: list | int, ignore_index: int
) -> None:
    torch.manual_seed(0)
    module = Fn(
        lambda m, x, t: F.cross_entropy(
            x, t, weight=m.w, label_smoothing=0.15, ignore_index=ignore_index
        ),
        w=torch.rand(5) + 0.1,
    )
    assert_matches_float64(module, torch.randn(shape), torch.tensor(target))


@pytest.mark.parametrize(
    ("start", "end", "steps", "dtype"),
    [(0, 10, 4, torch.int64), (-3, 10, 7, torch.int32), (2.7, -5.5, 6, torch.int64)],
)
def test_integer_linspace(start: float, end: float, steps: int, dtype: torch.dtype) -> None:
    module = Fn(lambda m, x: x * torch.linspace(start, end, steps, dtype=dtype))
    x = torch.randn(2, steps)
    cap = capture(module, x)
    (got,) = run_reference(cap.module, *cap.arguments(x))
    np.testing.assert_array_equal(np.asarray(got, np.float32), module(x).numpy())


def test_integer_linspace_as_an_index() -> None:
    module = Fn(lambda m, x: x[:, torch.linspace(0, 6, 4, dtype=torch.int64)])
    assert_matches_float64(module, torch.randn(3, 7))


def test_integer_linspace_past_f32s_integers_refused() -> None:
    module = Fn(lambda m, x: x * torch.linspace(0, 2**30, 3, dtype=torch.int64))
    with pytest.raises(FrontendError, match=r"constant integer tensor up to 1073741824"):
        capture(module, torch.randn(2, 3))


def test_negative_zero_constant_beside_a_positive_one_in_a_kernel() -> None:
    x = torch.tensor(
        [[-0.0, 0.0, 1.0, -1.0, math.inf, -math.inf], [2.0, -0.0, -3.0, 0.5, 0.0, 7.0]]
    )
    module = Fn(lambda m, x: (torch.where(x > 0, x, -0.0), torch.where(x < 0, 0.0, -x)))
    cap = capture(module, x)
    want = module(x)
    for pipeline in ("fuse", "decompose,fuse"):
        lowered = apply_pipeline(cap.module.clone(), pipeline)
        got = run_loop_module(lowered, "forward", *cap.arguments(x))
        for g, w in zip(got, want, strict=True):
            _assert_same_bits(np.asarray(g, np.float32), w)


def test_negative_zero_constant_in_cuda_on_the_cpu() -> None:
    from cpu_cuda import COMPILER
    from cpu_wgmma import run_program_on_cpu

    if COMPILER is None:
        pytest.skip("g++ not found")
    x = torch.tensor([[-0.0, 0.0, 1.0, -1.0], [2.0, -0.0, -3.0, 0.5]])
    module = Fn(lambda m, x: torch.where(x > 0, x, -0.0) * torch.where(x < 0, 0.0, 1.0))
    cap = capture(module, x)
    lowered = apply_pipeline(cap.module.clone(), "decompose,fuse,tile,to-cuda")
    (got,) = run_program_on_cpu(lowered, [np.asarray(a) for a in cap.arguments(x)])
    _assert_same_bits(got, module(x))


@pytest.mark.parametrize(
    "fn",
    [
        lambda m, x: F.pad(x, (1, 2), value=-0.0),
        lambda m, x: F.pad(x, (1, 1, 2, 0), value=-0.0),
        lambda m, x: torch.nan_to_num(x, nan=-0.0),
    ],
    ids=["pad", "pad_2d", "nan_to_num"],
)
def test_negative_zero_fill_values(fn) -> None:
    x = torch.tensor([[math.nan, 1.0, -0.0], [0.0, math.nan, 2.0]])
    module = Fn(fn)
    cap = capture(module, x)
    want = module(x)
    (got,) = run_reference(cap.module, *cap.arguments(x))
    _assert_same_bits(np.asarray(got, np.float32), want)
    (got,) = run_loop_module(apply_pipeline(cap.module.clone(), "fuse"), "forward", x.numpy())
    _assert_same_bits(np.asarray(got, np.float32), want)


MASK = torch.tensor([[True, False, True, True, False], [False, False, True, False, True]])


@pytest.mark.parametrize(
    ("fn", "extra"),
    [
        (lambda m, x: x.flip(1), ()),
        (lambda m, x: x ^ x.flip(-1), ()),
        (lambda m, x, i: x[:, i], (torch.tensor([0, 3, 3]),)),
        (lambda m, x, i: x.index_select(1, i), (torch.tensor([4, 0]),)),
        (lambda m, x, i: torch.gather(x, 1, i), (torch.tensor([[0, 3], [3, 1]]),)),
        (lambda m, x, i: torch.take_along_dim(x, i, 1), (torch.tensor([[4, 3], [2, 1]]),)),
        (lambda m, x, i: F.embedding(i, x), (torch.tensor([1, 0, 1]),)),
        (lambda m, x, s: x.masked_scatter(x, s), (~MASK,)),
    ],
    ids=[
        "flip", "xor_flip", "index", "index_select", "gather", "take_along_dim", "embedding",
        "masked_scatter",
    ],
)  # fmt: skip
def test_masks_moved_by_gathers(fn, extra: tuple[Tensor, ...]) -> None:
    module = Fn(fn)
    cap = capture(module, MASK, *extra)
    want = module(MASK, *extra).numpy()
    (got,) = run_reference(cap.module, *cap.arguments(MASK, *extra))
    np.testing.assert_array_equal(got, want)
    lowered = apply_pipeline(cap.module.clone(), "decompose,fuse")
    (got,) = run_loop_module(lowered, "forward", *cap.arguments(MASK, *extra))
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize(
    ("fn", "dtype", "number"),
    [
        (lambda m, x: x + 1e5, torch.float16, "100000"),
        (lambda m, x: torch.where(x > 0, x, -1e9), torch.float16, "-1e\\+09"),
        (lambda m, x: x / 1e5, torch.float16, "100000"),
        (lambda m, x: x * 1e39, torch.float32, "1e\\+39"),
    ],
    ids=["add", "where", "div", "f32"],
)
def test_a_number_past_the_ops_type_refused(fn, dtype: torch.dtype, number: str) -> None:
    with pytest.raises(FrontendError, match=rf"the number {number} is past the range of f(16|32)"):
        capture(Fn(fn), torch.randn(2, 3).to(dtype))


@pytest.mark.parametrize(
    ("start", "end", "step", "dtype"),
    [
        (0, 1, 0.3, torch.float32),
        (0.1, 2.5, 0.7, torch.float32),
        (1.0, -1.0, -0.15, torch.float32),
        (0.1, 2.5, 0.7, torch.float16),
        (2**24, 2**24 + 8, 1.0, torch.float32),
    ],
)
def test_float_arange_as_torch_rounds_it(
    start: float, end: float, step: float, dtype: torch.dtype
) -> None:
    """torch computes `start + i · step` in float64 and rounds once; f32's product and sum
    rounded twice (`arange(0, 1, 0.3)[3]` one ulp above f32's 0.9)."""
    n = len(torch.arange(start, end, step))
    module = Fn(lambda m, x: x + torch.arange(start, end, step, dtype=dtype))
    x = torch.zeros(n, dtype=dtype)
    cap = capture(module, x)
    want = module(x).float().numpy()
    (got,) = run_reference(cap.module, *cap.arguments(x), dtype=None)
    np.testing.assert_array_equal(np.asarray(got, np.float32), want)
    lowered = apply_pipeline(cap.module.clone(), "decompose,fuse")
    (got,) = run_loop_module(lowered, "forward", *cap.arguments(x), round_f32=True)
    np.testing.assert_array_equal(np.asarray(got, np.float32), want)


def test_reference_casts_f16_to_bf16_past_f16s_range() -> None:
    """f16's 65504 is bf16's 65536: the reference (`dtype=None`, each op in its type) stored
    the cast's result back in f16, as inf."""
    module = Fn(lambda m, x: x.bfloat16() * 1)
    x = torch.tensor([65504.0, 65280.0, -65504.0, 1.0009765625]).half()
    cap = capture(module, x)
    (got,) = run_reference(cap.module, *cap.arguments(x), dtype=None)
    np.testing.assert_array_equal(got, module(x).float().numpy())
