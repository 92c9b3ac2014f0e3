"""Capture bugs found by the thirty-fourth session, each fixed or refused by name now:

- A 0-d tensor (a scalar) given to an op along a dim, which torch takes as one element along
  its dim 0 (or -1), was refused as "IndexError: list index out of range" (softmax, gather,
  kthvalue, scatter_add, index_select), "captured IR does not verify: graph.reduce_max: dims
  must not be empty" (log_softmax, logsumexp, max/min over a dim, var/std, norms, prod, any,
  aminmax, nansum, count_nonzero) or "internal error" (min over a dim with keepdim); an integer
  cumsum of one crashed with a traceback (its integer bound). A reduction over no dims is its
  operand (a sum or mean plus +0.0: torch's sum of −0.0 is +0.0, which `x.sum()` of a 0-d
  −0.0 got wrong before), and the ops along a dim take a 0-d tensor as its one element, their
  results 0-d again, as torch's.
- −0.0 through `scatter_add`, `index_add` / `index_add_`, `index_put` with `accumulate`,
  `scatter(reduce='add')` and `scatter_reduce` sum and mean with x's own element came out
  +0.0, at positions no index names too: x plus a masked sum starting at +0.0, where torch
  adds the entries to x one by one (`x + s₁ + …` is −0.0 where x and every sᵢ are). The sum
  added is −0.0 now where no entry but a −0.0 names the position (`_added_at`), and
  `scatter_reduce`'s sum without x's element is +0.0 there, as torch's (it starts at +0.0).
- An empty tensor (a dim of size 0) was refused as "captured IR does not verify: graph.relu:
  operand shape 0x8 has a dimension of size 0", naming neither the torch op nor its line; an
  empty input that `cat` left out was captured and failed in `fuse`; `x[:, :0]` was refused
  even where only `cat` read it (as `new_empty(2, 0)` was not). An empty input, parameter or
  buffer is refused by name now, and so is the op (with its source line) of the first empty
  tensor the captured function keeps; an empty part `cat` leaves out is taken.

Found by the hunt over awkward inputs:

- `relu`, `relu6`, `clamp(min=0)` / `clamp_min(x, 0)` and `clamp(max=-0.0)` turned a −0.0 into
  +0.0 (or +0.0 into −0.0): the graph's `relu` / `max` / `min` are IEEE maximum / minimum, which
  order −0.0 below +0.0, where torch's clamp and relu keep x unless it is past the bound (at
  every size, its vectorized loops too). x is kept where it equals a zero or tensor bound now.
  (torch's own `maximum` / `max_pool` of −0.0 against +0.0 depend on the argument order and on
  whether its loop is vectorized, so `graph.max` keeps the IEEE order there.)
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_frontend_torch import Fn  # noqa: E402
from tinyopt.backends.loop_reference import run_loop_module  # noqa: E402
from tinyopt.backends.reference import run_reference  # noqa: E402
from tinyopt.compiler import apply_pipeline  # noqa: E402
from tinyopt.frontends.torch_fx import FrontendError, capture  # noqa: E402
from torch import Tensor, nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def _assert_close(got: np.ndarray, want: Tensor, tol: float = 1e-6) -> None:
    """`got` equals torch's `want` in shape and values (NaN where torch's is NaN, the sign of
    a zero included)."""
    want_np = want.double().numpy() if want.dtype != torch.bool else want.numpy()
    got = np.asarray(got)
    assert got.shape == want_np.shape
    np.testing.assert_allclose(
        got.astype(np.float64), want_np.astype(np.float64), rtol=tol, atol=tol, equal_nan=True
    )
    zero = want_np == 0
    np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want_np[zero]))


def assert_matches(module: nn.Module, *inputs: Tensor, tol: float = 1e-6) -> None:
    """The capture's reference (float64), and the loop level after `fuse` and after
    `decompose,fuse`, give torch's results."""
    assert_matches_each(module, [inputs], tol)


