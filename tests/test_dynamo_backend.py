"""torch.compile(backend="tinyopt"): Dynamo's graphs compiled by tinyopt, or run eagerly with
one warning naming why."""

from __future__ import annotations

import copy
import re
import warnings
from collections.abc import Callable, Iterator
from importlib.metadata import entry_points
from typing import Any

import numpy as np
import pytest
from conftest import requires_gpu
from programs import load_example

torch = pytest.importorskip("torch")

from torch import Tensor, nn  # noqa: E402
from xdsl.dialects.builtin import bf16, f32  # noqa: E402

from tinyopt.backends.check import TOLERANCES  # noqa: E402
from tinyopt.backends.reference import run_reference  # noqa: E402
from tinyopt.frontends import dynamo_backend  # noqa: E402
from tinyopt.frontends.torch_fx import capture  # noqa: E402

with warnings.catch_warnings():  # torch 2.11 (the H200's) warns while importing inductor
    warnings.filterwarnings("ignore", "`torch.jit.script_method` is deprecated", DeprecationWarning)
    import torch._inductor.compile_fx  # noqa: E402, F401

llama = load_example("llama_block.py")

EAGER = "tinyopt backend: running this graph eagerly"


@pytest.fixture(autouse=True)
def fresh_dynamo() -> Iterator[None]:
    """Each test compiles its own graphs (no cache entries or recompile limits shared)."""
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def tinyopt_warnings(call: Callable[[], Any]) -> tuple[Any, list[str]]:
    """Return `call()` and the messages of the tinyopt backend's warnings it raised."""
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        result = call()
    return result, [str(w.message) for w in record if str(w.message).startswith(EAGER)]


def dynamo_graphs(module: Callable[..., Any], *inputs: Tensor) -> list[tuple[Any, list[Any]]]:
    """Return the (graph, example inputs) pairs Dynamo hands a backend for `module(*inputs)`."""
    graphs = []

    def recording(gm: Any, example_inputs: list[Any]) -> Callable[..., Any]:
        graphs.append((gm, example_inputs))
        return gm.forward

    with torch.no_grad():
        torch.compile(module, backend=recording)(*inputs)
    return graphs


def test_entry_point_names_the_backend() -> None:
    (entry,) = entry_points(group="torch_dynamo_backends", name="tinyopt")
    assert entry.load() is dynamo_backend.backend
    assert "tinyopt" in torch._dynamo.list_backends()


def test_mlp_without_a_cuda_input_runs_eagerly_with_one_warning() -> None:
    model, x = mlp(), torch.randn(2, 8)
    compiled = torch.compile(model, backend="tinyopt")
    with torch.no_grad():
        (first, second), messages = tinyopt_warnings(lambda: (compiled(x), compiled(x)))
        eager = model(x)
    (message,) = messages
    assert "no CUDA device" in message or "not all on the current CUDA device" in message
    assert torch.equal(first, eager) and torch.equal(second, eager)


@pytest.mark.parametrize(
    ("function", "reason"),
    [
        (lambda a: torch.erfc(a) * 2, r"cannot capture aten\.erfc \(node erfc"),
        (lambda a: (a.t(), a * 2), "output t aliases a graph input"),
        (lambda a: (lambda y: (y, y.view(-1)))(a * 2), "output view aliases .* another output"),
    ],
    ids=["unsupported_op", "output_aliasing_an_input", "outputs_aliasing_each_other"],
)
def test_graph_tinyopt_cannot_take_runs_eagerly_naming_why(
    function: Callable[[Tensor], Any], reason: str
) -> None:
    x = torch.randn(4, 8)
    got, (message,) = tinyopt_warnings(lambda: torch.compile(function, backend="tinyopt")(x))
    assert re.search(reason, message), message
    torch.testing.assert_close(got, function(x), rtol=0, atol=0)


def test_dynamic_shapes_run_eagerly_naming_why() -> None:
    x = torch.randn(4, 8)
    compiled = torch.compile(lambda a: a * 2, backend="tinyopt", dynamic=True)
    got, (message,) = tinyopt_warnings(lambda: compiled(x))
    assert "not a tensor of static shape" in message and "dynamic=False" in message
    assert torch.equal(got, x * 2)


