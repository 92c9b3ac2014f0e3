"""Tests of the `online-softmax` and `welford` rewrites: IR shape, numbers, algebra, CUDA.

Numbers are checked three ways: the loop-level executor before vs after the rewrite and vs
the float64 graph reference; the merged combine region evaluated in float32 (as the GPU runs
it) on edge states and long rows; and the rewritten kernels through `tile` and `to-cuda`
compiled by NVRTC for sm_90a.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest
from programs import layernorm, rmsnorm, softmax
from xdsl.dialects import arith
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block

from tinyopt.backends.check import graph_function
from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import round_to_bf16, run_reference
from tinyopt.compiler import lower
from tinyopt.dialects import loop, tile

State = tuple[np.float32, ...]


def _reduces(module: ModuleOp) -> list[loop.ReduceOp]:
    return [op for op in module.walk() if isinstance(op, loop.ReduceOp)]


def _tuple_reduce(text: str, rewrite: str) -> loop.ReduceOp:
    """Return the single reduction of `text`'s kernel after `fuse` and `rewrite`."""
    _, module = lower(text, f"fuse,{rewrite}")
    (reduce,) = _reduces(module)
    return reduce


def _yielded_constants(reduce: loop.ReduceOp) -> list[float | None]:
    """Return what the body yields: the constant of each entry, None for a computed one."""
    end = reduce.body.block.last_op
    assert isinstance(end, loop.YieldOp)
    return [
        v.owner.value.value.data if isinstance(v.owner, arith.ConstantOp) else None
        for v in end.arguments
    ]


# ------------------------------------------------------------------------------ IR shape


def test_online_softmax_merges_max_and_sum() -> None:
    _, before = lower(softmax((4, 16)), "fuse")
    assert [len(r.res) for r in _reduces(before)] == [1, 1]
    reduce = _tuple_reduce(softmax((4, 16)), "online-softmax")
    assert len(reduce.res) == 2
    assert [v.owner.value.value.data for v in reduce.init] == [float("-inf"), 0.0]
    assert _yielded_constants(reduce) == [None, 1.0]
    m, total = reduce.res
    assert {u.operation.name for u in m.uses} == {"arith.subf"}
    assert {u.operation.name for u in total.uses} == {"arith.divf"}


def test_welford_merges_mean_and_variance() -> None:
    _, before = lower(layernorm((4, 16)), "fuse")
    assert [len(r.res) for r in _reduces(before)] == [1, 1]
    reduce = _tuple_reduce(layernorm((4, 16)), "welford")
    assert len(reduce.res) == 3
    assert [v.owner.value.value.data for v in reduce.init] == [0.0, 0.0, 0.0]
    assert _yielded_constants(reduce) == [1.0, None, -0.0]
    count, mean, m2 = reduce.res
    assert not count.uses
    assert {u.operation.name for u in mean.uses} == {"arith.subf"}
    assert {u.operation.name for u in m2.uses} == {"arith.divf"}


def test_online_softmax_needs_the_same_element() -> None:
    """exp(y − max(x)) summed is not softmax's denominator: the pass leaves it alone."""
    t = "tensor<4x16xf32>"
    r = "tensor<4x1xf32>"
    text = f"""func.func @f(%x: {t}, %y: {t}) -> {t} {{
  %m = graph.reduce_max %x {{dims = array<i64: 1>, keepdim = true}} : {t} -> {r}
  %mb = graph.broadcast %m : {r} -> {t}
  %d = graph.sub %y, %mb : {t}
  %e = graph.exp %d : {t}
  %s = graph.reduce_sum %e {{dims = array<i64: 1>, keepdim = true}} : {t} -> {r}
  %sb = graph.broadcast %s : {r} -> {t}
  %o = graph.div %e, %sb : {t}
  func.return %o : {t}
}}"""
    _, module = lower(text, "fuse,online-softmax")
    assert [len(r.res) for r in _reduces(module)] == [1, 1]


def test_welford_leaves_rms_norm_alone() -> None:
    """RMSNorm's sum of squares is not centered by a mean: there is nothing to merge."""
    _, module = lower(rmsnorm((4, 16)), "fuse,welford")
    assert [len(r.res) for r in _reduces(module)] == [1]


def test_rewrites_are_idempotent_and_independent() -> None:
    _, once = lower(softmax((4, 16)), "fuse,online-softmax,welford")
    _, twice = lower(softmax((4, 16)), "fuse,online-softmax,welford,online-softmax")
    assert str(once) == str(twice)
    _, untouched = lower(layernorm((4, 16)), "fuse,online-softmax")
    assert [len(r.res) for r in _reduces(untouched)] == [1, 1]


# ------------------------------------------------------------------------------ numbers