def assert_matches_each(
    module: nn.Module, examples: list[tuple[Tensor, ...]], tol: float = 1e-6
) -> None:
    """`assert_matches` at each of `examples` (inputs of the same shapes and dtypes), from one
    capture (of the first) and one lowering per pipeline: what torch.export traces depends on
    the inputs' shapes and dtypes, not on their values. Every example is checked; the failures
    are reported together, each with its inputs."""
    cap = capture(module, *examples[0])
    lowered = [apply_pipeline(cap.module.clone(), p) for p in ("fuse", "decompose,fuse")]
    failures = []
    for inputs in examples:
        try:
            with torch.no_grad():
                want = module(*inputs)
            want = want if isinstance(want, tuple) else (want,)
            got = run_reference(cap.module, *cap.arguments(*inputs))
            assert len(got) == len(want)
            for g, w in zip(got, want, strict=True):
                _assert_close(g, w, tol)
            for loop_module in lowered:
                got = run_loop_module(loop_module, "forward", *cap.arguments(*inputs))
                for g, w in zip(got, want, strict=True):
                    _assert_close(g, w, max(tol, 1e-6))
        except AssertionError as error:
            failures.append(f"at {inputs}: {error}")
    assert not failures, "\n".join(failures)


# ---------------------------------------------------------------------- 0-d (scalar) tensors

ZERO_D_VALUES = [1.5, -0.0, math.inf, -math.inf, math.nan]
"""The values each op of `ZERO_D` is checked at."""
ZERO_D: dict[str, Callable[..., Tensor]] = {
    "sum": lambda m, x: x.sum(),
    "sum_dim": lambda m, x: x.sum(0, keepdim=True),
    "mean_dim": lambda m, x: x.mean(-1),
    "amax_dim": lambda m, x: x.amax(0),
    "nanmean_dim": lambda m, x: torch.nanmean(x, 0),
    "softmax": lambda m, x: torch.softmax(x, 0),
    "softmax_last": lambda m, x: torch.softmax(x, -1),
    "log_softmax": lambda m, x: torch.log_softmax(x, 0),
    "logsumexp": lambda m, x: torch.logsumexp(x, 0),
    "logsumexp_keepdim": lambda m, x: torch.logsumexp(x, -1, keepdim=True),
    "max_dim": lambda m, x: torch.max(x, 0),
    "min_dim_keepdim": lambda m, x: torch.min(x, dim=0, keepdim=True),
    "argmax_dim": lambda m, x: torch.argmax(x, 0),
    "argmin_keepdim": lambda m, x: torch.argmin(x, -1, keepdim=True),
    "std": lambda m, x: torch.std(x),
    "std_dim": lambda m, x: torch.std(x, 0),
    "var_biased": lambda m, x: torch.var(x, correction=0),
    "var_mean": lambda m, x: torch.var_mean(x, 0, correction=0),
    "norm": lambda m, x: torch.norm(x),
    "vector_norm_3": lambda m, x: torch.linalg.vector_norm(x, 3, dim=0),
    "vector_norm_inf": lambda m, x: torch.linalg.vector_norm(x, math.inf, dim=0),
    "vector_norm_0": lambda m, x: torch.linalg.vector_norm(x, 0, dim=0),
    "normalize": lambda m, x: F.normalize(x, dim=0),
    "prod_dim": lambda m, x: torch.prod(x, 0),
    "any_dim": lambda m, x: torch.any(x > 0, 0),
    "aminmax": lambda m, x: torch.aminmax(x, dim=0),
    "nansum_dim": lambda m, x: torch.nansum(x, 0),
    "count_nonzero": lambda m, x: torch.count_nonzero(x, 0),
    "cumsum": lambda m, x: torch.cumsum(x, 0),
    "cumprod": lambda m, x: torch.cumprod(x, 0),
    "cummax": lambda m, x: torch.cummax(x, 0),
    "logcumsumexp": lambda m, x: torch.logcumsumexp(x, 0),
    "sort": lambda m, x: torch.sort(x, 0, descending=True),
    "argsort": lambda m, x: torch.argsort(x, -1),
    "topk": lambda m, x: torch.topk(x, 1, 0),
    "kthvalue": lambda m, x: torch.kthvalue(x, 1, 0),
    "kthvalue_keepdim": lambda m, x: torch.kthvalue(x, 1, -1, keepdim=True),
    "median_dim": lambda m, x: torch.median(x, 0, keepdim=True),
    "gather": lambda m, x: torch.gather(x, 0, m.i),
    "gather_last": lambda m, x: torch.gather(x, -1, m.i),
    "index_select": lambda m, x: torch.index_select(x, 0, m.i),
    "index_select_1d_index": lambda m, x: torch.index_select(x, -1, m.i.reshape(1)),
    "scatter_value": lambda m, x: x.scatter(0, m.i, 2.5),
    "scatter_add": lambda m, x: torch.full((), 0.25).scatter_add(0, m.i, x),
    "scatter_reduce_amax": lambda m, x: x.scatter_reduce(0, m.i, x * 3, "amax"),
    "index_add": lambda m, x: x.index_add(0, m.i, x * 3),
}


