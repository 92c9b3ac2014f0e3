"""`mma=3xtf32`: f32 GEMMs as three TF32 wgmma products, close to f32 and exact on infinities.

On the GPU the error against float64 must stay at f32 FMA's order (the default kernel's, run
beside it on the same inputs), far below one TF32 product's 3e-4; inputs holding ±inf and NaN
must give the infinities and NaNs an f32 GEMM gives (torch's, TF32 off), and the finite outputs
of such a GEMM its accuracy. Without a GPU: the plan, the refusals and the CUDA (the products,
the split, the reducing barrier) are checked, and NVRTC compiles the kernels.
"""

import numpy as np
import pytest
from conftest import requires_gpu
from programs import batched_linear, matmul_plain, mlp, skinny, tile_with

from tinyopt.backends.check import device_inputs, errors_against_reference, graph_function
from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.compiler import apply_pipeline, lower, parse
from xdsl.utils.exceptions import DiagnosticException
from tinyopt.dialects import tile

SHAPES = [(512, 512, 2048), (1000, 768, 512), (127, 129, 68), (4095, 300, 260), (64, 200, 32)]
KN_SHAPES = [(512, 512, 2048), (1000, 768, 512), (127, 132, 68), (4095, 300, 260), (64, 200, 32)]
"""For `x @ w` (w `[K, N]`, TMA rows N wide): N, as K, a multiple of 4."""


def _kernels(program: str, knobs: str) -> list[tile.CudaKernelOp]:
    _, module = lower(program, tile_with(knobs))
    return [op for op in module.ops if isinstance(op, tile.CudaKernelOp)]


@pytest.mark.parametrize("m,n,k", [(512, 512, 2048), (127, 129, 68)])
def test_3xtf32_kernel_issues_three_tf32_products(m: int, n: int, k: int) -> None:
    plain = "mma=3xtf32 splitk=1 swap=off"
    (kernel,) = _kernels(matmul_plain(m, n, k, "f32", b_layout="nk"), plain)
    source = kernel.source.data
    assert ".f32.tf32.tf32" in source and "cvt.rna.tf32.f32" in source
    assert "bar.red.or.pred" in source  # the infinity check the consumers agree on
    body = source[source.index("__global__") :]
    # small·big, big·small, big·big for each of the four k8 slices of a 32-wide K step
    assert body.count("tinyopt_wgmma_m64n") == 3 * 4


def test_3xtf32_takes_n_major_weights_through_a_transposing_split() -> None:
    """`x @ w` with w `[K, N]`: TMA brings 32-column chunks of w; the split writes its TF32
    parts into K-major tiles of their own (TF32 wgmma reads no other), so the kernel has a
    third shared tile for B and the wgmmas read B K-major."""
    (kernel,) = _kernels(
        matmul_plain(256, 256, 256, "f32", b_layout="kn", relu=False), "mma=3xtf32 splitk=1"
    )
    source = kernel.source.data
    assert (
        source.count("reinterpret_cast<float (*)[") == 6
    )  # A, B, A small, B small, B big, staging
    assert "_tf32_k(" in source and "_tf32_n" not in source


def test_3xtf32_refuses_rows_tma_cannot_copy() -> None:
    with pytest.raises(DiagnosticException, match="rows of A and B to be multiples of 16 bytes"):
        _kernels(matmul_plain(127, 129, 65, "f32", b_layout="nk"), "mma=3xtf32")


def test_3xtf32_refuses_bf16() -> None:
    with pytest.raises(DiagnosticException, match="mma=3xtf32 applies to sums of products of f32"):
        _kernels(matmul_plain(256, 256, 256, "bf16", b_layout="nk"), "mma=3xtf32")


def _run(program: str, knobs: str, seed: int = 0):
    program_module, module = lower(program, tile_with(knobs))
    graph = graph_function(program_module)
    run = compile_module(module, poison=True).function(graph.sym_name.data)
    return graph, run