def _compare(
    text: str, rewrite: str, inputs: Sequence[np.ndarray], rtol: float, step: float
) -> None:
    """Run `text` fused with and without `rewrite`; compare them and the float64 reference.

    `step` bounds the difference between before and after (one rounding of the output type).
    """
    program, before = lower(text, "fuse")
    _, after = lower(text, f"fuse,{rewrite}")
    name = graph_function(program).sym_name.data
    (old,) = run_loop_module(before, name, *inputs)
    (new,) = run_loop_module(after, name, *inputs)
    (ref,) = run_reference(program, *inputs)
    np.testing.assert_allclose(new, old, rtol=step, atol=step)
    np.testing.assert_allclose(new.astype(np.float64), ref, rtol=rtol, atol=rtol)


def _bf16(a: np.ndarray) -> np.ndarray:
    return round_to_bf16(a.astype(np.float32))


def _softmax_rows(cols: int, scale: float) -> np.ndarray:
    """Rows of normal logits times `scale`, one of huge negatives and one partly -inf."""
    rng = np.random.default_rng(0)
    x = scale * rng.standard_normal((4, cols))
    x[2] = -1e30 + rng.standard_normal(cols) * 1e24
    x[3, ::3] = -np.inf
    return x.astype(np.float32)


@pytest.mark.parametrize("scale", [1.0, 1e4])
def test_online_softmax_numbers_f32(scale: float) -> None:
    x = _softmax_rows(1000, scale)
    _compare(softmax((4, 1000)), "online-softmax", [x], rtol=1e-6, step=1e-12)


def test_online_softmax_numbers_bf16() -> None:
    x = _bf16(_softmax_rows(300, 4.0))
    _compare(softmax((4, 300), "bf16"), "online-softmax", [x], rtol=1e-2, step=8e-3)


def test_online_softmax_all_minus_infinity_row_matches_before() -> None:
    """A row that is all -inf has no finite output, before the rewrite as after it.

    Before, the output loop computes exp(-inf + inf); after, the merged reduction gives
    (-inf, 0) and the output loop the same. The other rows are unaffected. (On the GPU that
    row is NaN either way; the loop executor's exp maps NaN to inf.)
    """
    x = _softmax_rows(64, 1.0)
    x[0] = -np.inf
    _, before = lower(softmax((4, 64)), "fuse")
    _, after = lower(softmax((4, 64)), "fuse,online-softmax")
    (old,) = run_loop_module(before, "softmax", x)
    (new,) = run_loop_module(after, "softmax", x)
    assert not np.isfinite(old[0]).any() and not np.isfinite(new[0]).any()
    assert np.isfinite(new[1:]).all()
    np.testing.assert_allclose(new[1:], old[1:], rtol=1e-12)


def _layernorm_inputs(cols: int, offset: float, noise: float) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    x = offset + noise * rng.standard_normal((3, cols))
    w = 1.0 + 0.1 * rng.standard_normal(cols)
    b = 0.1 * rng.standard_normal(cols)
    return [a.astype(np.float32) for a in (x, w, b)]


@pytest.mark.parametrize(("offset", "noise"), [(0.0, 1.0), (1e4, 0.1)])
def test_welford_numbers_f32(offset: float, noise: float) -> None:
    inputs = _layernorm_inputs(512, offset, noise)
    _compare(layernorm((3, 512)), "welford", inputs, rtol=1e-5, step=2.4e-7)


def test_welford_numbers_bf16() -> None:
    inputs = [_bf16(a) for a in _layernorm_inputs(256, 100.0, 4.0)]
    _compare(layernorm((3, 256), "bf16"), "welford", inputs, rtol=2e-2, step=8e-3)


# ------------------------------------------------------------------------------ the monoids in f32

_F32_OPS: dict[str, Callable[..., np.float32]] = {
    "arith.addf": np.add,
    "arith.subf": np.subtract,
    "arith.mulf": np.multiply,
    "arith.divf": np.divide,
    "arith.maximumf": np.maximum,
    "math.exp": np.exp,
}


def _combine_f32(block: Block) -> Callable[[State, State], State]:
    """Return the combine region as a float32 function of two states."""

    def combine(a: State, b: State) -> State:
        env = dict(zip(block.args, (*a, *b), strict=True))
        for op in block.ops:
            if isinstance(op, loop.YieldOp):
                return tuple(env[v] for v in op.arguments)
            if isinstance(op, arith.ConstantOp):
                env[op.result] = np.float32(op.value.value.data)
            else:
                env[op.results[0]] = _F32_OPS[op.name](*(env[o] for o in op.operands))
        raise AssertionError("combine region without loop.yield")

    return combine


def _fold(
    states: Sequence[State], combine: Callable[[State, State], State], identity: State
) -> State:
    """Fold like the row schedule: 32 threads fold strided elements, then a tree merges."""
    partials = []
    for lane in range(32):
        state = identity
        for element in states[lane::32]:
            state = combine(state, element)
        partials.append(state)
    while len(partials) > 1:
        partials = [combine(a, b) for a, b in zip(partials[::2], partials[1::2])]
    return partials[0]