# torch's std and var of one element warn that the correction leaves no degree of freedom (NaN).
@pytest.mark.filterwarnings("ignore:std\\(\\).*degrees of freedom:UserWarning")
@pytest.mark.filterwarnings("ignore:var\\(\\).*degrees of freedom:UserWarning")
@pytest.mark.parametrize("name", list(ZERO_D))
def test_a_0d_tensor_along_its_dim(name: str) -> None:
    """At 1.5, −0.0, ±inf and NaN (one capture for the five: `assert_matches_each`)."""
    module = Fn(ZERO_D[name], i=torch.tensor(0))
    assert_matches_each(module, [(torch.tensor(value),) for value in ZERO_D_VALUES])


def test_a_0d_f16_softmax_and_max() -> None:
    module = Fn(lambda m, x: (torch.softmax(x, 0), torch.max(x, -1, keepdim=True).values))
    x = torch.tensor(-2.5, dtype=torch.float16)
    cap = capture(module, x)
    got = run_reference(cap.module, *cap.arguments(x), dtype=None)
    for g, w in zip(got, module(x), strict=True):
        _assert_close(np.asarray(g, np.float32), w.float())


def test_a_0d_gather_at_an_input_index() -> None:
    module = Fn(lambda m, x, i: torch.gather(x, 0, i))
    assert_matches(module, torch.tensor(3.25), torch.tensor(0))


def test_a_0d_integer_cumsum_is_refused_by_its_bound_not_a_traceback() -> None:
    module = Fn(lambda m, x: torch.cumsum(x, 0))
    with pytest.raises(FrontendError, match=r"aten.cumsum computes integers unbounded"):
        capture(module, torch.tensor(3))


def test_a_0d_bounded_integer_cumsum() -> None:
    module = Fn(lambda m, x: x + torch.cumsum(torch.tensor(3), 0))
    assert_matches(module, torch.tensor(1.5))


# ------------------------------------------------------------------ −0.0 added by an index

NEGATIVE_ZEROS = torch.tensor([[-0.0, -0.0, -0.0, 1.0, 0.0], [-0.0, 2.0, -0.0, -0.0, -0.0]])
"""x: −0.0 at positions no index names, named by −0.0 entries only, by +0.0 and by others."""
SOURCE = torch.tensor([[-0.0, -0.0, 2.0, 0.0], [-0.0, 1.0, -1.0, -0.0]])
TARGET = torch.tensor([[0, 0, 3, 4], [2, 3, 3, 2]])

ADDED: dict[str, tuple[Callable[..., Tensor], dict[str, Tensor]]] = {
    "scatter_add": (lambda m, x, s: x.scatter_add(1, m.i, s), {"i": TARGET}),
    "scatter_reduce_add": (lambda m, x, s: x.scatter(1, m.i, s, reduce="add"), {"i": TARGET}),
    "scatter_reduce_sum": (lambda m, x, s: x.scatter_reduce(1, m.i, s, "sum"), {"i": TARGET}),
    "scatter_reduce_mean": (lambda m, x, s: x.scatter_reduce(1, m.i, s, "mean"), {"i": TARGET}),
    "scatter_reduce_sum_without_x": (
        lambda m, x, s: x.scatter_reduce(1, m.i, s, "sum", include_self=False),
        {"i": TARGET},
    ),
    "scatter_reduce_mean_without_x": (
        lambda m, x, s: x.scatter_reduce(1, m.i, s, "mean", include_self=False),
        {"i": TARGET},
    ),
    "index_add": (lambda m, x, s: x.index_add(1, m.i, s), {"i": TARGET[0]}),
    "index_add_alpha": (lambda m, x, s: x.index_add(1, m.i, s, alpha=-2.0), {"i": TARGET[1]}),
    "index_add_": (lambda m, x, s: x.clone().index_add_(1, m.i, s), {"i": TARGET[1]}),
    "index_put_accumulate": (
        lambda m, x, s: x.index_put((m.i,), torch.cat([s, s[:, :1]], 1), accumulate=True),
        {"i": torch.tensor([1, 0])},
    ),
    "index_put_accumulate_dim1": (
        lambda m, x, s: torch.ops.aten.index_put(x, [None, m.i], s, True),
        {"i": TARGET[1]},
    ),
}