@requires_gpu
@pytest.mark.parametrize(
    "m,n,k,layout",
    [(*shape, "nk") for shape in SHAPES] + [(*shape, "kn") for shape in KN_SHAPES],
)
def test_3xtf32_error_is_f32_order(m: int, n: int, k: int, layout: str) -> None:
    program = matmul_plain(m, n, k, "f32", b_layout=layout, relu=False)
    errors = {}
    for knobs in ("mma=3xtf32", "mma=none"):
        graph, run = _run(program, knobs)
        inputs, arrays = device_inputs(graph, seed=1)
        (errors[knobs],) = errors_against_reference(graph, (run(*arrays),), inputs)
    assert errors["mma=3xtf32"] < max(4 * errors["mma=none"], 2e-6), errors


@requires_gpu
def test_3xtf32_batched_and_mlp() -> None:
    for program in (batched_linear(3, 200, 136, 96), mlp((2, 129), 256, 512, "f32")):
        graph, run = _run(program, "mma=3xtf32")
        inputs, arrays = device_inputs(graph, seed=2)
        (error,) = errors_against_reference(graph, (run(*arrays),), inputs)
        assert error < 2e-6, error


@requires_gpu
def test_3xtf32_infinities_are_f32s() -> None:
    """±inf and NaN in A and B: the outputs' inf/NaN pattern and signs are torch's f32 GEMM's
    (cuBLAS, TF32 off), the finite outputs within f32 order of float64."""
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    m, n, k = 300, 260, 200
    graph, run = _run(matmul_plain(m, n, k, "f32", b_layout="nk"), "mma=3xtf32")
    inputs, arrays = device_inputs(graph, seed=3)
    x, w, b = (np.array(a, np.float32) for a in inputs)
    x[5, 7], x[6, 40], x[200, 199] = np.inf, -np.inf, np.nan
    w[9, 7], w[11, 100], w[250, 150] = -np.inf, np.inf, 0.0
    x[7, 150] = np.inf  # meets the zero weight: NaN in f32
    out = np.asarray(run(x, w, b))
    ref = torch.nn.functional.linear(*(torch.from_numpy(a).cuda() for a in (x, w, b))).cpu()
    ref = ref.numpy()
    np.testing.assert_array_equal(np.isnan(out), np.isnan(ref))
    np.testing.assert_array_equal(np.isposinf(out), np.isposinf(ref))
    np.testing.assert_array_equal(np.isneginf(out), np.isneginf(ref))
    finite = np.isfinite(ref)
    exact = x.astype(np.float64) @ w.astype(np.float64).T + b
    scale = np.linalg.norm(exact[finite])
    assert np.linalg.norm(out[finite] - exact[finite]) / scale < 2e-6


@requires_gpu
def test_3xtf32_subnormal_operand_is_not_flushed() -> None:
    """A subnormal activation times a huge weight: 1e-39 · 1e30 = 1e-9, as f32 FMA gives it,
    not the 0 a tensor core that flushes subnormal inputs would give."""
    m, n, k = 256, 256, 64
    graph, run = _run(matmul_plain(m, n, k, "f32", b_layout="nk"), "mma=3xtf32")
    inputs, _ = device_inputs(graph, seed=4)
    x, w, b = (np.array(a, np.float32) for a in inputs)
    x[10, :] = 0.0
    x[10, 3], w[12, 3], b[12] = 1e-39, 1e30, 0.0
    out = np.asarray(run(x, w, b))
    expected = np.float64(np.float32(1e-39)) * 1e30
    assert abs(out[10, 12] - expected) <= 1e-6 * expected, out[10, 12]
    exact = x.astype(np.float64) @ w.astype(np.float64).T + b
    assert np.linalg.norm(out - exact) / np.linalg.norm(exact) < 2e-6


def test_3xtf32_takes_only_the_decode_rows_the_cuda_cores_starve_on() -> None:
    """With `swap=off`, 64 rows of a 1024×4096 linear: too little work for the CUDA-core
    rule's 64-row block (8 K steps a block of its stream-K wave), so `auto` splits K over 16
    blocks of three TF32 products (the partial sums folded by a second kernel; 1.13x cuBLAS
    against 0.83x on the H200); 64 rows of 4096×4096 keep the CUDA cores, where 64×64 TF32
    blocks lost; `mma=none` keeps both on the CUDA cores."""
    starved = matmul_plain(64, 1024, 4096, "f32", b_layout="nk")
    text = str(lower(starved, "fuse,plan{swap=off}")[1])
    assert "@linear_0_splitk" in text and "plan = #tile.plan<wgmma_3xtf32" in text
    assert "wgmma_3xtf32" not in str(lower(starved, "fuse,plan{mma=none}")[1])
    busy = matmul_plain(64, 4096, 4096, "f32", b_layout="nk")
    assert "wgmma_3xtf32" not in str(lower(busy, "fuse,plan{swap=off}")[1])


