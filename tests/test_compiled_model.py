"""A torch module compiled into a CompiledModel: weights bound once, a CUDA graph per call."""

from __future__ import annotations


import pytest
from conftest import requires_gpu
from programs import load_example

torch = pytest.importorskip("torch")

from tinyopt.backends.cuda.runtime import compile_module  # noqa: E402
from tinyopt.compiler import apply_pipeline  # noqa: E402
from tinyopt.dialects import tile  # noqa: E402
from tinyopt.frontends.compiled_model import PIPELINE, CompiledModel  # noqa: E402
from tinyopt.frontends.torch_fx import capture  # noqa: E402

llama = load_example("llama_block.py")

PDL_PIPELINE = PIPELINE.replace("to-cuda", "to-cuda{pdl=1}")
"""The default pipeline with programmatic dependent launch between the block's kernels."""


def test_pdl_pipeline_marks_and_compiles_every_kernel_of_the_block() -> None:
    block = llama.block().to(torch.bfloat16).eval()
    (x,) = (t.to(torch.bfloat16) for t in llama.example_inputs())
    lowered = apply_pipeline(capture(block, x).module.clone(), PDL_PIPELINE)
    kernels = [op for op in lowered.ops if isinstance(op, tile.CudaKernelOp)]
    assert len(kernels) >= 11
    assert all(k.pdl is not None for k in kernels)
    compiled = compile_module(lowered, arch="sm_90a")
    assert all(k.pdl for k in compiled.kernels.values())


@requires_gpu
@pytest.mark.parametrize("pipeline", [PIPELINE, PDL_PIPELINE], ids=["default", "pdl"])
@pytest.mark.parametrize("graph", [True, False], ids=["graph", "launches"])
def test_compiled_block_matches_eager_on_fresh_inputs(graph: bool, pipeline: str) -> None:
    block = llama.block().to("cuda", torch.bfloat16).eval()
    (x,) = (t.to("cuda", torch.bfloat16) for t in llama.example_inputs())
    model = CompiledModel(block, x, pipeline=pipeline, graph=graph)
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
