"""Bad inputs of the thirtieth session's hunt (split-K over thread-block clusters, and
integers past 64 bits): each was a Python traceback, a garbled message, or a kernel that could
not launch or read memory it does not own; now a diagnostic naming the problem. Every test here
fails on the code before the fix (the docstrings say how). No GPU needed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tinyopt.cli import main

sys.path.insert(0, str(Path(__file__).resolve().parent))
from programs import batched_matmul  # noqa: E402

HUGE = "99999999999999999999"

KERNEL = """builtin.module {
  tile.kernel @k grid GRID block BLOCK CLUSTER(%0: memref<1024xf32>) {
BODY  }
  func.func @f(%0: memref<1024xf32>) -> memref<1024xf32> {
    loop.launch @k(%0) : memref<1024xf32>
    func.return %0 : memref<1024xf32>
  }
}
"""


def kernel(grid="[4, 1, 1]", block="[128, 1, 1]", cluster="cluster [2, 1, 1] ", body="") -> str:
    return (
        KERNEL.replace("GRID", grid)
        .replace("BLOCK", block)
        .replace("CLUSTER", cluster)
        .replace("BODY", body)
    )


def compile_cli(
    tmp_path: Path, text: str, pipeline: str, capsys: pytest.CaptureFixture[str], *target: str
) -> tuple[int, str]:
    """Runs `tinyopt f.mlir -p PIPELINE [-t cuda] -o out`; returns the status and stderr, and
    checks that a refusal leaves no output file and no traceback."""
    (tmp_path / "f.mlir").write_text(text)
    out = tmp_path / "out"
    status = main([str(tmp_path / "f.mlir"), "-p", pipeline, *target, "-o", str(out)])
    err = capsys.readouterr().err
    if status:
        assert not out.exists() and "Traceback" not in err, err
    return status, err


RELU = """func.func @f(%x: tensor<4xf32>) -> tensor<4xf32>
    attributes {k = #tile.knobs<bm = VALUE>} {
  %y = graph.relu %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
"""

LOOP = """builtin.module {
  loop.kernel @k(%0: memref<4xf32>) {
    loop.parallel (%i) in [VALUE] {
    }
  }
}
"""


@pytest.mark.parametrize(
    ("text", "pipeline", "message"),
    [
        # `ValueError: Integer value 99999999999999999999 is out of range for type i64` from
        # xDSL, a traceback
        (kernel(grid=f"[{HUGE}, 1, 1]"), "to-cuda", f"a grid size {HUGE} is out of range"),
        (kernel(block=f"[1, {HUGE}, 1]"), "to-cuda", f"a block size {HUGE} is out of range"),
        (
            kernel(cluster=f"cluster [{HUGE}, 1, 1] "),
            "to-cuda",
            f"a cluster size {HUGE} is out of range",
        ),
        (kernel(grid=f"[-{HUGE}, 1, 1]"), "to-cuda", f"a grid size -{HUGE} is out of range"),
        (LOOP.replace("VALUE", HUGE), "tile", f"an extent {HUGE} is out of range"),
        # wrapped to -9223372036854775808: "grid must be 3 positive sizes, got
        # (-9223372036854775808, 1, 1)" of a grid written positive
        (
            kernel(grid="[9223372036854775808, 1, 1]"),
            "to-cuda",
            "a grid size 9223372036854775808 is out of range",
        ),
        (
            kernel(cluster="cluster [18446744073709551615, 1, 1] "),
            "to-cuda",
            "a cluster size 18446744073709551615 is out of range",
        ),
        # "f.mlir:1:1: error: c: Integer value ... out of range for type i64 which supports
        # values in the range [-9223372036854775808, 18446744073709551616)" at the function
        (RELU.replace("VALUE", HUGE), "fuse", f"a knob value {HUGE} is out of range"),
    ],
)
def test_integers_past_64_bits(
    text: str, pipeline: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, err = compile_cli(tmp_path, text, pipeline, capsys)
    assert status == 1
    first = err.splitlines()[0]
    assert f"error: {message}: it must fit a 64-bit signed integer" in first, err
    # the caret is under the number, not under the op
    source, caret = err.splitlines()[1:3]
    number = message.split(" is out of range")[0].split()[-1]
    assert source[caret.index("^") :].startswith(number), err


def test_a_plan_knob_past_64_bits(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`#tile.plan<wgmma, ..., cluster = 99999999999999999999>` said "error: l: Integer value
    ... is out of range for type i64", at the loop.kernel."""
    text = """builtin.module {
  loop.kernel @k(%0: memref<4xf32>)
      attributes {plan = #tile.plan<elementwise, threads = 256, vec = VALUE>} {
    loop.parallel (%i) in [4] {
    }
  }
}
""".replace("VALUE", HUGE)
    status, err = compile_cli(tmp_path, text, "tile", capsys)
    assert status == 1 and f"error: a knob value {HUGE} is out of range" in err, err


SHARED = "    %s = tile.alloc dynamic : memref<4x64xf32, 3 : i32>\n"
RANK = "    %r = arith.constant RANK : index\n    %z = arith.constant 0 : index\n"
LOAD = (
    "    %a, %b, %c, %d = tile.cluster_vload %s[%z, %z] of %r : memref<4x64xf32, 3 : i32> -> "
    "f32, f32, f32, f32\n"
)


def cluster_load(rank: int, cluster: str) -> str:
    body = SHARED + RANK.replace("RANK", str(rank)) + "    tile.cluster_sync\n" + LOAD
    return kernel(cluster=cluster, body=body + "    tile.cluster_sync\n")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # compiled to `mapa.shared::cluster` of rank 1 in a kernel launched without clusters
        # (each block its own cluster of one): an address no block owns
        (
            cluster_load(1, ""),
            "tile.cluster_vload: reads another block's shared memory, so kernel @k must be "
            "launched in clusters (cluster [x, y, z])",
        ),
        # rank 5 of clusters of 2 blocks, compiled
        (
            cluster_load(5, "cluster [2, 1, 1] "),
            "tile.cluster_vload: rank 5 is not a block of kernel @k's clusters of 2 blocks",
        ),
        (
            cluster_load(1, "cluster [1, 1, 1] "),
            "tile.cluster_vload: rank 1 is not a block of kernel @k's clusters of 1 block",
        ),
    ],
)
def test_cluster_load_outside_the_cluster(
    text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, err = compile_cli(tmp_path, text, "to-cuda", capsys, "-t", "cuda")
    assert status == 1 and f"error: {message}\n" in err, err


@pytest.mark.parametrize("rank", [0, 1, 7])
def test_cluster_load_of_a_block_of_the_cluster(
    rank: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Ranks 0 to 7 of clusters of 8 blocks still compile."""
    text = cluster_load(rank, "cluster [2, 2, 2] ").replace("[4, 1, 1]", "[2, 2, 2]")
    status, err = compile_cli(tmp_path, text, "to-cuda", capsys, "-t", "cuda")
    assert status == 0, err
    assert "__cluster_dims__(2, 2, 2)" in (tmp_path / "out").read_text()


def test_clustered_kernel_past_the_grid_limits_at_to_cuda(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A grid of 131072 blocks in z, clusters of [1, 1, 8]: re-gridded into x, printed as
    `grid (131072, 1, 1)` with `__cluster_dims__(1, 1, 8)` (a launch the driver refuses, and
    blocks no longer in their clusters), exit 0."""
    text = kernel(grid="[1, 1, 131072]", cluster="cluster [1, 1, 8] ")
    status, err = compile_cli(tmp_path, text, "to-cuda", capsys, "-t", "cuda")
    assert status == 1
    assert err == (
        "tinyopt: error: to-cuda: kernel @k: its grid [1, 1, 131072] is past the device's limits "
        "[2147483647, 65535, 65535], and a kernel launched in clusters of [1, 1, 8] cannot be "
        "re-gridded\n"
    )


def test_cluster_split_past_the_grid_limits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A batch of 16384 bf16 GEMMs split over clusters of 8: "tile.kernel @bmm_0: the grid
    [131072, 1, 1] must be whole clusters of [1, 1, 8]", the verifier's complaint about a grid
    the tile pass had made."""
    text = batched_matmul(16384, 64, 64, 512, "bf16")
    status, err = compile_cli(
        tmp_path, text, "fuse,tile{splitk=8 splitk_mode=cluster},to-cuda", capsys, "-t", "cuda"
    )
    assert status == 1
    assert err.startswith(
        "tinyopt: error: tile: kernel @bmm_0: its grid [1, 1, 131072] is past the device's limits"
    ), err
    assert "clusters of [1, 1, 8] cannot be re-gridded" in err


def test_a_grid_past_the_limits_without_clusters_is_still_regridded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for cluster in ("", "cluster [1, 1, 1] "):
        text = kernel(grid="[1, 1, 131072]", cluster=cluster)
        status, err = compile_cli(tmp_path, text, "to-cuda", capsys, "-t", "cuda")
        assert status == 0, err


STEP = Path(__file__).resolve().parent / "lit" / "check_assoc" / "positive.mlir"
MATMUL = """func.func @f(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %c = graph.matmul %a, %b : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  func.return %c : tensor<64x64xf32>
}
"""


@pytest.mark.parametrize(
    "command",
    [
        # ValueError: expected non-negative integer (numpy), a traceback
        ["check-assoc", str(STEP)],
        # "no CUDA GPU available" here; a traceback on a GPU, after compiling
        ["run", "F"],
        ["tune", "F"],
        ["explain", "F", "--knob", "bm=64"],
    ],
)
def test_negative_seed(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "f.mlir").write_text(MATMUL)
    argv = [str(tmp_path / "f.mlir") if a == "F" else a for a in command]
    assert main([*argv, "--seed", "-1"]) == 1
    assert capsys.readouterr().err == "tinyopt: error: --seed must be at least 0, got -1\n"


@pytest.mark.parametrize(
    ("text", "passes", "message"),
    [
        # "no loop kernel @None after '' (kernels: none)"
        (MATMUL, "", "'' leaves no loop kernel to change (fuse lowers graph functions to loop"),
        (MATMUL, "decompose", "'decompose' leaves no loop kernel to change (fuse lowers"),
        (
            "func.func @f() {\n  func.return\n}\n",
            "fuse",
            "'fuse' leaves no loop kernel to change\n",
        ),
    ],
)
def test_explain_without_kernels(
    text: str, passes: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "f.mlir").write_text(text)
    assert main(["explain", str(tmp_path / "f.mlir"), "-p", passes, "--knob", "bm=64"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"tinyopt: error: {message}"), err
    assert "@None" not in err


@pytest.mark.parametrize(
    "command",
    [["run", "F"], ["tune", "F"], ["explain", "F", "--knob", "bm=64"]],
)
def test_an_empty_function_name(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--func ''` said "the module has no function" of a module holding @f."""
    (tmp_path / "f.mlir").write_text(MATMUL)
    argv = [str(tmp_path / "f.mlir") if a == "F" else a for a in command]
    assert main([*argv, "--func", ""]) == 1
    assert capsys.readouterr().err == 'tinyopt: error: no function @""\n'
