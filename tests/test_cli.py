"""The `tinyopt` command run as a subprocess: help, round trips, CUDA output and bad input."""

import re
import subprocess
import sys
from pathlib import Path

import lit_fork
import pytest
from conftest import requires_gpu

from tinyopt.backends.cuda.nvrtc import gpu_available

ROOT = Path(__file__).resolve().parents[1]
TINYOPT = str(Path(sys.executable).parent / "tinyopt")

LOOP_MODULE = """\
builtin.module {
  loop.kernel @double_0(%x: memref<64x128xf32>, %out: memref<64x128xf32>) {
    loop.parallel (%i, %j) in [64, 128] {
      %v = memref.load %x[%i, %j] : memref<64x128xf32>
      %d = arith.addf %v, %v : f32
      memref.store %d, %out[%i, %j] : memref<64x128xf32>
    }
  }
  func.func @double(%x: memref<64x128xf32>) -> memref<64x128xf32> {
    %o = memref.alloc() : memref<64x128xf32>
    loop.launch @double_0(%x, %o) : memref<64x128xf32>, memref<64x128xf32>
    func.return %o : memref<64x128xf32>
  }
}
"""

EMPTY = "builtin.module {}\n"

SOFTMAX = """\
func.func @softmax(%x: tensor<64x256x{t}>) -> tensor<64x256x{t}> {{
  %y = graph.softmax %x {{dim = 1 : i64}} : tensor<64x256x{t}>
  func.return %y : tensor<64x256x{t}>
}}
"""


