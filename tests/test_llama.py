"""The Llama-style block and model of examples/llama_block.py through the default pipeline.

On the CPU: every kernel of the captured block (f32, bf16) and model (bf16) compiles with NVRTC
for sm_90a, and the loop-level program, run by the numpy loop executor, matches torch on the
example block (hidden 64, 4 heads, 2 KV heads, seq 16) and a tiny two-layer model. On a GPU:
the compiled block and model match the float64 reference within the bf16 tolerance.
"""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest
from conftest import requires_gpu
from programs import load_example

torch = pytest.importorskip("torch")

from xdsl.dialects import memref  # noqa: E402
from xdsl.dialects.builtin import ModuleOp, bf16  # noqa: E402
from xdsl.ir import SSAValue  # noqa: E402

from tinyopt.backends.check import TOLERANCES  # noqa: E402
from tinyopt.backends.cuda.cache import cached_compile  # noqa: E402
from tinyopt.backends.loop_reference import run_loop_module  # noqa: E402
from tinyopt.backends.reference import run_reference  # noqa: E402
from tinyopt.compiler import DEFAULT_PIPELINE, apply_pipeline  # noqa: E402
from tinyopt.dialects import loop, tile  # noqa: E402
from tinyopt.frontends.compiled_model import PIPELINE  # noqa: E402
from tinyopt.frontends.torch_fx import Capture, capture  # noqa: E402
from tinyopt.passes.loop_rewrites.flash_attention import FLASH_ATTR  # noqa: E402
from tinyopt.passes.graph_to_loop.fuse_kernel import CONTRACTION_ATTR  # noqa: E402
from tinyopt.passes.tile.gemm.paired import match_paired_contraction  # noqa: E402
from tinyopt.passes.tile.gemm.split_k import SEQUENTIAL  # noqa: E402

llama = load_example("llama_block.py")

TINY = {"dim": 32, "heads": 4, "kv_heads": 2, "hidden": 64, "seq": 8}
"""A configuration small enough for the scalar loop executor to run a two-layer model."""


def _example(name: str, dtype: torch.dtype) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """Return the example `block` or `model` in `dtype` and the inputs it is captured on."""
    if name == "block":
        module, inputs = llama.block(), llama.example_inputs()
        inputs = tuple(x.to(dtype) for x in inputs)
    else:
        module, inputs = llama.model(), llama.model_inputs()
    return module.to(dtype).eval(), inputs


def _lower(cap: Capture, pipeline: str) -> ModuleOp:
    return apply_pipeline(cap.module.clone(), pipeline)


@pytest.mark.parametrize(
    ("name", "dtype"),
    [("block", torch.float32), ("block", torch.bfloat16), ("model", torch.bfloat16)],
    ids=["block-f32", "block-bf16", "model-bf16"],
)
def test_every_kernel_compiles_with_nvrtc(name: str, dtype: torch.dtype) -> None:
    module, inputs = _example(name, dtype)
    lowered = _lower(capture(module, *inputs), DEFAULT_PIPELINE)
    kernels = [op for op in lowered.ops if op.name == "tile.cuda_kernel"]
    # A block: norm, q/k/v, scores, softmax, p·v, o + residual, norm, gate·up, down + residual.
    assert len(kernels) >= (11 if name == "block" else 2 * 11 + 2)
    for op in kernels:
        assert cached_compile(op.properties["source"].data, op.properties["sym_name"].data)


def _check_loop_level(
    module: torch.nn.Module, *inputs: torch.Tensor, pipeline: str = "fuse"
) -> ModuleOp:
    """Lower the captured module by `pipeline`; check the loop executor against torch and the
    reference."""
    cap = capture(module.eval(), *inputs)
    fused = _lower(cap, pipeline)
    args = cap.arguments(*inputs)
    (got,) = run_loop_module(fused, "forward", *args)
    (ref,) = run_reference(cap.module, *args)
    with torch.no_grad():
        want = module(*inputs).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)
    return fused


def test_example_block_at_loop_level_matches_torch() -> None:
    """The example's size: hidden 64, 4 heads, 2 KV heads, MLP 128, seq 16."""
    fused = _check_loop_level(llama.block(), *llama.example_inputs())
    text = str(fused)
    assert "arith.select" in text  # RoPE's concat, inside a kernel
    assert "memref.global" not in text  # the causal mask is index arithmetic


def _launch_and_next(module: ModuleOp, name: str) -> tuple[loop.LaunchOp, loop.LaunchOp]:
    """Returns the one launch of kernel `name` and the launch after it."""
    launches = [op for op in module.walk() if isinstance(op, loop.LaunchOp)]
    (at,) = [n for n, op in enumerate(launches) if op.callee.root_reference.data == name]
    return launches[at], launches[at + 1]


