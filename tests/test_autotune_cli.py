"""`tinyopt tune` and `tinyopt explain` from the command line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lit_fork
import pytest
from conftest import requires_gpu

from tinyopt.backends.cuda.nvrtc import gpu_available
from tinyopt.cli import main

TINYOPT = str(Path(sys.executable).parent / "tinyopt")
RMSNORM = Path(__file__).parent.parent / "examples" / "rmsnorm.mlir"
SOFTMAX = """
func.func @softmax(%x: tensor<64x1024xf32>) -> tensor<64x1024xf32> {
  %y = graph.softmax %x {dim = 1 : i64} : tensor<64x1024xf32>
  func.return %y : tensor<64x1024xf32>
}
"""


def explain(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["explain", str(RMSNORM), *args]) == 0
    return capsys.readouterr().out


def test_explain_shows_the_cuda_diff(capsys: pytest.CaptureFixture[str]) -> None:
    out = explain(capsys, "--knob", "cache=0")
    assert out.startswith("--- tile{}\n+++ tile{cache=0}\n@@")
    assert "-    float v7[4][4];" in out  # the row cache goes away
    if gpu_available():
        assert "tile{}: " in out and "tile{cache=0}: " in out and "speedup: " in out
    else:
        assert out.rstrip().endswith(
            "note: no CUDA GPU, so the latency of each side was not measured"
        )


def test_explain_compares_two_configurations(capsys: pytest.CaptureFixture[str]) -> None:
    out = explain(capsys, "--base", "threads=128", "--knob", "threads=256 vec=2")
    assert "--- tile{threads=128}\n+++ tile{threads=256 vec=2}" in out
    assert '-extern "C" __global__ void __launch_bounds__(128)' in out
    assert '+extern "C" __global__ void __launch_bounds__(256)' in out


def test_explain_without_a_change(capsys: pytest.CaptureFixture[str]) -> None:
    assert "(the generated CUDA is the same with tile{})" in explain(capsys, "--knob", "cache=1")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--knob", "stages=9"], "tinyopt: error: tile: stages must be 0 (auto), 1 or 2, got 9"),
        (["--knob", "speed=11"], "tinyopt: error: expected knob=value with a knob of"),
        (["--knob", "threads=x"], "tinyopt: error: tile: threads takes an integer, got 'x'"),
        (["--knob", "vec=2", "--kernel", "nope"], "no loop kernel @nope after 'fuse'"),
        (["--knob", "rows=2", "--base", "threads=64"], "error: tile: rows=2 needs threads <= 32"),
        (["--knob", "vec=2", "-p", "fuse,tile"], "-p gives the passes before tile"),
        (["--knob", "vec=2", "-p", "fuse,plan"], "-p gives the passes before tile"),
    ],
)
def test_explain_bad_input(args: list[str], message: str) -> None:
    # forked from a server that has imported tinyopt (tests/lit_fork.py, one a worker): the
    # command's own exit status and output without its 0.45 s of imports
    folder = lit_fork.shared()
    script = str(Path(folder) / "tinyopt") if folder is not None else TINYOPT
    out = subprocess.run([script, "explain", str(RMSNORM), *args], capture_output=True, text=True)
    assert out.returncode == 1 and message in out.stderr and "Traceback" not in out.stderr


@pytest.mark.skipif(gpu_available(), reason="a GPU is present")
def test_tune_refuses_without_a_gpu() -> None:
    out = subprocess.run([TINYOPT, "tune", str(RMSNORM)], capture_output=True, text=True)
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert out.stderr.startswith("tinyopt: error: tinyopt tune measures candidates on a CUDA GPU")


@requires_gpu
def test_tune_then_compile_uses_the_tuned_kernels(tmp_path: Path) -> None:
    source = tmp_path / "softmax.mlir"
    source.write_text(SOFTMAX)
    env = {**os.environ, "TINYOPT_TUNING_DB": str(tmp_path / "tuning.sqlite")}
    tuned = subprocess.run(
        [TINYOPT, "tune", str(source), "--budget", "8", "--jobs", "4"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert tuned.returncode == 0, tuned.stderr
    (row,) = [line for line in tuned.stdout.splitlines() if line.startswith("| softmax_0 |")]
    assert row.startswith("| softmax_0 | row_reduction | 8 |"), tuned.stdout
    knobs = row.split("|")[-2].strip()
    knobs = "" if knobs == "(defaults)" else knobs
    expected = subprocess.run(
        [TINYOPT, str(source), "-p", f"fuse,tile{{{knobs}}},to-cuda"],
        capture_output=True,
        text=True,
        env={**env, "TINYOPT_TUNING_DB": "off"},
    )
    after = subprocess.run(
        [TINYOPT, str(source), "-p", "fuse,apply-tuned,tile,to-cuda"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert after.returncode == 0 and after.stdout == expected.stdout
