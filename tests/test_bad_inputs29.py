"""Bad inputs of the twenty-ninth session's hunt: each was a raw xDSL message, a misleading or
missing diagnostic, or a refusal of a good value; now a diagnostic naming the problem.

The Python API (`compiler.lower`, `apply_pipeline`) checks a pipeline as the CLI does
(`compiler.check_pipeline`): a `PipelineError`, both a `DiagnosticException` and a
`ValueError`, with the CLI's message. No GPU needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.cli import main
from tinyopt.compiler import PipelineError, lower

MATMUL = """func.func @f(%a: tensor<64x64xf32>, %b: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %c = graph.matmul %a, %b : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  func.return %c : tensor<64x64xf32>
}
"""

BAD_PIPELINES = {
    # a word-valued knob given a number: xDSL's "Incompatible types: given (3,), expected
    # <class 'str'>" in Python
    "fuse,tile{align=3}": "option 'align' of pass 'tile' takes a word (its default: auto), got 3; "
    "align must be one of ('auto', 'on', 'off')",
    "fuse,tile{swap=1}": "option 'swap' of pass 'tile' takes a word (its default: auto), got 1; "
    "swap must be one of ('auto', 'on', 'off')",
    "fuse,plan{skinny=0}": "option 'skinny' of pass 'plan' takes a word (its default: auto), "
    "got 0; skinny must be one of ('auto', 'on', 'off')",
    "fuse,tile{bm=wide}": "option 'bm' of pass 'tile' takes an integer, got wide; bm must be a "
    "power of two in [16, 256] (or 0 for auto)",
    # an option without a value: "Incompatible types: given (), expected <class 'int'>" in the
    # CLI too
    "fuse,tile{bm}": "option 'bm' of pass 'tile' takes an integer, got no value; bm must be a "
    "power of two in [16, 256] (or 0 for auto)",
    "fuse{debug}": "option 'debug' of pass 'fuse' takes true or false, got no value",
    # a quoted number: "takes an integer, got 64"
    'fuse,tile{bm="64"}': "option 'bm' of pass 'tile' takes an integer, got \"64\"",
    "fuse,to-cuda{pdl=yes}": "option 'pdl' of pass 'to-cuda' takes an integer, got yes",
    "fuse,frobnicate": "unknown pass 'frobnicate' (see `tinyopt --help` for the passes)",
    "fuse,tile{nope=1}": "unknown option 'nope' for pass 'tile' (options: schedule, threads,",
    "decompose{x=1}": "unknown option 'x' for pass 'decompose' (options: none)",
    "fuse,tile{bm=64 bm=32}": "option 'bm' given twice for pass 'tile'",
}


@pytest.mark.parametrize("pipeline", BAD_PIPELINES)
def test_python_api_names_the_option(pipeline: str) -> None:
    """`lower` raises a DiagnosticException (and, as before, a ValueError) with the message the
    CLI prints."""
    with pytest.raises(DiagnosticException) as refused:
        lower(MATMUL, pipeline)
    assert isinstance(refused.value, PipelineError) and isinstance(refused.value, ValueError)
    assert str(refused.value).startswith(BAD_PIPELINES[pipeline])


@pytest.mark.parametrize("pipeline", BAD_PIPELINES)
def test_cli_gives_the_same_message(
    pipeline: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "f.mlir").write_text(MATMUL)
    assert main([str(tmp_path / "f.mlir"), "-p", pipeline]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"tinyopt: error: {BAD_PIPELINES[pipeline]}"), err
    assert "Traceback" not in err and "Incompatible types" not in err


def test_python_api_refuses_what_is_not_text() -> None:
    """`lower(None)` was `TypeError: object of type 'NoneType' has no len()` from the parser,
    `lower(text, None)` "'NoneType' object is not subscriptable"."""
    with pytest.raises(TypeError, match=r"lower takes the program's MLIR text \(a str\), got"):
        lower(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="the pipeline must be a string such as 'fuse,tile'"):
        lower(MATMUL, None)  # type: ignore[arg-type]


def test_output_to_an_empty_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`-o ''` wrote the output next to the working directory, as `DIR.partial`, and then said
    `[Errno 21] Is a directory: '/.../DIR.partial' -> '/.../DIR'`."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "f.mlir").write_text(MATMUL)
    monkeypatch.chdir(work)
    assert main(["f.mlir", "-p", "fuse", "-o", ""]) == 1
    assert capsys.readouterr().err == "tinyopt: error: -o needs a file name, got ''\n"
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["f.mlir", "work"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.mlir"], "No such file or directory: 'missing.mlir'"),
        (["f.mlir", "-p", "fuse,,tile"], "invalid pass pipeline 'fuse,,tile'"),
        (["f.mlir", "-p", "fuse,tile"], "-p gives the passes before tile"),
        (["f.mlir", "--budget", "0"], "--budget must be at least 1, got 0"),
        (["f.mlir", "--time", "-5"], "--time must be positive, got -5.0"),
        (["f.mlir", "--timeout", "0"], "--timeout must be positive, got 0.0"),
        (["f.mlir", "--jobs", "0"], "--jobs must be at least 1, got 0"),
        (["f.mlir", "--batch", "-1"], "--batch must be at least 1, got -1"),
        (["f.mlir", "--patience", "0"], "--patience must be at least 1, got 0"),
    ],
)
def test_tune_checks_its_arguments_before_the_gpu(
    args: list[str],
    message: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without a GPU these all said `tinyopt tune measures candidates on a CUDA GPU and none is
    available`; with one, a negative budget or time started a search that measured nothing."""
    (tmp_path / "f.mlir").write_text(MATMUL)
    monkeypatch.chdir(tmp_path)
    assert main(["tune", *args]) == 1
    err = capsys.readouterr().err
    assert err.startswith("tinyopt: error: ") and message in err, err