def test_example_block_stores_attention_where_the_o_projection_reads_it() -> None:
    """`flash-attention` folds the copy of the attention output ([heads, s, d]) into the
    [s, heads·d] buffer the o projection reads into the attention kernel's store: scores,
    softmax, P·V and the copy become one kernel, and the block still matches torch."""
    block, inputs = llama.block(), llama.example_inputs()
    fused = _lower(capture(block.eval(), *inputs), "decompose,fuse")
    flash = _check_loop_level(block, *inputs, pipeline="decompose,fuse,flash-attention")
    assert len(loop.kernels(flash)) == len(loop.kernels(fused)) - 3
    (kernel,) = [
        k for k in loop.kernels(flash) if any(FLASH_ATTR in o.attributes for o in k.walk())
    ]
    attention, projection = _launch_and_next(flash, kernel.sym_name.data)
    (store,) = [op for op in kernel.walk() if isinstance(op, memref.StoreOp)]
    out = attention.args[kernel.body.block.args.index(store.memref)]  # type: ignore[arg-type]
    assert out.type.get_shape()[-2:] == (16, 64)  # type: ignore[attr-defined]
    assert out in [_viewed(a) for a in projection.args]


def test_block_at_llama_shapes_takes_the_wgmma_attention_schedule() -> None:
    """32 heads of 128, 8 KV heads, bf16 (seq 256 and a small MLP, to lower quickly): the
    attention kernel is the wgmma schedule and stores the [s, 4096] buffer the o projection
    reads, with a row stride of 4096."""
    torch.manual_seed(0)
    block = llama.LlamaBlock(dim=4096, heads=32, kv_heads=8, hidden=256, seq=256)
    x = torch.randn(1, 256, 4096)
    lowered = _lower(capture(block.to(torch.bfloat16).eval(), x.bfloat16()), PIPELINE)
    (kernel,) = [
        op
        for op in lowered.ops
        if isinstance(op, tile.CudaKernelOp) and "tinyopt_wgmma_ra_" in op.source.data
    ]
    assert list(kernel.block.get_values()) == [384, 1, 1]
    attention, projection = _launch_and_next(lowered, kernel.sym_name.data)
    out = _viewed(attention.args[-1])
    assert str(out.type) == "memref<1x256x4096xbf16>"
    assert out in [_viewed(a) for a in projection.args]
    assert re.search(r"v\d+\[v\d+ \* 4096 \+ v\d+\]", kernel.source.data)


def test_block_at_batch_2_is_planned_as_at_batch_1() -> None:
    """Llama shapes in bf16 (a small MLP, seq 128): at batch 2 every linear is still one wgmma
    GEMM over all rows (gate and up one dual GEMM) and attention the wgmma schedule, in as
    many kernels as at batch 1, where the small grids of 128 rows split K (`splitk=0`: the
    wgmma partial kernel and its fold, which is not counted)."""
    torch.manual_seed(0)
    block = llama.LlamaBlock(4096, 32, 8, 1024, 128).to(torch.bfloat16).eval()
    plans = []
    for batch in (1, 2):
        x = torch.randn(batch, 128, 4096).bfloat16()
        planned = _lower(capture(block, x), "decompose,fuse,flash-attention,plan")
        rules = [
            k.attributes[tile.PLAN].rule.data  # type: ignore[union-attr]
            for k in loop.kernels(planned)
            if SEQUENTIAL not in k.attributes
        ]
        plans.append(rules)
    assert plans[1] == plans[0]
    assert plans[1].count("wgmma") == 6 and "attention_wgmma" in plans[1]


def test_tiny_two_layer_model_at_loop_level_matches_torch() -> None:
    torch.manual_seed(2)
    model = llama.LlamaModel(vocab=40, layers=2, **TINY)
    ids = torch.randint(0, 40, (1, TINY["seq"]))
    fused = _check_loop_level(model, ids)
    assert len(loop.kernels(fused)) >= 2 * 11 + 2


def _residual(kernel: loop.KernelOp, launch: loop.LaunchOp) -> SSAValue:
    """Return the host buffer a contraction kernel adds to its accumulator after the K loop."""
    (nest,) = kernel.body.block.ops
    ops = list(nest.body.block.ops)
    (reduce,) = (op for op in ops if isinstance(op, loop.ReduceOp))
    assert CONTRACTION_ATTR in reduce.attributes
    epilogue = [op for op in ops[ops.index(reduce) + 1 :] if op.name != "arith.constant"]
    assert [op.name for op in epilogue] == ["memref.load", "arith.addf", "memref.store"]
    load, add, store = epilogue
    assert set(add.operands) == {load.results[0], reduce.res[0]}
    assert store.operands[0] is add.results[0]
    return _viewed(launch.args[kernel.body.block.args.index(load.operands[0])])


