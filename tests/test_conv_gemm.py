"""A convolution's GEMM reads its weight `[Cout, Cin, kh, kw]` as `[Cout, Cin·kh·kw]`
(`collapse_dims._collapse_unraveled`): the K loop's index unraveled over the weight's last dims
becomes a plain load of a collapsed view, so bf16 convolutions take the wgmma rule (TMA copies
whole tiles) where the index arithmetic per element kept them on mma_sync. A 1×1 convolution
is the weight times each image's pixels, a wgmma GEMM whose A every batch entry shares. Each
convolution (3×3 with padding, strided, 1×3 with its unit dim, 1×1, grouped) runs its CUDA on
the CPU emulation (tests/cpu_wgmma.py) against float64. Needs torch (capture) and g++.
"""

from __future__ import annotations

import pytest
from cpu_cuda import COMPILER
from cpu_wgmma import error_on_cpu

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402

from tinyopt.compiler import apply_pipeline, parse  # noqa: E402
from tinyopt.dialects import loop, tile  # noqa: E402
from tinyopt.frontends.torch_fx import capture  # noqa: E402

CONVOLUTIONS = {
    # (module, input shape, the GEMM's B operand as its kernel reads it)
    "3x3_pad1": (nn.Conv2d(16, 24, 3, padding=1, bias=False), (2, 16, 10, 10), [24, 144]),
    "3x3_stride2_bias": (nn.Conv2d(32, 64, 3, stride=2, padding=1), (2, 32, 9, 9), [64, 288]),
    "1x3_unit_dim": (nn.Conv2d(16, 32, (1, 3), padding=(0, 1)), (1, 16, 6, 7), [32, 48]),
    # 1×1: the weight [O, C] times each image's [C, H·W], one A for the whole batch
    "1x1_pointwise": (nn.Conv2d(24, 40, 1), (3, 24, 4, 8), [40, 24]),
    # grouped: a batched GEMM over the groups, its weight transposed by a kernel of its own
    "3x3_groups2": (nn.Conv2d(16, 32, 3, groups=2, bias=False), (2, 16, 8, 8), [4, 72, 16]),
}


def _captured(name: str) -> str:
    module, shape, _ = CONVOLUTIONS[name]
    torch.manual_seed(0)
    module = module.to(torch.bfloat16).eval()
    return str(capture(module, torch.randn(shape).bfloat16()).module)


@pytest.mark.parametrize("name", list(CONVOLUTIONS))
def test_convolution_gemm_reads_the_weight_as_a_matrix_on_wgmma(name: str) -> None:
    planned = apply_pipeline(parse(_captured(name)), "decompose,fuse,plan")
    (gemm,) = [
        k
        for k in loop.kernels(planned)
        if k.attributes[tile.PLAN].rule.data != "elementwise"  # type: ignore[union-attr]
    ]
    assert gemm.attributes[tile.PLAN].rule.data == "wgmma"  # type: ignore[union-attr]
    shapes = [list(a.type.get_shape()) for a in gemm.body.block.args]  # type: ignore[attr-defined]
    assert CONVOLUTIONS[name][2] in shapes, shapes
    assert not any(op.name in ("arith.divui", "arith.remui") for op in gemm.walk())


def test_pointwise_convolution_needs_no_transposes() -> None:
    """A 1×1 convolution's GEMM writes the `[N, O, H·W]` output itself: the only other kernel
    copies the input's pixels into rows (`[N, C, H, W]` read as `[N, C, H·W]`)."""
    planned = apply_pipeline(parse(_captured("1x1_pointwise")), "decompose,fuse,plan")
    rules = [k.attributes[tile.PLAN].rule.data for k in loop.kernels(planned)]  # type: ignore[union-attr]
    assert rules == ["elementwise", "wgmma"], rules


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize("name", list(CONVOLUTIONS))
def test_convolution_matches_float64_on_cpu(name: str) -> None:
    error, tolerance = error_on_cpu(_captured(name), "decompose,fuse,tile,to-cuda", seed=3)
    assert error <= tolerance, error


def _shared_weight(o: int, c: int, n: int, pixels: int) -> str:
    """`relu(w @ x[b] + bias)` for each b: a bf16 `[O, C]` weight every batch entry shares."""
    w, x, y = (f"tensor<{s}xbf16>" for s in (f"{o}x{c}", f"{n}x{c}x{pixels}", f"{n}x{o}x{pixels}"))
    wb, b = f"tensor<{n}x{o}x{c}xbf16>", f"tensor<{o}x1xbf16>"
    return f"""func.func @pointwise(%w: {w}, %x: {x}, %b: {b}) -> {y} {{
  %wb = graph.broadcast %w : {w} -> {wb}
  %y = graph.matmul %wb, %x : ({wb}, {x}) -> {y}
  %bb = graph.broadcast %b : {b} -> {y}
  %z = graph.add %y, %bb : {y}
  %r = graph.relu %z : {y}
  func.return %r : {y}
}}"""


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize(
    "knobs", ["", "persistent=1", "persistent=1 bm=128 bn=256", "swap=on", "swap=on persistent=1"]
)
def test_shared_weight_gemm_matches_float64_on_cpu(knobs: str) -> None:
    """The wgmma GEMM whose A has no batch index (130 rows: a partial row of tiles; 296
    columns), a block per tile and persistent blocks walking the batch's tiles, unswapped and
    swapped (`swap=on`: the shared A is then the ring's B tile, copied without a batch index)."""
    text = _shared_weight(130, 64, 3, 296)
    planned = apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")
    (gemm,) = loop.kernels(planned)
    plan = gemm.attributes[tile.PLAN]
    assert plan.rule.data == "wgmma"  # type: ignore[union-attr]
    assert (plan.values["swap"] == "on") == ("swap=on" in knobs)  # type: ignore[union-attr]
    error, tolerance = error_on_cpu(text, f"fuse,tile{{{knobs}}},to-cuda", seed=2)
    assert error <= tolerance, error
