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
