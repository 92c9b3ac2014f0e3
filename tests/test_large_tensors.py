"""Kernels over 2^31 elements or more: 64-bit indices, checked on the GPU (skipped without one).

to-cuda indexes with `long long` when a buffer has 2^31 elements or more, else with `int`;
just below the threshold the largest index, 2^31 - 10, still fits an `int`. On the GPU the
results are compared with torch on the device (the inputs are 4 GiB; a float64 numpy
reference would take minutes).
"""

from __future__ import annotations

import pytest
from conftest import requires_gpu

from tinyopt.compiler import DEFAULT_PIPELINE, lower

ABOVE = 2**31 + 7
BELOW = 2**31 - 9
ROWS = COLS = 46341
"""A row sum over 46341^2 = 2^31 + 4633 elements."""


def relu(count: int) -> str:
    t = f"tensor<{count}xbf16>"
    return f"""func.func @relu(%x: {t}) -> {t} {{
  %y = graph.relu %x : {t}
  func.return %y : {t}
}}"""


def row_sum(rows: int, cols: int) -> str:
    x, y = f"tensor<{rows}x{cols}xbf16>", f"tensor<{rows}xbf16>"
    return f"""func.func @row_sum(%x: {x}) -> {y} {{
  %y = graph.reduce_sum %x {{dims = array<i64: 1>}} : {x} -> {y}
  func.return %y : {y}
}}"""


def _sources(text: str) -> list[str]:
    _, module = lower(text, DEFAULT_PIPELINE)
    return [op.properties["source"].data for op in module.ops if op.name == "tile.cuda_kernel"]


@pytest.mark.parametrize(
    ("text", "wide"),
    [(relu(ABOVE), True), (relu(BELOW), False), (row_sum(ROWS, COLS), True)],
    ids=["relu_above", "relu_below", "row_sum_above"],
)
def test_index_type_follows_the_element_count(text: str, wide: bool) -> None:
    sources = _sources(text)
    assert sources and all(("long long" in s) == wide for s in sources)


def _compiled(text: str, name: str):
    from tinyopt.backends.cuda.runtime import compile_module

    _, module = lower(text, DEFAULT_PIPELINE)
    return compile_module(module).function(name)


@requires_gpu
@pytest.mark.parametrize("count", [ABOVE, BELOW], ids=["above", "below"])
def test_relu_over_about_2_31_bf16_elements(count: int) -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(count, dtype=torch.bfloat16, device="cuda")
    y = _compiled(relu(count), "relu")(x)
    assert torch.equal(y, torch.relu(x))  # every element written, exactly


@requires_gpu
def test_row_sum_over_more_than_2_31_bf16_elements() -> None:
    torch = pytest.importorskip("torch")
    x = torch.randn(ROWS, COLS, dtype=torch.bfloat16, device="cuda")
    y = _compiled(row_sum(ROWS, COLS), "row_sum")(x).float()
    want = x.float().sum(dim=1)
    assert (torch.linalg.norm(y - want) / torch.linalg.norm(want)).item() < 1e-2
    assert torch.allclose(y[-1], want[-1], rtol=2e-2, atol=0.5)  # the last row too