# torch warns that `scatter`'s reduce argument is deprecated (the form is still captured).
@pytest.mark.filterwarnings("ignore:The reduce argument of torch.scatter:UserWarning")
@pytest.mark.parametrize("name", list(ADDED))
def test_negative_zero_added_at_an_index_keeps_its_sign(name: str) -> None:
    fn, buffers = ADDED[name]
    assert_matches(Fn(fn, **buffers), NEGATIVE_ZEROS, SOURCE)


def test_negative_zero_added_at_an_index_in_f16() -> None:
    module = Fn(lambda m, x, s: x.scatter_add(1, m.i, s), i=TARGET)
    x, s = NEGATIVE_ZEROS.half(), SOURCE.half()
    cap = capture(module, x, s)
    (got,) = run_reference(cap.module, *cap.arguments(x, s), dtype=None)
    _assert_close(np.asarray(got, np.float32), module(x, s).float())


def test_negative_zero_added_at_an_index_in_cuda_on_the_cpu() -> None:
    from cpu_cuda import COMPILER
    from cpu_wgmma import run_program_on_cpu

    if COMPILER is None:
        pytest.skip("g++ not found")
    module = Fn(lambda m, x, s: x.scatter_add(1, m.i, s), i=TARGET)
    cap = capture(module, NEGATIVE_ZEROS, SOURCE)
    lowered = apply_pipeline(cap.module.clone(), "decompose,fuse,tile,to-cuda")
    (got,) = run_program_on_cpu(
        lowered, [np.asarray(a) for a in cap.arguments(NEGATIVE_ZEROS, SOURCE)]
    )
    _assert_close(got, module(NEGATIVE_ZEROS, SOURCE))


# ------------------------------------------------------------------------- empty tensors

EMPTY_INPUTS: dict[str, tuple[Callable[..., Tensor], tuple[Tensor, ...], dict[str, Tensor]]] = {
    "relu": (lambda m, x: torch.relu(x), (torch.randn(0, 8),), {}),
    "sum": (lambda m, x: x.sum(1), (torch.randn(4, 0),), {}),
    "softmax": (lambda m, x: torch.softmax(x, 0), (torch.randn(0, 3),), {}),
    "linear_k0": (lambda m, x: x @ m.w, (torch.randn(2, 0),), {"w": torch.randn(0, 4)}),
    "cat": (lambda m, x, y: torch.cat([x, y]), (torch.randn(0, 3), torch.randn(2, 3)), {}),
    "embedding": (
        lambda m, i: F.embedding(i, m.w),
        (torch.zeros(0, dtype=torch.long),),
        {"w": torch.randn(5, 3)},
    ),
}


@pytest.mark.parametrize("name", list(EMPTY_INPUTS))
def test_an_empty_input_is_refused_by_name(name: str) -> None:
    fn, inputs, buffers = EMPTY_INPUTS[name]
    shape = next(list(x.shape) for x in inputs if 0 in x.shape)
    with pytest.raises(
        FrontendError, match=rf"input \w+ is an empty tensor of shape {re.escape(str(shape))} \("
    ):
        capture(Fn(fn, **buffers), *inputs)


def test_an_empty_buffer_is_refused_by_name() -> None:
    module = Fn(lambda m, x: torch.gather(x, 0, m.i), i=torch.zeros(0, 3, dtype=torch.long))
    with pytest.raises(FrontendError, match=r"buffer b_i is an empty tensor of shape \[0, 3\]"):
        capture(module, torch.randn(2, 3))