def _viewed(buffer: SSAValue) -> SSAValue:
    """The host buffer itself where a launch passes a `memref.collapse_shape` view of it."""
    while isinstance(buffer.owner, memref.CollapseShapeOp):
        buffer = buffer.owner.src
    return buffer


def test_residual_adds_are_the_o_and_down_projection_epilogues() -> None:
    """The o projection's kernel stores `x1 = x + o`, the MLP's norm reads x1, and the down
    projection's kernel stores the result `x1 + down`: no kernel of its own for either add
    (fuse gave 16 kernels before, with x + o recomputed in the norm and the final add; 14
    once the gate and up projections were one kernel; 15 now that v repeated over the
    query heads gets a buffer so the PV product is a GEMM: its batch loops would not merge)."""
    module, inputs = _example("block", torch.float32)
    cap = capture(module, *inputs)
    assert len(loop.kernels(_lower(cap, "decompose,fuse"))) == 15
    lowered = _lower(cap, "decompose,fuse,flash-attention")
    kernels = {k.sym_name.data: k for k in loop.kernels(lowered)}
    host = next(op for op in lowered.ops if op.name == "func.func")
    launches = [op for op in host.walk() if isinstance(op, loop.LaunchOp)]
    x, *weights = host.regions[0].block.args
    weight = dict(zip(cap.weights, weights))

    def launch_reading(buffer: SSAValue) -> loop.LaunchOp:
        (launch,) = (op for op in launches if buffer in op.args)
        return launch

    o_proj = launch_reading(weight["o_proj.weight"])
    down_proj = launch_reading(weight["down_proj.weight"])
    x1 = _viewed(o_proj.args[-1])
    assert _residual(kernels[o_proj.callee.string_value()], o_proj) is x
    assert _residual(kernels[down_proj.callee.string_value()], down_proj) is x1
    assert down_proj is launches[-1]
    # x is read by the first norm and the o projection only; the MLP's norm reads x1.
    reads = [op for op in launches if x in map(_viewed, op.args)]
    assert reads == [launches[0], o_proj]
    mlp_norm = launches[launches.index(o_proj) + 1]
    assert x1 in map(_viewed, mlp_norm.args) and weight["mlp_norm.weight"] in mlp_norm.args
    (got,) = run_loop_module(lowered, "forward", *cap.arguments(*inputs))
    with torch.no_grad():
        want = module(*inputs).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_gate_and_up_projections_are_one_dual_gemm() -> None:
    """fuse pairs the MLP's gate and up projections (one A, two K loops) and, in bf16, the
    tile pass keeps them one wgmma kernel with a tensor map per operand; in f32 it splits them
    back into two kernels, the up projection's through a workspace."""
    for dtype, launches_reading_both in ((torch.bfloat16, 1), (torch.float32, 0)):
        module, inputs = _example("block", dtype)
        cap = capture(module, *inputs)
        fused = _lower(cap, "decompose,fuse")
        assert [k.sym_name.data for k in loop.kernels(fused) if match_paired_contraction(k)]
        lowered = _lower(cap, PIPELINE)
        host = next(op for op in lowered.ops if op.name == "func.func")
        weight = dict(zip(cap.weights, host.regions[0].block.args[1:]))
        gate, up = weight["gate_proj.weight"], weight["up_proj.weight"]
        launches = [op for op in host.walk() if isinstance(op, loop.LaunchOp)]
        both = [op for op in launches if gate in op.args and up in op.args]
        assert len(both) == launches_reading_both
        if both:
            (kernel,) = (
                k
                for k in lowered.ops
                if isinstance(k, tile.CudaKernelOp)
                and k.sym_name.data == both[0].callee.string_value()
            )
            assert len(kernel.attributes["tile.tensor_maps"]) == 3


def _relative(out: np.ndarray, ref: np.ndarray) -> float:
    return float(np.linalg.norm(out - ref) / np.linalg.norm(ref))


@requires_gpu
@pytest.mark.parametrize("name", ["block", "model"])
def test_bf16_on_the_gpu_matches_like_eager(name: str) -> None:
    from tinyopt.backends.cuda.runtime import compile_module

    module, inputs = _example(name, torch.bfloat16)
    cap = capture(module, *inputs)
    compiled = compile_module(_lower(cap, DEFAULT_PIPELINE)).function("forward")
    arguments = [t.cuda() for t in (*inputs, *cap.weights.values())]
    out = compiled(*arguments).float().cpu().numpy()
    with torch.no_grad():
        eager = module.cuda()(*(x.cuda() for x in inputs)).float().cpu().numpy()
        exact = copy.deepcopy(module).double().cpu()
        floats = (x.double() if x.is_floating_point() else x for x in inputs)
        ref = exact(*floats).numpy()
    error, eager_error = _relative(out, ref), _relative(eager, ref)
    print(f"{name}: tinyopt {error:.2e}, eager {eager_error:.2e} (vs float64)")
    assert error < TOLERANCES[bf16]
