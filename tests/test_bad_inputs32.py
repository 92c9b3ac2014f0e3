"""Bad inputs found by the thirty-second session's hunt (CLI, Python API), each refused now.

- a hexadecimal float with a leading minus (`-0x3F800000`) was read as the integer it spells
  (-1065353216.0), in a dense constant and in a scalar attribute; MLIR refuses it;
- a scalar float attribute past its type's range (`eps = 1.0e39 : f32`) became +inf silently,
  where the same value in a dense constant is refused;
- a `dense<"0x...">` byte string of the wrong length was kept: a ValueError traceback at the
  first unpack, or compiled as given when nothing unpacked it;
- `tinyopt.compiler.parse` / `lower` lacked the command line's input checks: text nested past
  `MAX_NESTING` was a RecursionError, a dense constant too large to hold a MemoryError, a
  leading byte-order mark a parse error; `apply_pipeline(None, ...)` an AttributeError;
- a string literal whose escapes are not UTF-8 (`@"\\E9t\\E9"`) was a UnicodeDecodeError, which
  the command line reported as "FILE: not UTF-8 text" of a file that is;
- with `--split-input-file`, the chunks before a failing one were printed (exit status 1).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import lit_fork
import pytest
from xdsl.utils.exceptions import ParseError

from tinyopt.compiler import apply_pipeline, lower, parse

TINYOPT = str(Path(sys.executable).parent / "tinyopt")


def tinyopt() -> str:
    """The `tinyopt` to run: a client of a server that has imported tinyopt (tests/lit_fork.py,
    one a worker; the process forked for each command has its own exit status and output),
    which saves each command's 0.45 s of imports; the real script where it cannot run."""
    folder = lit_fork.shared()
    return str(Path(folder) / "tinyopt") if folder is not None else TINYOPT


RMS = """func.func @f(%x: tensor<2x4xf32>, %w: tensor<4xf32>) -> tensor<2x4xf32> {
  %y = graph.rms_norm %x, %w {eps = EPS} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
"""

ADD = """func.func @f(%x: tensor<N>) -> tensor<N> {
  %c = graph.constant dense<VALUE> : tensor<N>
  %y = graph.add %x, %c : tensor<N>
  func.return %y : tensor<N>
}
"""


def _add(value: str, type_: str = "2xf32") -> str:
    return ADD.replace("VALUE", value).replace("N", type_)


CASES = {
    "negative hex element": (
        _add("[-0x3F800000, 0x3F800000]"),
        "in.mlir:2:30: error: hexadecimal float literal should not have a leading minus",
    ),
    "negative hex splat f16": (
        _add("-0x3C00", "2xf16"),
        "in.mlir:2:29: error: hexadecimal float literal should not have a leading minus",
    ),
    "negative hex attribute": (
        RMS.replace("EPS", "-0x3F800000 : f32"),
        "in.mlir:2:37: error: hexadecimal float literal should not have a leading minus",
    ),
    "attribute past f32": (
        RMS.replace("EPS", "1.0e39 : f32"),
        "in.mlir:2:37: error: 1.0e39 is out of range for f32",
    ),
    "byte string too long": (
        _add('"0x0000803F0000803F00"'),
        "in.mlir:2:28: error: dense byte string has 9 bytes: a tensor<2xf32> takes 8",
    ),
    "string escapes not UTF-8": (
        _add("1.0").replace("@f", '@"\\E9t\\E9"'),
        "in.mlir:1:12: error: string literal escapes are not UTF-8 text: byte 0xe9",
    ),
    "byte string between one element and two": (
        _add('"0x0000803F00"', "1xf32"),
        "in.mlir:2:28: error: dense byte string has 5 bytes: a tensor<1xf32> takes 4",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_cli_diagnostic(tmp_path: Path, case: str) -> None:
    text, message = CASES[case]
    (tmp_path / "in.mlir").write_text(text)
    out = tmp_path / "out.cu"
    result = subprocess.run(
        [tinyopt(), "in.mlir", "-p", "decompose,fuse,tile,to-cuda", "-o", str(out)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith(message), result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists()


@pytest.mark.parametrize("case", CASES)
def test_python_api_parse_error(case: str) -> None:
    text, message = CASES[case]
    with pytest.raises(ParseError, match=message.split("error: ")[1].split(":")[0]):
        lower(text, "decompose,fuse")


def test_hex_elements_and_attributes_still_read_as_bits() -> None:
    program, _ = lower(_add("[0x3F800000, 0xFF800000]"), "fuse")
    constant = next(op for op in program.walk() if op.name == "graph.constant")
    assert constant.value.get_values() == (1.0, float("-inf"))  # type: ignore[attr-defined]
    program, _ = lower(RMS.replace("EPS", "0x3F800000 : f32"), "decompose,fuse")
    norm = next(op for op in program.walk() if op.name == "graph.rms_norm")
    assert norm.eps.value.data == 1.0  # type: ignore[attr-defined]
    program, _ = lower(_add('"0x0000803F"', "3xf32"), "fuse")  # a splat's one element
    constant = next(op for op in program.walk() if op.name == "graph.constant")
    assert constant.value.get_values() == (1.0, 1.0, 1.0)  # type: ignore[attr-defined]


def test_python_api_refuses_deep_text() -> None:
    text = "func.func @f(%x: " + "tensor<" * 300 + "f32" + ">" * 300 + ") {\n  func.return\n}"
    with pytest.raises(ParseError, match="nested more than 100 levels deep"):
        parse(text)


def test_python_api_refuses_a_constant_past_memory() -> None:
    text = _add("1.0", "4611686018427387904xf32")
    with pytest.raises(ParseError, match="this dense constant does not fit in memory"):
        parse(text)


def test_python_api_skips_a_byte_order_mark() -> None:
    _, lowered = lower("\ufeff" + _add("1.0"), "fuse")
    assert "loop.kernel" in str(lowered)


def test_apply_pipeline_refuses_what_is_not_a_module() -> None:
    with pytest.raises(TypeError, match="apply_pipeline takes a parsed ModuleOp"):
        apply_pipeline(None, "fuse")  # type: ignore[arg-type]


SPLIT = """func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.relu %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// -----
func.func @g(%x: tensor<4xf32>, %s: f32) -> tensor<4xf32> {
  func.return %x : tensor<4xf32>
}
"""


def test_split_input_file_prints_nothing_when_a_chunk_fails(tmp_path: Path) -> None:
    """The chunks before a failing one were on stdout, with exit status 1."""
    (tmp_path / "in.mlir").write_text(SPLIT)
    result = subprocess.run(
        [tinyopt(), "in.mlir", "--split-input-file", "-p", "fuse,tile,to-cuda"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert result.stderr.startswith("tinyopt: error: fuse: @g argument 1 of type f32")
    assert result.stdout == ""
    good = SPLIT.split("// -----")[0]
    (tmp_path / "in.mlir").write_text(f"{good}// -----\n{good.replace('@f', '@g')}")
    result = subprocess.run(
        [tinyopt(), "in.mlir", "--split-input-file", "-p", "fuse"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("loop.kernel @") == 2 and "// -----" in result.stdout
