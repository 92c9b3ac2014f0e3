"""The machine code (SASS) of the GEMM schedules: tensor-core instructions for `mma=sync` and
`mma=wgmma` (HGMMA fed by TMA),
128-bit shared loads and no local memory (spills, register arrays) for the FP32 SGEMM.

Needs `cuobjdump` from the CUDA toolkit (no GPU); skipped where it is not on PATH.
"""

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from programs import matmul_plain, matmul_relu, tile_with

from tinyopt.backends.cuda.nvrtc import compile_cuda
from tinyopt.compiler import lower
from tinyopt.dialects import tile

CUOBJDUMP = shutil.which("cuobjdump")
LOCAL_MEMORY = re.compile(r"\b(STL|LDL)\b")

pytestmark = pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump is not on PATH")


def sass(text: str, pipeline: str, tmp_path: Path) -> str:
    """Returns the disassembly of the one kernel a single-kernel program lowers to."""
    _, module = lower(text, pipeline)
    (kernel,) = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    cubin = tmp_path / f"{kernel.sym_name.data}.cubin"
    cubin.write_bytes(compile_cuda(kernel.source.data, kernel.sym_name.data))
    assert CUOBJDUMP is not None
    dump = subprocess.run(
        [CUOBJDUMP, "--dump-sass", str(cubin)], check=True, capture_output=True, text=True
    )
    return dump.stdout


def test_mma_sync_runs_on_tensor_cores(tmp_path: Path) -> None:
    code = sass(matmul_relu(1000, 1000, 1000, "bf16"), tile_with("mma=sync"), tmp_path)
    assert "HMMA" in code
    assert "LDSM" in code  # ldmatrix
    assert not LOCAL_MEMORY.search(code)


def test_wgmma_runs_on_hopper_tensor_cores(tmp_path: Path) -> None:
    code = sass(matmul_plain(1000, 1000, 1000), tile_with("mma=wgmma"), tmp_path)
    assert "HGMMA" in code
    assert "UTMALDG" in code  # TMA tensor loads
    assert not LOCAL_MEMORY.search(code), LOCAL_MEMORY.search(code)


def test_sgemm_loads_shared_memory_in_128_bits_and_keeps_registers(tmp_path: Path) -> None:
    code = sass(matmul_relu(1024, 1024, 1024), "fuse,tile,to-cuda", tmp_path)
    assert "LDS.128" in code
    assert not LOCAL_MEMORY.search(code), LOCAL_MEMORY.search(code)
