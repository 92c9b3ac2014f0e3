"""The reference executors and the capture given what they do not take: each a ValueError (or
FrontendError) saying what was expected, never an internal error or a partial answer (a
loop-level run used to read the first elements of a larger array and answer)."""

from __future__ import annotations

import numpy as np
import pytest

from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import run_reference
from tinyopt.compiler import lower, parse

SOFTMAX = """func.func @softmax(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = graph.softmax %x {dim = 1 : i64} : tensor<4x64xf32>
  func.return %y : tensor<4x64xf32>
}"""


@pytest.mark.parametrize("shape", [(4, 128), (8, 64), (2, 64), (256,)])
def test_loop_executor_refuses_an_array_of_another_shape(shape: tuple[int, ...]) -> None:
    _, fused = lower(SOFTMAX, "fuse")
    with pytest.raises(ValueError, match=r"argument 0 is memref<4x64xf32>: got an array of shape"):
        run_loop_module(fused, "softmax", np.zeros(shape, np.float32))


def test_each_executor_names_the_level_it_runs() -> None:
    x = np.zeros((4, 64), np.float32)
    program, fused = lower(SOFTMAX, "fuse")
    with pytest.raises(ValueError, match=r"runs loop-level host functions \(after fuse\)"):
        run_loop_module(program, "softmax", x)
    _, cuda = lower(SOFTMAX, "fuse,tile,to-cuda")
    with pytest.raises(ValueError, match=r"is a tile.cuda_kernel: run_loop_module runs loop"):
        run_loop_module(cuda, "softmax", x)
    with pytest.raises(ValueError, match=r"run_reference runs graph functions \(before fuse\)"):
        run_reference(fused, x)
    with pytest.raises(ValueError, match="run_reference takes a parsed module"):
        run_reference(SOFTMAX, x)  # type: ignore[arg-type]
    assert run_reference(parse(SOFTMAX), x)[0].shape == (4, 64)


def test_an_option_given_twice_is_refused_in_python_too() -> None:
    with pytest.raises(ValueError, match="option 'threads' given twice"):
        lower(SOFTMAX, "fuse,tile{threads=128 threads=256}")


def test_capture_of_a_function_says_it_takes_a_module() -> None:
    torch = pytest.importorskip("torch")
    from tinyopt.frontends.torch_fx import FrontendError, capture

    with pytest.raises(FrontendError, match="capture takes a torch.nn.Module, got function"):
        capture(lambda t: t + 1, torch.randn(3))  # type: ignore[arg-type]


@pytest.mark.parametrize("pipeline", [",fuse", "fuse,,tile", "fuse,tile{", "fuse;tile"])
def test_a_malformed_pipeline_is_a_value_error(pipeline: str) -> None:
    """xDSL's parse error derives from BaseException, which `except Exception` misses."""
    with pytest.raises(ValueError, match=f"invalid pass pipeline '{pipeline}'"):
        lower(SOFTMAX, pipeline)