def test_training_runs_eagerly_and_keeps_gradients() -> None:
    model, x = mlp(), torch.randn(2, 8)
    got, (message,) = tinyopt_warnings(lambda: torch.compile(model, backend="tinyopt")(x))
    assert "autograd: an input requires grad" in message
    got.sum().backward()
    compiled_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for compiled_grad, p in zip(compiled_grads, model.parameters(), strict=True):
        torch.testing.assert_close(compiled_grad, p.grad, rtol=0, atol=0)


def assert_capture_matches_float64(module: nn.Module, x: Tensor) -> None:
    """Capture Dynamo's one graph of `module(x)` as the backend does; its float64 reference
    run matches the module in float64."""
    ((gm, example_inputs),) = dynamo_graphs(module, x)
    with torch.no_grad():
        cap = dynamo_backend.capture_graph(gm, example_inputs)
        want = copy.deepcopy(module).double()(x.double()).numpy()
    (got,) = run_reference(cap.module, *cap.arguments(*example_inputs))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_capture_of_the_mlp_graph_matches_torch() -> None:
    assert_capture_matches_float64(mlp(), torch.randn(2, 8))


def test_capture_of_the_llama_block_graph_matches_torch() -> None:
    assert_capture_matches_float64(llama.block(), *llama.example_inputs())


class ReferenceModel:
    """Stands in for CompiledModel without a GPU: the same capture, run by the reference
    executor, and the runtime's demand for contiguous tensors that need no grad."""

    def __init__(self, module: nn.Module, *inputs: Tensor) -> None:
        self.capture = capture(module, *inputs)

    def __call__(self, *inputs: Tensor) -> Tensor | tuple[Tensor, ...]:
        if not all(x.is_contiguous() and not x.requires_grad for x in inputs):
            raise TypeError("kernels bind contiguous tensors that need no grad")
        arrays = run_reference(self.capture.module, *self.capture.arguments(*inputs))
        results = tuple(torch.from_numpy(a).float() for a in arrays)
        return results[0] if len(results) == 1 else results


def nested_outputs(a: Tensor, b: Tensor) -> Any:
    return [a @ b, {"sums": torch.relu(a).sum(-1)}], (a * 2).t().contiguous()


@pytest.mark.parametrize(
    ("function", "inputs"),
    [
        (mlp(), (torch.randn(2, 8),)),
        (nested_outputs, (torch.randn(4, 8), torch.randn(3, 8).t())),  # b is not contiguous
    ],
    ids=["mlp", "nested_outputs"],
)
def test_compiled_call_returns_dynamos_outputs(
    monkeypatch: pytest.MonkeyPatch, function: Callable[..., Any], inputs: tuple[Tensor, ...]
) -> None:
    monkeypatch.setattr(dynamo_backend, "CompiledModel", ReferenceModel)
    monkeypatch.setattr(dynamo_backend, "_check_device", lambda gm, args: None)
    compiled = torch.compile(function, backend="tinyopt", dynamic=False)
    with torch.no_grad():
        (first, second), messages = tinyopt_warnings(lambda: (compiled(*inputs), compiled(*inputs)))
        want = function(*inputs)
    assert not messages
    torch.testing.assert_close(first, want)
    torch.testing.assert_close(second, want)


def relative_error(out: Tensor, exact: Tensor) -> float:
    return ((out.double() - exact).norm() / exact.norm()).item()


@requires_gpu
@pytest.mark.parametrize(
    ("make", "inputs"),
    [(mlp, lambda: (torch.randn(2, 8),)), (llama.block, llama.example_inputs)],
    ids=["mlp", "llama_block"],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
def test_compiled_on_the_gpu_matches_eager_without_warnings(
    make: Callable[[], nn.Module], inputs: Callable[[], tuple[Tensor]], dtype: torch.dtype
) -> None:
    module = make().to("cuda", dtype).eval()
    (x,) = (t.to("cuda", dtype) for t in inputs())
    compiled = torch.compile(module, backend="tinyopt")
    with torch.no_grad(), warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        calls = [x, torch.randn_like(x)]  # the second through the same compiled graph
        outs = [compiled(a) for a in calls]
        exact = [copy.deepcopy(module).double()(a.double()) for a in calls]
    assert not [str(w.message) for w in record]
    tolerance = TOLERANCES[f32 if dtype == torch.float32 else bf16]
    for out, want in zip(outs, exact, strict=True):
        assert out.dtype == dtype and out.shape == want.shape
        assert relative_error(out, want) < tolerance