def tinyopt(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run the tinyopt command and capture its output: a process forked from a server that has
    imported tinyopt, and torch for `tinyopt capture` (tests/lit_fork.py, one server of each
    kind a worker; the real script where the server cannot run). That saves the 0.45 s of
    imports of each command, 2.2 s more a capture. Exit status, stdout and stderr are the
    process's own, as with the script; `test_dash_reads_stdin` runs the script itself."""
    folder = lit_fork.shared(lit_fork.FRONTEND if args[:1] == ("capture",) else ())
    script = str(Path(folder) / "tinyopt") if folder is not None else TINYOPT
    return subprocess.run([script, *args], cwd=cwd, capture_output=True, text=True)


def test_help_lists_tinyopt_passes() -> None:
    result = tinyopt("--help")
    assert result.returncode == 0
    epilog = result.stdout.split("tinyopt passes:")[1]
    for name in ("decompose", "fuse", "tile", "to-cuda"):
        assert f"  {name} " in epilog
    assert "unavailable" not in epilog


def test_round_trip(tmp_path: Path) -> None:
    """Printed IR parses back to the same text, also through the generic form."""
    source = tmp_path / "double.mlir"
    source.write_text(LOOP_MODULE)
    printed = tinyopt(str(source))
    assert printed.returncode == 0, printed.stderr
    generic = tinyopt(str(source), "--print-op-generic")
    (tmp_path / "generic.mlir").write_text(generic.stdout)
    assert tinyopt(str(tmp_path / "generic.mlir")).stdout == printed.stdout


def test_pipeline_ending_in_to_cuda_prints_cuda(tmp_path: Path) -> None:
    """After to-cuda the default output is CUDA C; `-t mlir` still gives the IR."""
    source = tmp_path / "double.mlir"
    source.write_text(LOOP_MODULE)
    cuda = tinyopt(str(source), "-p", "tile,to-cuda")
    assert cuda.returncode == 0, cuda.stderr
    assert cuda.stdout.startswith("// kernel @double_0 grid (")
    assert "__global__" in cuda.stdout
    ir = tinyopt(str(source), "-p", "tile,to-cuda", "-t", "mlir")
    assert "tile.cuda_kernel @double_0" in ir.stdout


def test_prefix_of_pipeline_prints_ir() -> None:
    result = tinyopt("examples/softmax.mlir", "-p", "decompose,fuse,tile")
    assert result.returncode == 0, result.stderr
    assert "tile.kernel @softmax_0" in result.stdout


BAD_INPUTS = {
    "malformed": ("builtin.module {\n  %x = arith.constant 1 :\n}\n", [], "bad.mlir:3:1: error: "),
    "verifier": (
        "func.func @f() {\n  %a = tile.alloc : memref<4xf32>\n  func.return\n}\n",
        [],
        "bad.mlir:2:3: error: tile.alloc: memory space must be 3",
    ),
    "unknown pass": (EMPTY, ["-p", "fuse,nope"], "tinyopt: error: unknown pass 'nope'"),
    "unknown option": (EMPTY, ["-p", "fuse{nope=1}"], "unknown option 'nope' for pass 'fuse'"),
    "bad option value": (
        EMPTY,
        ["-p", "tile{bm=wide}"],
        "tinyopt: error: option 'bm' of pass 'tile' takes an integer",
    ),
    "pipeline syntax": (EMPTY, ["-p", "fuse{"], "tinyopt: error: invalid pass pipeline 'fuse{'"),
    "not lowerable": (
        LOOP_MODULE,
        ["-p", "to-cuda"],
        "tinyopt: error: to-cuda: cannot print 'loop.kernel' @double_0",
    ),
    "unsupported dtype": (
        SOFTMAX.format(t="f64"),
        ["-p", "decompose,fuse"],
        "element type must be f32, f16 or bf16, got f64",
    ),
    "no kernels for cuda target": (EMPTY, ["-t", "cuda"], "nothing to compile"),
    "graph input without fuse": (
        SOFTMAX.format(t="f32"),
        ["-p", "tile,to-cuda"],
        "tile: the module still has 'graph.softmax' in @softmax: fuse lowers graph functions",
    ),
    "passes out of order": (
        SOFTMAX.format(t="f32"),
        ["-p", "to-cuda,fuse"],
        "to-cuda: the module still has 'graph.softmax' in @softmax: fuse lowers graph functions",
    ),
    "graph input to the cuda target": (
        SOFTMAX.format(t="f32"),
        ["-t", "cuda"],
        "still has the graph function @softmax: fuse lowers it to loop kernels, before tile",
    ),
    "loop input without tile": (
        LOOP_MODULE,
        ["-t", "cuda"],
        "has loop.kernel @double_0: run tile and to-cuda on it",
    ),
}


@pytest.mark.parametrize("case", BAD_INPUTS)
def test_bad_input_is_a_diagnostic(tmp_path: Path, case: str) -> None:
    """Bad input: exit status 1, a diagnostic on stderr, nothing on stdout, no traceback."""
    text, args, message = BAD_INPUTS[case]
    (tmp_path / "bad.mlir").write_text(text)
    result = tinyopt("bad.mlir", *args, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert_one_diagnostic(result.stderr)


def assert_one_diagnostic(stderr: str) -> None:
    """The first line is `FILE:LINE:COL: error: ...` or `tinyopt: error: ...`, followed at most
    by the source line and a caret (no IR dump)."""
    lines = stderr.splitlines()
    assert re.match(r"(\S+:\d+:\d+|tinyopt): error: ", lines[0]), stderr
    assert len(lines) <= 3, stderr


def test_help_lists_subcommands() -> None:
    result = tinyopt("--help")
    assert result.returncode == 0
    assert "tinyopt {run,capture,tune,explain,check-assoc} ..." in result.stdout
    listed = result.stdout.split("subcommands")[1].split("tinyopt passes:")[0]
    for name in ("run", "capture", "tune", "explain", "check-assoc"):
        assert f"\n  {name} " in listed


def test_time_passes_go_to_stderr(tmp_path: Path) -> None:
    """`--time-passes` (and `--print-between-passes`) write to stderr, the CUDA to stdout."""
    (tmp_path / "softmax.mlir").write_text(SOFTMAX.format(t="f32"))
    args = ["softmax.mlir", "-p", "fuse,tile,to-cuda"]
    plain = tinyopt(*args, cwd=tmp_path)
    timed = tinyopt(*args, "--time-passes", "--print-between-passes", cwd=tmp_path)
    assert timed.returncode == 0, timed.stderr
    assert timed.stdout == plain.stdout
    assert "Pass fuse took " in timed.stderr and "IR after fuse:" in timed.stderr


def test_capture_with_wrong_input_shape_is_one_line(tmp_path: Path) -> None:
    """A shape torch.export cannot trace is one diagnostic, without torch's log of the failed
    trace (19 lines before)."""
    pytest.importorskip("torch")
    (tmp_path / "model.py").write_text("import torch\n\nlinear = torch.nn.Linear(16, 8)\n")
    result = tinyopt("capture", "model.py:linear", "--inputs", "2x15xf32", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr.startswith("tinyopt: error: torch.export cannot trace"), result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr


def test_capture_refusal_names_the_users_line(tmp_path: Path) -> None:
    """An op refused inside torch's decomposition of a module's op (nn.MaxUnpool2d at integer
    indices given as an input: its decomposition adds them unbounded) is refused at the user's
    line that calls the module, not at torch's source, and the error names the op decomposed."""
    pytest.importorskip("torch")
    (tmp_path / "model.py").write_text(
        "import torch\n\n\nclass M(torch.nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.unpool = torch.nn.MaxUnpool2d(2)\n\n"
        "    def forward(self, x, i):\n        return self.unpool(x, i)\n"
    )
    result = tinyopt("capture", "model.py:M", "--inputs", "1x2x3x3xf32,1x2x3x3xi64", cwd=tmp_path)
    assert result.returncode == 1
    assert "in torch's decomposition of aten.max_unpool2d\n" in result.stderr, result.stderr
    assert 'model.py", line 10, in forward)' in result.stderr, result.stderr


@pytest.mark.parametrize("path", ["missing.mlir", "module.txt"])
def test_unreadable_input_is_an_error(tmp_path: Path, path: str) -> None:
    (tmp_path / "module.txt").write_text("builtin.module {}\n")
    result = tinyopt(path, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("tinyopt: error: ")
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(gpu_available(), reason="checks the message shown without a GPU")
def test_run_names_a_bad_pipeline_before_the_gpu() -> None:
    """`run` applies the pipeline before it looks for a GPU: a bad knob is named on any
    machine."""
    result = tinyopt("run", "examples/softmax.mlir", "-p", "fuse,tile{bm=3},to-cuda")
    assert result.returncode == 1
    assert "bm must be a power of two" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.skipif(gpu_available(), reason="checks the message shown without a GPU")
def test_run_without_gpu() -> None:
    result = tinyopt("run", "examples/softmax.mlir")
    assert result.returncode == 1
    assert result.stdout == ""
    assert result.stderr == "tinyopt: error: no CUDA GPU available\n"


@requires_gpu
@pytest.mark.parametrize("dtype", ["f32", "bf16"])
def test_run_checks_against_reference(tmp_path: Path, dtype: str) -> None:
    (tmp_path / "softmax.mlir").write_text(SOFTMAX.format(t=dtype))
    result = tinyopt("run", "softmax.mlir", "--bench", "--seed", "3", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].startswith("max rel error: ")
    assert lines[1].startswith("median time: ") and lines[1].endswith(" ms")
    assert lines[2].startswith("effective bandwidth: ") and lines[2].endswith(" GB/s")


@requires_gpu
def test_run_unknown_function(tmp_path: Path) -> None:
    (tmp_path / "softmax.mlir").write_text(SOFTMAX.format(t="f32"))
    result = tinyopt("run", "softmax.mlir", "--func", "nope", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == "tinyopt: error: no function @nope\n"


def test_output_through_a_link_replaces_the_file_it_names(tmp_path: Path) -> None:
    """`-o` writes `FILE.partial` and renames it: through a symbolic link, onto the file the
    link names, the link kept."""
    source = tmp_path / "double.mlir"
    source.write_text(LOOP_MODULE)
    (tmp_path / "real.mlir").write_text("old\n")
    (tmp_path / "link.mlir").symlink_to("real.mlir")
    result = tinyopt(str(source), "-o", "link.mlir", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "link.mlir").is_symlink()
    assert "loop.kernel @double_0" in (tmp_path / "real.mlir").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["double.mlir", "link.mlir", "real.mlir"]


def test_output_to_a_device_writes_into_it() -> None:
    """A target that is no regular file (/dev/null) is written directly, never replaced."""
    source = ROOT / "examples" / "softmax.mlir"
    result = tinyopt(str(source), "-p", "fuse", "-o", "/dev/null")
    assert result.returncode == 0, result.stderr
    assert Path("/dev/null").is_char_device()


@pytest.mark.parametrize(
    ("target", "message"),
    [("missing/out.mlir", "-o missing/out.mlir: no such directory"), (".", "-o .: is a directory")],
)
def test_output_to_a_missing_folder_or_a_folder_is_named(
    tmp_path: Path, target: str, message: str
) -> None:
    source = tmp_path / "double.mlir"
    source.write_text(LOOP_MODULE)
    result = tinyopt(str(source), "-o", target, cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == f"tinyopt: error: {message}\n"


def test_only_the_output_targets_tinyopt_produces_are_offered(tmp_path: Path) -> None:
    """xDSL's assembly, LLVM and other targets expect dialects tinyopt never produces: they
    were tracebacks or empty output; `-t` offers mlir and cuda."""
    source = tmp_path / "double.mlir"
    source.write_text(LOOP_MODULE)
    result = tinyopt(str(source), "-t", "x86-asm")
    assert result.returncode == 2
    assert "invalid choice: 'x86-asm' (choose from cuda, mlir)" in result.stderr
    assert "Traceback" not in result.stderr


def test_capture_of_control_flow_on_values_is_one_line_at_the_users_line(tmp_path: Path) -> None:
    """torch.export prints the graph traced so far and a page of advice when a branch reads a
    tensor's value: tinyopt says what failed and at which line, in one line."""
    pytest.importorskip("torch")
    (tmp_path / "model.py").write_text(
        "import torch\n\n\nclass M(torch.nn.Module):\n    def forward(self, x):\n"
        "        if x.sum() > 0:\n            return x * 2\n        return x\n"
    )
    result = tinyopt("capture", "model.py:M", "--inputs", "4xf32", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr.startswith("tinyopt: error: torch.export cannot trace M: Could not ")
    assert 'model.py", line 6, in forward if x.sum() > 0:)' in result.stderr
    assert len(result.stderr.splitlines()) == 1, result.stderr


def test_capture_of_a_file_that_exits_says_so(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text("import sys\n\nsys.exit(3)\n")
    result = tinyopt("capture", "model.py:M", cwd=tmp_path)
    assert result.returncode == 1
    assert result.stderr == "tinyopt: error: model.py called sys.exit(3) while being loaded\n"


def test_dash_reads_stdin() -> None:
    result = subprocess.run(
        [TINYOPT, "-"], input=EMPTY, capture_output=True, text=True, cwd=ROOT, check=False
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("builtin.module {")


def test_run_names_a_missing_file_before_the_gpu() -> None:
    result = tinyopt("run", "missing.mlir")
    assert result.returncode == 1
    assert result.stderr == (
        "tinyopt: error: [Errno 2] No such file or directory: 'missing.mlir'\n"
    )
