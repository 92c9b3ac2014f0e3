"""A torch module compiled into a CompiledModel: weights bound once, a CUDA graph per call."""

from __future__ import annotations


import pytest
from conftest import requires_gpu
from programs import load_example

torch = pytest.importorskip("torch")

from tinyopt.frontends.compiled_model import CompiledModel  # noqa: E402

llama = load_example("llama_block.py")


@requires_gpu
@pytest.mark.parametrize("graph", [True, False], ids=["graph", "launches"])
def test_compiled_block_matches_eager_on_fresh_inputs(graph: bool) -> None:
    block = llama.block().to("cuda", torch.bfloat16).eval()
    (x,) = (t.to("cuda", torch.bfloat16) for t in llama.example_inputs())
    model = CompiledModel(block, x, graph=graph)
    with torch.no_grad():
        for _ in range(2):  # fresh values through the same bound buffers
            x = torch.randn_like(x)
            out = model(x)
            exact = block.double()(x.double())
            block.bfloat16()
            error = ((out.double() - exact).norm() / exact.norm()).item()
            assert error < 2e-2, error
    first = model(x)
    second = model(torch.randn_like(x))
    assert not torch.equal(first, second)  # outputs are copies, not the bound buffer


@requires_gpu
def test_compiled_model_refuses_other_shapes() -> None:
    block = llama.block().to("cuda", torch.bfloat16).eval()
    (x,) = (t.to("cuda", torch.bfloat16) for t in llama.example_inputs())
    model = CompiledModel(block, x)
    with pytest.raises(TypeError, match="compiled for"):
        model(torch.zeros(1, 8, 64, device="cuda", dtype=torch.bfloat16))