def _f32(*values: float) -> State:
    return tuple(np.float32(v) for v in values)


def test_online_softmax_combine_identity_and_edges() -> None:
    combine = _combine_f32(_tuple_reduce(softmax((2, 8)), "online-softmax").combine.block)
    identity = _f32(-np.inf, 0.0)
    with np.errstate(all="raise"):
        assert combine(identity, identity) == identity
        assert combine(identity, _f32(3.0, 2.0)) == _f32(3.0, 2.0)
        assert combine(_f32(3.0, 2.0), identity) == _f32(3.0, 2.0)
        assert combine(_f32(-np.inf, 1.0), identity) == identity


@pytest.mark.parametrize("scale", [1.0, 1e4])
def test_online_softmax_state_in_f32_matches_float64(scale: float) -> None:
    combine = _combine_f32(_tuple_reduce(softmax((2, 8)), "online-softmax").combine.block)
    x = (scale * np.random.default_rng(2).standard_normal(4096)).astype(np.float32)
    with np.errstate(under="ignore"):
        m, total = _fold([_f32(v, 1.0) for v in x], combine, _f32(-np.inf, 0.0))
    x64 = x.astype(np.float64)
    assert m == x.max()
    expected = np.exp(x64 - x64.max()).sum()
    assert abs(total - expected) <= 1e-5 * expected


def test_welford_combine_identity() -> None:
    combine = _combine_f32(_tuple_reduce(layernorm((2, 8)), "welford").combine.block)
    identity = _f32(0.0, 0.0, 0.0)
    with np.errstate(all="raise"):
        assert combine(identity, identity) == identity
        assert combine(identity, _f32(4.0, 2.5, 3.0)) == _f32(4.0, 2.5, 3.0)
        assert combine(_f32(4.0, 2.5, 3.0), identity) == _f32(4.0, 2.5, 3.0)


def test_welford_in_f32_keeps_the_variance_at_a_large_offset() -> None:
    """Welford's variance of 1e4 + N(0, 1) in float32 stays within 1e-4 of float64.

    E[x²] − E[x]² in float32 loses every digit on the same data.
    """
    combine = _combine_f32(_tuple_reduce(layernorm((2, 8)), "welford").combine.block)
    x = (1e4 + np.random.default_rng(3).standard_normal(4096)).astype(np.float32)
    n, mean, m2 = _fold([_f32(1.0, v, -0.0) for v in x], combine, _f32(0.0, 0.0, 0.0))
    expected = np.var(x.astype(np.float64))
    assert n == 4096
    assert abs(mean - x.astype(np.float64).mean()) <= 1e-3
    assert abs(m2 / n - expected) <= 1e-4 * expected
    naive = np.mean(x * x) - np.mean(x) ** 2
    assert abs(naive - expected) >= 0.5 * expected


# ------------------------------------------------------------------------------ CUDA

_COMPILED = [
    pytest.param(softmax((3, 1000)), "online-softmax", "", id="softmax"),
    pytest.param(softmax((5, 4096)), "online-softmax", "threads=1024", id="softmax_block"),
    pytest.param(softmax((9, 2048), "bf16"), "online-softmax", "cache=0", id="softmax_bf16"),
    pytest.param(softmax((16, 96)), "online-softmax", "threads=32 rows=4", id="softmax_warp"),
    pytest.param(softmax((7, 100)), "online-softmax", "schedule=sequential", id="softmax_seq"),
    pytest.param(layernorm((3, 100, 768)), "welford", "", id="layernorm"),
    pytest.param(layernorm((7, 1000), "bf16"), "welford", "threads=256", id="layernorm_bf16"),
    pytest.param(layernorm((64, 64)), "welford", "threads=32", id="layernorm_warp"),
]


@pytest.mark.parametrize(("text", "rewrite", "knobs"), _COMPILED)
def test_rewritten_kernels_compile_for_sm90a(text: str, rewrite: str, knobs: str) -> None:
    """After tile and to-cuda, the row has one thread-level reduction and NVRTC compiles it."""
    pipeline = f"fuse,{rewrite},tile{{{knobs}}}" if knobs else f"fuse,{rewrite},tile"
    _, tiled = lower(text, pipeline)
    group = [o for o in tiled.walk() if isinstance(o, tile.WarpReduceOp | tile.BlockReduceOp)]
    if "sequential" not in knobs:
        assert [len(o.results) for o in group] == [3 if rewrite == "welford" else 2]
    _, module = lower(text, f"{pipeline},to-cuda")
    kernels = [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]
    compiled = compile_module(module, arch="sm_90a")
    assert set(compiled.kernels) == {k.sym_name.data for k in kernels}