def explain(tmp_path: Path, *args: str) -> list[str]:
    (tmp_path / "f.mlir").write_text(MATMUL)
    return ["explain", str(tmp_path / "f.mlir"), *args]


@pytest.mark.parametrize("value", ["0", "1", "auto"])
def test_explain_takes_persistent_as_a_number(
    value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`persistent` takes auto, 0 or 1; `--knob persistent=1` was refused with `persistent must
    be auto, 0 or 1, got '1'` (the string, as its default is a word)."""
    assert main(explain(tmp_path, "--knob", f"persistent={value}")) == 0
    assert "(the generated CUDA is the same with " in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        # printed "(the generated CUDA is the same with tile{})" and exited 0
        (["--knob", ""], "--knob names no knob (give the change, e.g. 'stages=1')"),
        (["--knob", " , "], "--knob names no knob"),
        # took the last of the two, silently
        (["--knob", "bm=64", "--base", "bm=32 bm=16"], "tile: bm is given twice in 'bm=32 bm=16'"),
        (["--knob", "bm=16,bn=16 bm=32"], "tile: bm is given twice"),
        # `'²'.isdigit()` is true: "invalid literal for int() with base 10: '²'"
        (["--knob", "bm=²"], "tile: bm takes an integer, got '²'"),
        (["--knob", "bm=--64"], "tile: bm takes an integer, got '--64'"),
        (["--knob", "persistent=2"], "tile: persistent must be auto, 0 or 1, got 2"),
    ],
)
def test_explain_bad_knobs(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(explain(tmp_path, *args)) == 1
    err = capsys.readouterr().err
    assert err == f"tinyopt: error: {message}\n" or err.startswith(f"tinyopt: error: {message}")


def test_explain_lets_the_change_override_the_base(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A knob in both `--base` and `--knob` is the change itself, not a repeat."""
    assert main(explain(tmp_path, "--base", "bm=32", "--knob", "bm=64")) == 0
    assert "--- tile{bm=32}\n+++ tile{bm=64}" in capsys.readouterr().out


NESTED = """builtin.module {
  builtin.module {
    func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
      %y = graph.relu %x : tensor<4xf32>
      func.return %y : tensor<4xf32>
    }
  }
}
"""

NO_RESULT = """func.func @f(%x: tensor<4xf32>) {
  %y = graph.relu %x : tensor<4xf32>
  func.return
}
"""


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # "tile: the module still has 'graph.relu': fuse lowers graph functions to loop kernels,
        # before tile and to-cuda (-p fuse,tile,to-cuda)", with fuse in the pipeline
        (
            NESTED,
            "tile: 'graph.relu' is inside a nested builtin.module, which fuse does not enter: "
            "put the graph functions at the top level of the module",
        ),
        # "the module has no graph function (a func.func with tensor arguments or results)",
        # of a module holding one
        (
            NO_RESULT,
            "nothing to compile: @f returns nothing, so it has no kernel (a graph function's "
            "kernels compute the values it returns)",
        ),
    ],
)
def test_programs_with_nothing_fuse_lowers(
    text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "f.mlir").write_text(text)
    assert main([str(tmp_path / "f.mlir"), "-p", "fuse,tile,to-cuda"]) == 1
    assert capsys.readouterr().err == f"tinyopt: error: {message}\n"
