"""Runtime scalars (0-d integer arguments used as positions) and the in-place KV-cache write
(docs/ir.md, "Runtime scalars" and "In-place updates"): the graph ops against float64 numpy,
the lowered program at loop level and its scalar-reading kernels on the CPU emulation of CUDA
against the reference, the refusals, and positions out of range at every executor. On a GPU:
a decode step run twice at two positions, by host function calls and by CUDA graph replays,
with the cache read back.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import requires_gpu
from cpu_cuda import COMPILER, run_on_cpu
from test_sgemm_on_cpu import viewed
from xdsl.dialects import func, memref
from xdsl.dialects.builtin import MemRefType, ModuleOp, bf16
from xdsl.ir import SSAValue
from xdsl.utils.exceptions import DiagnosticException, VerifyException

from tinyopt.backends.check import device_inputs, from_storage, relative_error
from tinyopt.backends.cuda.errors import CudaArgumentError
from tinyopt.backends.cuda.runtime import HostFunction, compile_module
from tinyopt.backends.loop_reference import run_loop_module
from tinyopt.backends.reference import random_inputs, run_reference
from tinyopt.cli import main
from tinyopt.compiler import apply_pipeline, parse
from tinyopt.dialects import loop, tile
from tinyopt.dialects.runtime_scalar import ScalarRangeError, check_value

CAPACITY = 16

STEP = """
func.func @step(%q: tensor<1x4x1x8xf32>, %k: tensor<1x2x1x8xf32>, %v: tensor<1x2x1x8xf32>,
                %kcache: tensor<1x2x16x8xf32>, %vcache: tensor<1x2x16x8xf32>, %pos: tensor<i64>,
                %cos: tensor<32x8xf32>, %sin: tensor<32x8xf32>)
    -> (tensor<1x4x1x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) {
  %c = graph.dynamic_slice %cos[%pos] {dim = 0 : i64}
      : (tensor<32x8xf32>, tensor<i64>) -> tensor<1x8xf32>
  %s = graph.dynamic_slice %sin[%pos] {dim = 0 : i64}
      : (tensor<32x8xf32>, tensor<i64>) -> tensor<1x8xf32>
  %cb = graph.broadcast %c : tensor<1x8xf32> -> tensor<1x2x1x8xf32>
  %sb = graph.broadcast %s : tensor<1x8xf32> -> tensor<1x2x1x8xf32>
  %lo = graph.slice %k {dim = 3 : i64, start = 0 : i64, step = 1 : i64}
      : tensor<1x2x1x8xf32> -> tensor<1x2x1x4xf32>
  %hi = graph.slice %k {dim = 3 : i64, start = 4 : i64, step = 1 : i64}
      : tensor<1x2x1x8xf32> -> tensor<1x2x1x4xf32>
  %nhi = graph.neg %hi : tensor<1x2x1x4xf32>
  %rot = graph.concat %nhi, %lo {dim = 3 : i64}
      : (tensor<1x2x1x4xf32>, tensor<1x2x1x4xf32>) -> tensor<1x2x1x8xf32>
  %kc = graph.mul %k, %cb : tensor<1x2x1x8xf32>
  %rs = graph.mul %rot, %sb : tensor<1x2x1x8xf32>
  %kr = graph.add %kc, %rs : tensor<1x2x1x8xf32>
  %knew = graph.dynamic_update_slice %kcache[%pos], %kr {dim = 2 : i64}
      : (tensor<1x2x16x8xf32>, tensor<i64>, tensor<1x2x1x8xf32>) -> tensor<1x2x16x8xf32>
  %vnew = graph.dynamic_update_slice %vcache[%pos], %v {dim = 2 : i64}
      : (tensor<1x2x16x8xf32>, tensor<i64>, tensor<1x2x1x8xf32>) -> tensor<1x2x16x8xf32>
  %o = graph.attention %q, %knew, %vnew {scale = 0.35355339 : f32}
      : (tensor<1x4x1x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x4x1x8xf32>
  func.return %o, %knew, %vnew : tensor<1x4x1x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>
}
"""
"""A decode step: RoPE of the new key at %pos (rows of cos/sin tables), both caches written at
%pos, attention over the updated caches (GQA, 4 query heads on 2 KV heads)."""

POS = 5  # argument position of %pos in STEP


def step_inputs(pos: int, seed: int = 0) -> list[np.ndarray]:
    inputs = random_inputs(parse(STEP), seed)
    inputs[POS] = np.array(pos, np.int64)
    return inputs


def numpy_step(inputs: list[np.ndarray]) -> list[np.ndarray]:
    """STEP in float64 numpy, written independently of the reference executor."""
    q, k, v, kcache, vcache, pos, cos, sin = (np.asarray(a, np.float64) for a in inputs)
    p = int(pos)
    rot = np.concatenate([-k[..., 4:], k[..., :4]], axis=-1)
    kr = k * cos[p] + rot * sin[p]
    kcache, vcache = kcache.copy(), vcache.copy()
    kcache[:, :, p : p + 1], vcache[:, :, p : p + 1] = kr, v
    keys, values = (np.repeat(c, 2, axis=1) for c in (kcache, vcache))
    scores = q @ np.swapaxes(keys, -1, -2) * 0.35355339
    weights = np.exp(scores - scores.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    return [weights @ values, kcache, vcache]


@pytest.mark.parametrize("pos", [0, 7, CAPACITY - 1])
def test_reference_runs_the_step_as_numpy(pos: int) -> None:
    inputs = step_inputs(pos)
    for got, want in zip(run_reference(parse(STEP), *inputs), numpy_step(inputs), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_loop_level_step_matches_the_reference_at_each_position() -> None:
    lowered = apply_pipeline(parse(STEP), "fuse")
    for pos in (0, 9, CAPACITY - 1):
        inputs = step_inputs(pos, seed=pos)
        got = run_loop_module(lowered, "step", *inputs)
        for out, ref in zip(got, run_reference(parse(STEP), *inputs), strict=True):
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


def test_fuse_writes_the_caches_in_place_and_passes_the_position_by_value() -> None:
    lowered = apply_pipeline(parse(STEP), "fuse")
    host = next(op for op in lowered.ops if isinstance(op, func.FuncOp))
    kcache, vcache, pos = host.args[3], host.args[4], host.args[POS]
    assert str(pos.type) == "i64"
    returned = host.body.block.last_op
    assert isinstance(returned, func.ReturnOp)
    assert list(returned.arguments[1:]) == [kcache, vcache]
    allocs = [op.memref.type for op in host.body.block.ops if isinstance(op, memref.AllocOp)]
    assert kcache.type not in allocs
    launches = [op for op in host.body.block.ops if isinstance(op, loop.LaunchOp)]
    writes = [launch for launch in launches if pos in launch.args]
    assert [w.args[-1] for w in writes] == [kcache, vcache]


def test_a_window_in_a_contraction_gets_a_buffer() -> None:
    """A matmul operand read at a runtime offset is copied first: the GEMM rules read their
    buffers at tile coordinates of their own."""
    text = """
    func.func @f(%table: tensor<32x16xf32>, %w: tensor<16x8xf32>, %pos: tensor<i32>)
        -> tensor<4x8xf32> {
      %rows = graph.dynamic_slice %table[%pos] {dim = 0 : i64}
          : (tensor<32x16xf32>, tensor<i32>) -> tensor<4x16xf32>
      %y = graph.matmul %rows, %w : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
      func.return %y : tensor<4x8xf32>
    }"""
    lowered = apply_pipeline(parse(text), "fuse")
    kernels = loop.kernels(lowered)
    assert len(kernels) == 2
    assert any(str(a.type) == "i32" for a in kernels[0].body.block.args)
    assert not any(str(a.type) == "i32" for a in kernels[1].body.block.args)
    inputs = random_inputs(parse(text), 0)
    for pos in (0, 28):
        inputs[2] = np.array(pos, np.int32)
        (got,) = run_loop_module(lowered, "f", *inputs)
        np.testing.assert_allclose(got, inputs[0][pos : pos + 4] @ inputs[1], rtol=1e-5)


@pytest.mark.parametrize("pos", [-1, CAPACITY])
def test_a_position_out_of_range_is_an_error_naming_the_input_and_its_bound(pos: int) -> None:
    bound = "below its smallest value 0" if pos < 0 else f"past its largest value {CAPACITY - 1}"
    message = f"@step argument 5 \\(%pos\\) is {pos}, {bound}"
    inputs = step_inputs(0)
    inputs[POS] = np.array(pos)
    with pytest.raises(ScalarRangeError, match=message):
        run_reference(parse(STEP), *inputs)
    with pytest.raises(ScalarRangeError, match=message):
        run_loop_module(apply_pipeline(parse(STEP), "fuse"), "step", *inputs)


def test_a_runtime_scalar_is_an_integer() -> None:
    inputs = step_inputs(0)
    inputs[POS] = np.array(2.5)
    with pytest.raises(ScalarRangeError, match="give an integer, got"):
        run_loop_module(apply_pipeline(parse(STEP), "fuse"), "step", *inputs)


@pytest.mark.parametrize(
    "value", [float("inf"), -float("inf"), np.float64("inf"), np.array([3]), True, np.bool_(True)]
)
def test_an_infinite_or_one_element_array_position_is_refused(value: object) -> None:
    """An infinite float was an OverflowError out of `int()`, not a ScalarRangeError; a bool
    (an `int` to Python) is no position either."""
    with pytest.raises(ScalarRangeError, match="is a runtime scalar: give an integer, got"):
        check_value("@step argument 5 (%pos)", value, (0, CAPACITY - 1))


CACHE = "tensor<1x2x16x8xf32>"
UPDATE = f"(tensor<1x2x16x8xf32>, tensor<i64>, tensor<1x2x1x8xf32>) -> {CACHE}"


@pytest.mark.parametrize(
    ("body", "results", "message"),
    [
        (
            f"%n = graph.dynamic_update_slice %c[%p], %k {{dim = 2 : i64}} : {UPDATE}\n"
            f"%e = graph.exp %c : {CACHE}",
            "%n, %e",
            "another op also reads",
        ),
        (
            f"%n = graph.dynamic_update_slice %c[%p], %k {{dim = 2 : i64}} : {UPDATE}\n"
            f"%e = graph.exp %n : {CACHE}",
            "%e, %e",
            "return its result, the updated argument",
        ),
        (
            f"%e = graph.exp %c : {CACHE}\n"
            f"%n = graph.dynamic_update_slice %e[%p], %k {{dim = 2 : i64}} : {UPDATE}",
            "%n, %n",
            "updates a value computed in the graph",
        ),
        (
            f"%n = graph.dynamic_update_slice %c[%p], %k {{dim = 2 : i64}} : {UPDATE}\n"
            "%f = graph.cast %p : tensor<i64> -> tensor<f32>\n"
            f"%b = graph.broadcast %f : tensor<f32> -> {CACHE}",
            "%n, %b",
            "is a runtime scalar \\(the offset of graph.dynamic_update_slice \\(1 of the 16 "
            "indices of dim 2\\)\\) and cannot also be read as a tensor \\(by graph.cast\\)",
        ),
    ],
    ids=["cache_read_twice", "update_not_returned", "cache_computed", "scalar_read_as_data"],
)
def test_fuse_refuses_what_it_cannot_write_in_place(body: str, results: str, message: str) -> None:
    text = f"""
    func.func @f(%c: {CACHE}, %k: tensor<1x2x1x8xf32>, %p: tensor<i64>) -> ({CACHE}, {CACHE}) {{
      {body}
      func.return {results} : {CACHE}, {CACHE}
    }}"""
    with pytest.raises(DiagnosticException, match=f"^fuse: .*{message}"):
        apply_pipeline(parse(text), "fuse")


@pytest.mark.parametrize(
    ("op", "message"),
    [
        (
            "%o = graph.dynamic_slice %t[%q] {dim = 0 : i64} : (tensor<32x8xf32>, tensor<i64>) "
            "-> tensor<2x8xf32>",
            "offset must be a function argument \\(a runtime scalar\\)",
        ),
        (
            "%o = graph.dynamic_slice %t[%f] {dim = 0 : i64} : (tensor<32x8xf32>, tensor<f32>) "
            "-> tensor<2x8xf32>",
            "offset must be a 0-d tensor of i32 or i64, got tensor<f32>",
        ),
        (
            "%o = graph.dynamic_slice %t[%p] {dim = 2 : i64} : (tensor<32x8xf32>, tensor<i64>) "
            "-> tensor<2x8xf32>",
            "dim 2 is out of range for rank 2",
        ),
        (
            "%o = graph.dynamic_slice %t[%p] {dim = 0 : i64} : (tensor<32x8xf32>, tensor<i64>) "
            "-> tensor<33x8xf32>",
            "a window of 33 indices does not fit in dim 0 of size 32",
        ),
    ],
    ids=["computed_offset", "float_offset", "bad_dim", "window_too_large"],
)
def test_dynamic_slice_verifier(op: str, message: str) -> None:
    result = op.rsplit("-> ", 1)[1]
    text = f"""
    func.func @f(%t: tensor<32x8xf32>, %p: tensor<i64>, %f: tensor<f32>) -> {result} {{
      %q = graph.cast %f : tensor<f32> -> tensor<i64>
      {op}
      func.return %o : {result}
    }}"""
    with pytest.raises(VerifyException, match=f"graph.dynamic_slice: {message}"):
        parse(text).verify()


def test_the_ops_round_trip_through_their_custom_syntax() -> None:
    printed = str(parse(STEP))
    assert "graph.dynamic_slice %cos[%pos] {dim = 0 : i64}" in printed
    assert "graph.dynamic_update_slice %kcache[%pos], %kr {dim = 2 : i64}" in printed
    assert str(parse(printed)) == printed


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
def test_the_kernels_reading_the_position_run_on_the_cpu_emulation() -> None:
    """The RoPE-and-write kernel and the value write, printed as CUDA with the position as a
    by-value parameter, run on the CPU and leave the caches the reference gives."""
    module = apply_pipeline(parse(STEP), "fuse,tile,to-cuda")
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, tile.CudaKernelOp)}
    host = next(op for op in module.ops if isinstance(op, func.FuncOp))
    for pos in (3, CAPACITY - 1):
        inputs = step_inputs(pos, seed=pos)
        values = {arg: np.array(a) for arg, a in zip(host.args, inputs, strict=True)}
        values[host.args[POS]] = np.array(pos, np.int64)
        launches = [op for op in host.body.block.ops if isinstance(op, loop.LaunchOp)]
        writes = [launch for launch in launches if host.args[POS] in launch.args]
        assert len(writes) == 2
        for launch in writes:
            kernel = kernels[launch.callee.root_reference.data]
            assert "const long long pos" in kernel.source.data
            buffers = [
                values[a] if a is host.args[POS] else np.ascontiguousarray(values[a], np.float32)
                for a in launch.args
            ]
            values[launch.args[-1]] = run_on_cpu(kernel, buffers)[-1]
        _, kcache, vcache = run_reference(parse(STEP), *inputs)
        np.testing.assert_allclose(values[host.args[3]], kcache, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(values[host.args[4]], vcache)


GPU_PIPELINE = "decompose,fuse,flash-attention,tile,to-cuda"
"""CompiledModel's pipeline, without the tuning cache."""


def compiled_step(pdl: int = 0, **options: bool) -> HostFunction:
    pipeline = GPU_PIPELINE.replace("to-cuda", f"to-cuda{{pdl={pdl}}}")
    return compile_module(apply_pipeline(parse(STEP), pipeline), arch="sm_90a", **options)["step"]


def test_a_packed_call_checks_the_position_before_writing_anything() -> None:
    """`HostFunction.pack` takes the position's value in place of an address; a packed call
    (and so a graph replay) checks it at each call. No GPU: nothing is launched."""
    function = compiled_step(poison=False, sync=False)
    params = [0x10000 * (i + 1) for i in range(len(function.params))]
    params[POS] = 3
    outputs = [0x1000000 * (i + 1) for i in range(len(function.outputs))]
    call = function.pack(params, outputs, 0x20000000, per_call=len(params))
    writes = [launch for launch in call.launches if 3 in launch._pointers]
    assert len(writes) == 2
    call.repoint([*params[:POS], 11, *params[POS + 1 :], *outputs])
    assert all(launch.pointer(list(launch._pointers).index(11)) == 11 for launch in writes)
    for bad in (-1, CAPACITY):
        with pytest.raises(ScalarRangeError, match=f"@step argument 5 \\(%pos\\) is {bad}"):
            call.repoint([*params[:POS], bad, *params[POS + 1 :], *outputs])
        assert all(11 in launch._pointers for launch in writes)
    with pytest.raises(ScalarRangeError, match="is 16, past its largest value 15"):
        function.pack([*params[:POS], 16, *params[POS + 1 :]], outputs, 0, per_call=1)
    with pytest.raises(ScalarRangeError, match="is -1, below its smallest value 0"):
        function(*step_inputs(0)[:POS], -1, *step_inputs(0)[POS + 1 :])
    with pytest.raises(ScalarRangeError, match="give an integer, got inf"):
        call.repoint([*params[:POS], float("inf"), *params[POS + 1 :], *outputs])
    for per_call in (-1, len(params) + 1, 2.0):
        with pytest.raises(CudaArgumentError, match=r"per_call must be an integer in \[0, 8\]"):
            function.pack(params, outputs, 0, per_call=per_call)  # type: ignore[arg-type]
    for bad in ("x", -16, 1.5, True):
        with pytest.raises(CudaArgumentError, match="parameter 0 must be a device address"):
            function.pack([bad, *params[1:]], outputs, 0, per_call=1)  # type: ignore[list-item]
    with pytest.raises(CudaArgumentError, match="output 0 must be a device address"):
        function.pack(params, [None, *outputs[1:]], 0, per_call=1)  # type: ignore[list-item]
    with pytest.raises(CudaArgumentError, match="the arena must be a device address"):
        function.pack(params, outputs, -1, per_call=1)


@requires_gpu
@pytest.mark.parametrize("pdl", [0, 1])
def test_two_decode_steps_on_the_gpu_by_calls_and_by_graph_replays(pdl: int) -> None:
    """The step at position 3 then 4, the caches carried from one to the next: by host function
    calls on torch tensors (the caches come back as the caller's own tensors, updated), then
    by two replays of one CUDA graph whose position parameter is updated between them. With
    `pdl` every edge of the graph is programmatic: each kernel launches while the one before
    drains and waits for it at its `griddepcontrol.wait`."""
    import torch
    from cuda.bindings import driver

    from tinyopt.backends.cuda.graph_replay import GraphReplay

    inputs = step_inputs(0)
    expected = []
    state = list(inputs)
    for pos in (3, 4):
        state[POS] = np.array(pos)
        out, kcache, vcache = run_reference(parse(STEP), *state)
        expected.append((out, kcache, vcache))
        state[3], state[4] = kcache.astype(np.float32), vcache.astype(np.float32)

    def device(arrays: list[np.ndarray]) -> list[torch.Tensor]:
        return [torch.from_numpy(np.asarray(a, np.float32)).cuda() for a in arrays]

    function = compiled_step(pdl)
    tensors = device(inputs)
    for pos, (out, kcache, vcache) in zip((3, 4), expected, strict=True):
        got = function(*tensors[:POS], pos, *tensors[POS + 1 :])
        assert got[1] is tensors[3] and got[2] is tensors[4]
        for result, ref in zip(got, (out, kcache, vcache), strict=True):
            np.testing.assert_allclose(result.cpu().numpy(), ref, rtol=1e-4, atol=1e-5)

    function = compiled_step(pdl, poison=False, sync=False)
    tensors = device(inputs)
    outputs = [torch.empty(s.type.shape, device="cuda") for s in function.outputs]
    arena = torch.empty(max(function.arena_size, 16), dtype=torch.uint8, device="cuda")
    params = [t.data_ptr() for t in tensors]
    params[POS] = 0
    given = [*params, *(o.data_ptr() for o in outputs)]
    replay = GraphReplay(function.pack(params, given[len(params) :], arena.data_ptr(), len(params)))
    count = driver.cuGraphGetEdges(replay.graph)[-1]
    edges = driver.cuGraphGetEdges(replay.graph, count)[3]
    assert len(edges) == len(replay.nodes) - 1 >= 2
    assert {int(edge.type) for edge in edges} == {pdl}
    stream = torch.cuda.current_stream().cuda_stream
    for pos, (out, kcache, vcache) in zip((3, 4), expected, strict=True):
        given[POS] = pos
        replay(stream, given)
        torch.cuda.synchronize()
        np.testing.assert_allclose(outputs[0].cpu().numpy(), out, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(tensors[3].cpu().numpy(), kcache, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(tensors[4].cpu().numpy(), vcache, rtol=1e-4, atol=1e-5)
    given[POS] = CAPACITY
    with pytest.raises(ScalarRangeError, match="past its largest value 15"):
        replay(stream, given)


@pytest.mark.parametrize(
    ("item", "message"),
    [
        ("pos=-1", "@step argument 5 (%pos) is -1, below its smallest value 0"),
        ("pos=16", "@step argument 5 (%pos) is 16, past its largest value 15"),
        ("pos=two", "--scalar pos=two: 'two' is not an integer"),
        ("q=1", "--scalar q=1: expected NAME=VALUE naming a runtime scalar of @step (it has %pos)"),
    ],
)
def test_tinyopt_run_checks_a_given_position_before_anything_else(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], item: str, message: str
) -> None:
    (tmp_path / "step.mlir").write_text(STEP)
    assert main(["run", str(tmp_path / "step.mlir"), "--scalar", item]) == 1
    assert capsys.readouterr().err == f"tinyopt: error: {message}\n"


def test_tinyopt_run_refuses_a_scalar_given_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The last of two values was taken, silently."""
    (tmp_path / "step.mlir").write_text(STEP)
    given = ["--scalar", "pos=1", "--scalar", "%pos=2"]
    assert main(["run", str(tmp_path / "step.mlir"), *given]) == 1
    assert capsys.readouterr().err == "tinyopt: error: --scalar %pos=2: %pos is given twice\n"


def run_host_on_cpu(module: ModuleOp, arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Runs a to-cuda module's host function on the CPU emulation, kernel by kernel, on arrays
    in the runtime's storage (bf16 as its bits, a runtime scalar as a 0-d integer array); a
    launch argument that is a `memref.collapse_shape` view reads and writes its buffer."""
    kernels = {op.sym_name.data: op for op in module.ops if isinstance(op, tile.CudaKernelOp)}
    (host,) = [op for op in module.ops if isinstance(op, func.FuncOp)]
    values: dict[SSAValue, np.ndarray] = dict(zip(host.args, arrays, strict=True))
    for op in host.body.block.ops:
        if isinstance(op, memref.AllocOp):
            type_ = op.memref.type
            values[op.memref] = np.zeros(type_.get_shape(), STORAGE[str(type_.element_type)])
        elif isinstance(op, loop.LaunchOp):
            held = [values[viewed(a)] for a in op.args]
            shaped = [
                h.reshape(a.type.get_shape()) if isinstance(a.type, MemRefType) else h
                for h, a in zip(held, op.args, strict=True)
            ]
            buffers = run_on_cpu(kernels[op.callee.root_reference.data], shaped)
            for a, h, out in zip(op.args, held, buffers, strict=True):
                values[viewed(a)] = out.reshape(h.shape)
        elif isinstance(op, func.ReturnOp):
            return [values[viewed(v)] for v in op.arguments]
    raise AssertionError("the host function has no func.return")


STORAGE = {"f32": np.float32, "bf16": np.uint16, "i1": np.bool_}


ATTENTION = """
func.func @f(%q: tensor<1x4x3x64xbf16>, %k: tensor<1x2x40x64xbf16>, %v: tensor<1x2x40x64xbf16>,
             %L: tensor<i64>) -> tensor<1x4x3x64xbf16> {{
  %o = graph.attention %q, %k, %v valid(%L : tensor<i64>) {{scale = 0.125 : f32, causal = {causal}}}
      : (tensor<1x4x3x64xbf16>, tensor<1x2x40x64xbf16>, tensor<1x2x40x64xbf16>)
      -> tensor<1x4x3x64xbf16>
  func.return %o : tensor<1x4x3x64xbf16>
}}
"""
"""Attention of 3 queries over the first L of 40 cached keys (GQA: 4 query heads, 2 KV heads)."""


def test_attention_over_the_valid_keys_matches_numpy() -> None:
    """Keys j ≥ L weigh 0; with `causal`, query i sees the keys j ≤ L − Sq + i."""
    for causal in ("false", "true"):
        text = ATTENTION.format(causal=causal)
        inputs = random_inputs(parse(text), 0)
        q, k, v = (np.asarray(a, np.float64) for a in inputs[:3])
        for valid in (3, 17, 40):
            inputs[3] = np.array(valid)
            keys, values = (np.repeat(x, 2, axis=1)[:, :, :valid] for x in (k, v))
            scores = q @ np.swapaxes(keys, -1, -2) * 0.125
            if causal == "true":
                seen = np.arange(valid)[None, :] <= np.arange(3)[:, None] + valid - 3
                scores = np.where(seen, scores, -np.inf)
            weights = np.exp(scores - scores.max(-1, keepdims=True))
            want = weights / weights.sum(-1, keepdims=True) @ values
            (got,) = run_reference(parse(text), *inputs)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
            lowered = apply_pipeline(parse(text), "fuse")
            (got,) = run_loop_module(lowered, "f", *inputs)
            np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("causal", ["false", "true"])
def test_the_bounds_of_the_number_of_valid_keys(causal: str) -> None:
    lo = 3 if causal == "true" else 1
    text = ATTENTION.format(causal=causal)
    inputs = random_inputs(parse(text), 0)
    assert lo <= int(inputs[3]) <= 40
    for bad, message in (
        (lo - 1, f"below its smallest value {lo}"),
        (41, "past its largest value 40"),
    ):
        inputs[3] = np.array(bad)
        with pytest.raises(ScalarRangeError, match=f"@f argument 3 \\(%L\\) is {bad}, {message}"):
            run_reference(parse(text), *inputs)
        with pytest.raises(ScalarRangeError, match=message):
            run_loop_module(apply_pipeline(parse(text), "decompose,fuse"), "f", *inputs)


@pytest.mark.skipif(COMPILER is None, reason="g++ not found")
@pytest.mark.parametrize("rule", ["sync", "decode"])
def test_fused_attention_over_the_valid_keys_on_the_cpu_emulation(rule: str) -> None:
    """flash-attention fuses the attention with its valid-keys mask, read as any mask (from a
    buffer a kernel computes from L); the tensor-core rule and the decode rule apply it."""
    text = ATTENTION.format(causal="true")
    module = apply_pipeline(
        parse(text), f"decompose,fuse,flash-attention,tile{{attn={rule}}},to-cuda"
    )
    graph = parse(text)
    inputs, arrays = device_inputs(next(iter(graph.ops)), seed=3)
    inputs[3] = arrays[3] = np.array(17, np.int64)
    (out,) = run_host_on_cpu(module, arrays)
    (ref,) = run_reference(graph, *inputs)
    assert relative_error(from_storage(out, bf16), ref) < 2e-2


@requires_gpu
@pytest.mark.parametrize("sq", [1, 4])
def test_attention_over_the_valid_keys_of_a_cache_on_the_gpu(sq: int) -> None:
    """One kernel compiled for a cache of 4096 keys, run with three numbers of valid keys (the
    rule `mma=auto` picks: decode, wgmma or mma.sync)."""
    import torch

    text = (
        ATTENTION.replace("1x4x3x64", f"1x32x{sq}x128")
        .replace("1x2x40x64", "1x8x4096x128")
        .replace("0.125", "0.0883883")
    ).format(causal="true")
    graph = next(iter(parse(text).ops))
    function = compile_module(apply_pipeline(parse(text), GPU_PIPELINE))["f"]
    inputs, arrays = device_inputs(graph, seed=1)
    tensors = [torch.from_numpy(a).cuda() for a in arrays[:3]]
    for valid in (sq, 1000, 4096):
        inputs[3] = np.array(valid)
        out = function(*tensors, valid).view(torch.int16).cpu().numpy().view(np.uint16)
        (ref,) = run_reference(graph, *inputs)
        assert relative_error(from_storage(out, bf16), ref) < 2e-2, valid