EMPTY_MADE: dict[str, tuple[Callable[..., Tensor], str, str]] = {
    "slice_sum": (lambda m, x: x[:, 3:].sum(1), "aten.slice", "[2, 0]"),
    "slice_matmul": (lambda m, x: x[:, :0] @ x[:, :0].T, "aten.slice", "[2, 0]"),
    "slice_returned": (lambda m, x: (x * 2, x[:0]), "aten.slice", "[0, 3]"),
    "zeros": (lambda m, x: x + torch.zeros(0, 3).sum(0), "aten.zeros", "[0, 3]"),
    "topk_0": (lambda m, x: torch.topk(x, 0, 1).values, "aten.topk", "[2, 0]"),
    "repeat_0": (lambda m, x: x.repeat(0, 1).sum(0), "aten.repeat", "[0, 3]"),
    "pad_crop": (lambda m, x: F.pad(x, (-3, 0)).sum(1), "aten.pad", "[2, 0]"),
    "cat_of_empty_parts": (lambda m, x: torch.cat([x[:, :0], x[:, 3:]], 1), "aten.cat", "[2, 0]"),
    "arange_0": (lambda m, x: x + torch.arange(0).sum(), "aten.arange", "[0]"),
}


@pytest.mark.parametrize("name", list(EMPTY_MADE))
def test_an_empty_tensor_made_in_forward_is_refused_naming_its_op(name: str) -> None:
    fn, op, shape = EMPTY_MADE[name]
    pattern = rf"{op} (gives an|of an) empty tensor of shape {re.escape(shape)} \(a dim of size 0\)"
    with pytest.raises(FrontendError, match=pattern) as error:
        capture(Fn(fn), torch.randn(2, 3))
    assert "line" in str(error.value)  # the source line of the op


@pytest.mark.parametrize(
    "fn",
    [
        lambda m, x: torch.cat([x[:, :0], x], 1) * 2,
        lambda m, x: torch.cat([x.narrow(1, 1, 0), x, x[:, 3:]], 1),
        lambda m, x: torch.cat([x.new_empty(2, 0), x], 1),
    ],
)
def test_an_empty_part_cat_leaves_out_is_taken(fn: Callable[..., Tensor]) -> None:
    assert_matches(Fn(fn), torch.randn(2, 3))


# ------------------------------------------------------------- −0.0 through relu and clamp

SIGNED_ZEROS = torch.tensor(
    [[-0.0, 0.0, -1.5, 2.0, math.nan, -math.inf], [math.inf, -0.0, 0.0, 7.0, -0.0, -3.0]]
)
CLAMPS: dict[str, Callable[..., Tensor]] = {
    "relu": lambda m, x: torch.relu(x),
    "relu_module": lambda m, x: nn.ReLU()(x),
    "relu6": lambda m, x: F.relu6(x),
    "hardtanh_0_1": lambda m, x: F.hardtanh(x, 0.0, 1.0),
    "clamp_min_0": lambda m, x: x.clamp(min=0),
    "clamp_min_fn": lambda m, x: torch.clamp_min(x, 0.0),
    "clamp_0_1": lambda m, x: x.clamp(0.0, 1.0),
    "clamp_max_negative_zero": lambda m, x: x.clamp(max=-0.0),
    "clamp_max_0": lambda m, x: x.clamp(max=0.0),
    "clamp_tensor_bounds": lambda m, x: x.clamp(min=x.flip(1), max=m.b),
}


@pytest.mark.parametrize("name", list(CLAMPS))
def test_negative_zero_through_relu_and_clamp(name: str) -> None:
    b = torch.tensor([[0.0, -0.0, 1.0, 5.0, 0.0, 2.0], [0.0, 0.0, -0.0, 1.0, 3.0, 0.0]])
    assert_matches(Fn(CLAMPS[name], b=b), SIGNED_ZEROS)


def test_negative_zero_through_relu_in_bf16() -> None:
    module = Fn(lambda m, x: (torch.relu(x), x.clamp(min=0.0)))
    x = SIGNED_ZEROS.bfloat16()
    cap = capture(module, x)
    got = run_reference(cap.module, *cap.arguments(x), dtype=None)
    for g, w in zip(got, module(x), strict=True):
        _assert_close(np.asarray(g, np.float32), w.float())


def test_negative_zero_through_relu_in_cuda_on_the_cpu() -> None:
    from cpu_cuda import COMPILER
    from cpu_wgmma import run_program_on_cpu

    if COMPILER is None:
        pytest.skip("g++ not found")
    module = Fn(lambda m, x: torch.relu(x) + F.relu6(x) * 0.5)
    cap = capture(module, SIGNED_ZEROS)
    lowered = apply_pipeline(cap.module.clone(), "decompose,fuse,tile,to-cuda")
    (got,) = run_program_on_cpu(lowered, [np.asarray(a) for a in cap.arguments(SIGNED_ZEROS)])
    _assert_close(got, module(SIGNED_ZEROS))