def test_3xtf32_swaps_linears_of_17_rows_and_more() -> None:
    """`swap=auto` takes f32 linears of 17 rows and more (past the skinny rule's CUDA-core
    balance) with B `[N, K]` on the swapped plan, past 128 rows (the widest swapped block)
    where B has a full 128-row block; 16 rows stay with the skinny rule, `x @ w` (B `[K, N]`)
    with the CUDA-core rules, and `swap=on` names why it cannot take `x @ w`."""

    def plan(m: int, layout: str, knobs: str = "", n: int = 4096) -> str:
        return str(
            lower(matmul_plain(m, n, 1024, "f32", b_layout=layout), f"fuse,plan{{{knobs}}}")[1]
        )

    for m in (17, 40, 64, 65, 97, 128, 129, 1000):
        assert 'swap = "on"' in plan(m, "nk")
    assert 'swap = "on"' in plan(300, "nk", n=128) and 'swap = "on"' in plan(100, "nk", n=100)
    assert 'swap = "on"' not in plan(300, "nk", n=100)
    assert "wgmma_3xtf32" not in plan(16, "nk")
    assert 'swap = "on"' not in plan(40, "kn")
    with pytest.raises(DiagnosticException, match=r"swap=on needs B \[N, K\]"):
        lower(matmul_plain(40, 4096, 1024, "f32", b_layout="kn"), "fuse,plan{mma=3xtf32 swap=on}")


@requires_gpu
@pytest.mark.parametrize(
    "shape,knobs",
    [((64, 1024, 4096), "mma=3xtf32"), ((256, 520, 1024), "mma=3xtf32 splitk=4")],
)
def test_3xtf32_split_k_error_is_f32_order(shape: tuple[int, int, int], knobs: str) -> None:
    program = matmul_plain(*shape, "f32", b_layout="nk")
    errors = {}
    for setting in (knobs, "mma=none"):
        graph, run = _run(program, setting)
        inputs, arrays = device_inputs(graph, seed=5)
        (errors[setting],) = errors_against_reference(graph, (run(*arrays),), inputs)
    assert errors[knobs] < max(4 * errors["mma=none"], 2e-6), errors


def test_store_and_group_set_by_hand_are_kept_or_refused_under_swap() -> None:
    """The swapped plan stores direct from registers in row order; it had planned store =
    "direct" and group = 1 over a hand-set store=smem or group=16 without a word. Under
    swap=auto the plain plan takes them; swap=on is refused by name."""
    text = matmul_plain(97, 4096, 1024, "f32", b_layout="nk")
    assert 'swap = "on"' in str(lower(text, "fuse,plan{mma=3xtf32}")[1])
    for knobs, planned in (("store=smem", 'store = "smem"'), ("group=16", "group = 16")):
        plans = str(lower(text, f"fuse,plan{{mma=3xtf32 {knobs}}}")[1])
        assert 'swap = "off"' in plans and planned in plans, plans
        with pytest.raises(DiagnosticException, match=f"swap=on stores .*not with {knobs}"):
            lower(text, f"fuse,plan{{mma=3xtf32 swap=on {knobs}}}")


@pytest.mark.parametrize(
    "dtype,knobs,why",
    [
        ("bf16", "swap=on store=tma", "not with store=tma"),
        ("f32", "mma=none swap=on", "the knobs select other rules"),
    ],
)
def test_swap_on_where_it_cannot_apply_is_refused(dtype: str, knobs: str, why: str) -> None:
    """`swap=on` on a GEMM no wgmma rule takes swapped names the kernel and why
    (it was ignored: the GEMM ran unswapped)."""
    text = skinny(64, 1024, 4096, dtype)
    with pytest.raises(DiagnosticException, match=r"swap=on does not apply to kernel @skinny_0"):
        try:
            apply_pipeline(parse(text), f"fuse,plan{{{knobs}}}")
        except DiagnosticException as e:
            assert why in str(e), e
            raise
