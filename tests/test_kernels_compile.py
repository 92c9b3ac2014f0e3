"""Every kernel the examples and test programs generate compiles with NVRTC for sm_90a.

No GPU is needed: this is what CI runs to keep the printed CUDA valid.
"""

import pytest
from programs import CASES, EXAMPLE_CASES, Case

from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.compiler import lower
from tinyopt.dialects import tile


@pytest.mark.parametrize("case", CASES + EXAMPLE_CASES, ids=lambda c: c.id)
def test_kernels_compile_for_sm90a(case: Case) -> None:
    _, module = lower(case.text, case.pipeline)
    kernels = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    assert kernels, "the pipeline produced no kernel"
    compiled = compile_module(module, arch="sm_90a")
    assert set(compiled.kernels) == {k.sym_name.data for k in kernels}


@pytest.mark.parametrize("name", ["probe_stream_read", "probe_tma_sectors"])
def test_probe_compiles_for_sm90a(name: str) -> None:
    """A probe's kernels in benchmarks/ (run on the GPU only by hand) stay valid CUDA."""
    import importlib.util
    from pathlib import Path

    from tinyopt.backends.cuda.nvrtc import compile_cuda

    path = Path(__file__).parent.parent / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    assert compile_cuda(probe.SOURCE, name, arch="sm_90a")


@pytest.mark.parametrize("variant", ["L2::128B", "L2::256B"])
def test_decode_copies_probe_rewrites_and_compiles_for_sm90a(variant: str) -> None:
    """benchmarks/probe_decode_copies.py (run on the GPU only by hand) still finds the printed
    16-byte copy of the decode partial kernel, and its rewrite is valid CUDA."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
    import probe_decode_copies as probe
    from bench_decode import attention_program

    module = probe.rewritten(lower(attention_program(8, 4096), probe.PIPELINE)[1], variant)
    sources = [op.source.data for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    assert any(f"cp.async.cg.shared.global.{variant} " in s for s in sources)
    compile_module(module, arch="sm_90a")
