"""The bad-input corpus (tests/bad_inputs/): each case is a diagnostic, never a crash.

Every case runs `tinyopt` as a subprocess (forked from one that has imported tinyopt: the
`tinyopt` fixture) and must exit 1 with a message naming the op or
option and the problem: a first stderr line `FILE:LINE:COL: error: ...` or `tinyopt: error:
...`, at most the source line and a caret after it (no IR dump, no traceback), nothing on
stdout, and no output file left behind with `-o`. Hostile inputs that are valid programs
(`LOWERED`) must compile.
Tensors of 2^31 elements or more are not refused: kernels over them index with `long long`
(backends/cuda/printer.py), which is checked here by compiling them with NVRTC. A kernel whose
buffers are all smaller but whose index arithmetic is not (an intermediate larger than every
buffer) is refused by `fuse`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import lit_fork
import pytest
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.compiler import lower

CORPUS = Path(__file__).resolve().parent / "bad_inputs"
TINYOPT = str(Path(sys.executable).parent / "tinyopt")
FULL = "fuse,tile,to-cuda"

CASES: dict[str, tuple[str, str, str]] = {
    # id: (corpus file, pipeline, expected message)
    "truncated": (
        "truncated.mlir",
        FULL,
        "truncated.mlir:3:1: error: unexpected end of input: expected '}' to close the '{' at "
        "line 1, column 54",
    ),
    "truncated type": (
        "truncated_type.mlir",
        FULL,
        "truncated_type.mlir:2:32: error: unexpected end of input: expected shape type",
    ),
    "truncated attributes": (
        "truncated_attributes.mlir",
        FULL,
        "truncated_attributes.mlir:2:39: error: unexpected end of input: '}' expected",
    ),
    "empty file": ("empty.mlir", FULL, "empty.mlir:1:1: error: empty input: expected an operation"),
    "missing brace": ("missing_brace.mlir", FULL, "missing_brace.mlir:4:1: error: "),
    "unknown op": ("unknown_op.mlir", FULL, "Operation graph.frobnicate is not registered"),
    "unknown attribute": (
        "reduce_wrong_attr_name.mlir",
        FULL,
        "property 'dims' expected in operation 'graph.reduce_sum'",
    ),
    "mixed dtypes": ("add_mixed_dtypes.mlir", FULL, "used with type tensor<4x8xf32>"),
    "property of the wrong kind": (
        "transpose_perm_list.mlir",
        FULL,
        "transpose_perm_list.mlir:3:3: error: graph.transpose: [1 : i64, 0 : i64] should be of "
        "base attribute array",
    ),
    "matmul shape": (
        "matmul_result_shape.mlir",
        FULL,
        "graph.matmul: result shape must be 4x16, got 4x17",
    ),
    "reshape count": ("reshape_count.mlir", FULL, "graph.reshape: element counts differ"),
    "transpose perm": (
        "transpose_bad_perm.mlir",
        FULL,
        "graph.transpose: perm [0, 0] is not a permutation",
    ),
    "softmax dim": (
        "softmax_dim_out_of_range.mlir",
        FULL,
        "graph.softmax: dim 5 is out of range for rank 2",
    ),
    "i32 relu": ("i32_relu.mlir", FULL, "graph.relu: operand element type must be f32"),
    "zero dim": (
        "zero_dim.mlir",
        FULL,
        "graph.relu: operand shape 0x8 has a dimension of size 0 (empty tensors are not supported)",
    ),
    "zero dim reduced": (
        "empty_reduce.mlir",
        FULL,
        "graph.reduce_sum: operand shape 4x0 has a dimension of size 0",
    ),
    "gather float ids": (
        "gather_float_ids.mlir",
        FULL,
        "graph.gather: ids must be a ranked tensor of i32 or i64, got tensor<3xf32>",
    ),
    "argmax float result": (
        "argmax_float_result.mlir",
        FULL,
        "argmax_float_result.mlir:2:3: error: graph.argmax: result must be a tensor of i32 or i64 "
        "(the indices), got tensor<4xf32>",
    ),
    "argmax result shape": (
        "argmax_result_shape.mlir",
        FULL,
        "graph.argmax: result shape must be 4, got 4x8",
    ),
    "wide intermediate": (
        "wide_intermediate.mlir",
        FULL,
        "fuse: kernel @wide_0 computes an index up to 2147549183, past the 32-bit indices",
    ),
    "unknown pass": ("matmul_f32.mlir", "fuse,frobnicate", "unknown pass 'frobnicate'"),
    "unknown option": ("matmul_f32.mlir", "fuse,tile{nope=1}", "unknown option 'nope'"),
    "bad pipeline": ("matmul_f32.mlir", "fuse,tile{", "invalid pass pipeline 'fuse,tile{'"),
    "threads": (
        "matmul_f32.mlir",
        "fuse,tile{threads=100}",
        "tile: threads must be a power of two in [32, 1024] (or 0 for auto), got 100",
    ),
    "negative threads": ("matmul_f32.mlir", "fuse,tile{threads=-1}", "got -1"),
    "bm": ("matmul_f32.mlir", "fuse,tile{bm=512}", "tile: bm must be a power of two"),
    "schedule": ("matmul_f32.mlir", "fuse,tile{schedule=fast}", "tile: schedule must be one of"),
    "splitk": ("matmul_f32.mlir", "fuse,tile{splitk=3}", "tile: splitk must be a power of two"),
    "stages": ("matmul_f32.mlir", "fuse,tile{stages=5}", "tile: stages must be 0 (auto), 1 or 2"),
    "stages of another rule": (
        "matmul_f32.mlir",
        "fuse,tile{stages=4}",
        "tile: stages must be 0 (auto), 1 or 2, got 4 (taken with mma=wgmma or mma=sync or "
        "mma=3xtf32 or copy=cp_async or copy=tma)",
    ),
    "persistent": ("matmul_f32.mlir", "fuse,tile{persistent=2}", "persistent must be auto, 0 or 1"),
    "option type": (
        "matmul_f32.mlir",
        "fuse,tile{bm=wide}",
        "tinyopt: error: option 'bm' of pass 'tile' takes an integer, got wide",
    ),
    "option of a float value": (
        "matmul_f32.mlir",
        "fuse,tile{threads=1e3}",
        "option 'threads' of pass 'tile' takes an integer, got 1e3",
    ),
    "word option given a number": (
        "matmul_f32.mlir",
        "fuse,tile{align=3}",
        "tinyopt: error: option 'align' of pass 'tile' takes a word (its default: auto), got 3",
    ),
    "flag option": (
        "matmul_f32.mlir",
        "fuse{debug=1}",
        "option 'debug' of pass 'fuse' takes true or false, got 1",
    ),
    "option given twice": (
        "matmul_f32.mlir",
        "fuse,tile{threads=128 bm=64 threads=256}",
        "tinyopt: error: option 'threads' given twice for pass 'tile'",
    ),
    # issue 22: hostile inputs that were tracebacks or misleading messages
    "random bytes": (
        "random_bytes.mlir",
        FULL,
        "random_bytes.mlir:1:1: error: not UTF-8 text: byte 0xbf cannot be decoded",
    ),
    "deep regions": (
        "deep_regions.mlir",
        FULL,
        "deep_regions.mlir:52:14: error: nested more than 100 levels deep",
    ),
    "deep brackets": (
        "deep_brackets.mlir",
        FULL,
        "deep_brackets.mlir:3:122: error: nested more than 100 levels deep",
    ),
    "huge splat": (
        "huge_splat.mlir",
        FULL,
        "huge_splat.mlir:2:28: error: this dense constant does not fit in memory",
    ),
    "dynamic dim": (
        "dynamic_dim.mlir",
        FULL,
        "dynamic_dim.mlir:2:3: error: graph.relu: operand type tensor<?x4xf32> has a dynamic "
        "dimension",
    ),
    "dynamic signature": (
        "dynamic_signature.mlir",
        FULL,
        "tinyopt: error: fuse: @f argument 0 of type tensor<?x4xf32> has a dynamic dimension",
    ),
    "scalar argument": (
        "scalar_argument.mlir",
        FULL,
        "tinyopt: error: fuse: @f argument 1 of type f32 is not a tensor",
    ),
    "i8 signature": (
        "i8_signature.mlir",
        FULL,
        "tinyopt: error: fuse: @f argument 0 of type tensor<4xi8> has an element type tinyopt "
        "does not compile",
    ),
    "empty function": (
        "empty_function.mlir",
        FULL,
        "tinyopt: error: nothing to compile: the module has no graph function",
    ),
    # the twenty-fifth session's hunt: tracebacks before
    "branches": (
        "branches.mlir",
        FULL,
        "tinyopt: error: fuse: @f has 2 blocks: a graph function is one block of graph ops",
    ),
    "bounds of one value": (
        "bounds_one_value.mlir",
        "decompose,fuse",
        "tinyopt: error: fuse: @f argument 1: tinyopt.bounds must be array<i64: lo, hi>, got "
        "array<i64: 1>",
    ),
    "bounds not an array": (
        "bounds_not_an_array.mlir",
        "decompose,fuse",
        "tinyopt: error: fuse: @f argument 1: tinyopt.bounds must be array<i64: lo, hi>, got 5",
    ),
    "no SMs": ("matmul_f32.mlir", "fuse,tile{sms=0}", "tile: sms must be in [1, 1024], got 0"),
    "negative SMs": ("matmul_f32.mlir", "fuse,plan{sms=-1}", "plan: sms must be in [1, 1024]"),
    # hand-written loop kernels indexing past their buffers (dialects/access_range.py)
    "loop past its buffer": (
        "loop_past_its_buffer.mlir",
        "tile,to-cuda",
        "loop_past_its_buffer.mlir:2:3: error: loop.kernel @f_0: memref.load of %x "
        "(memref<4x8xf32>) takes index 1 over [0, 8], outside [0, 7]",
    ),
    "loop index shifted below 0": (
        "loop_shifted_index.mlir",
        "tile,to-cuda",
        "loop.kernel @f_0: memref.load of %x (memref<16xf32>) takes index 0 over [-1, 14], "
        "outside [0, 15]",
    ),
    # loop kernels whose #tile.plan a user (or another pipeline) wrote
    "plan attribute not a plan": (
        "plan_not_a_plan.mlir",
        "tile,to-cuda",
        "tinyopt: error: kernel @f_0: its plan attribute must be a #tile.plan<rule, knobs>, got "
        "5 : i64",
    ),
    "plan names no rule": (
        "plan_unknown_rule.mlir",
        "tile,to-cuda",
        "tinyopt: error: tile: kernel @f_0: its plan names no rule nosuch (rules: ",
    ),
    "plan names a rule that does not match": (
        "plan_rule_mismatch.mlir",
        "tile,to-cuda",
        "tinyopt: error: tile: kernel @f_0: rule contraction of its plan: not a contraction",
    ),
    "plan with a bad knob": (
        "plan_bad_knob.mlir",
        "tile,to-cuda",
        "tinyopt: error: tile: plan of kernel @f_0: knob threads must be a power of two in "
        "[32, 1024] (or 0 for auto), got 7",
    ),
    "graph op in a region, passes out of order": (
        "graph_op_in_a_region.mlir",
        "to-cuda",
        "tinyopt: error: to-cuda: the module still has 'graph.relu' in @f: fuse lowers graph "
        "functions",
    ),
    "graph input without fuse": (
        "matmul_f32.mlir",
        "tile,to-cuda",
        "tinyopt: error: tile: the module still has 'graph.matmul' in @f: fuse lowers graph "
        "functions to loop kernels, before tile and to-cuda (-p fuse,tile,to-cuda)",
    ),
    "byte-order mark inside": (
        "byte_order_mark_inside.mlir",
        FULL,
        "byte_order_mark_inside.mlir:2:3: error: unexpected character U+FEFF (a byte-order mark)",
    ),
    # found by the mutator (tests/bad_inputs/mutate.py, tests/test_mutated_inputs.py)
    "use before definition": (
        "use_before_def.mlir",
        FULL,
        "use_before_def.mlir:2:3: error: graph.add: %b is used before it is defined",
    ),
    "dimension beyond int64": (
        "dim_beyond_int64.mlir",
        FULL,
        "dim_beyond_int64.mlir:2:3: error: graph.relu: operand shape 8x18446744073709551616 has "
        "a dimension larger than 2^63 - 1",
    ),
    "dense ids out of range": (
        "dense_ids_out_of_range.mlir",
        FULL,
        "dense_ids_out_of_range.mlir:2:35: error: element 4294967296 is out of range for i32",
    ),
    "dense f16 overflow": (
        "dense_f16_overflow.mlir",
        FULL,
        "dense_f16_overflow.mlir:2:29: error: element 1.0e+40 is out of range for f16",
    ),
    "control character": (
        "control_character.mlir",
        FULL,
        "control_character.mlir:2:36: error: unexpected character U+001E (a control character)",
    ),
    "causal attention over 2^40 keys": (
        "huge_causal_attention.mlir",
        FULL,
        "tinyopt: error: tile: kernel @attention_0: its buffer "
        "memref<1099511627776x1099511627776xf32> has 1208925819614629174706176 elements, an "
        "index space beyond the 64-bit indices' limit 2^63 - 1",
    ),
    "huge splat beyond int64": (
        "huge_splat_beyond_int64.mlir",
        FULL,
        "huge_splat_beyond_int64.mlir:2:28: error: this dense constant does not fit in memory",
    ),
    "value without a name": (
        "value_without_name.mlir",
        FULL,
        "value_without_name.mlir:1:14: error: Expected suffix identifier after '%'",
    ),
}

LOWERED = ["byte_order_mark.mlir", "i32_identity.mlir", "long_chain.mlir", "big_rms_norm.mlir"]
"""Hostile inputs that are valid programs: a leading UTF-8 byte-order mark (skipped), an i32
tensor returned unchanged (a copy kernel), 500 chained elementwise ops (fuse walks them with a
stack: past about 330 it was a RecursionError), an rms_norm over 2^31 rows (decompose built
its eps as a constant of 2^31 elements: a MemoryError)."""

PASS_LEVEL = [
    "dynamic_signature.mlir",
    "scalar_argument.mlir",
    "i8_signature.mlir",
    "wide_intermediate.mlir",
]
"""Corpus files that parse and verify, and that a pass refuses."""


@pytest.fixture(scope="module")
def tinyopt() -> Iterator[Callable[..., subprocess.CompletedProcess[str]]]:
    """Runs the tinyopt command and captures its output: a process forked from a server that
    has imported tinyopt (tests/lit_fork.py; the real script where the server cannot run),
    which saves the 0.45 s of imports each of these 50 processes spent otherwise. Exit status,
    stdout, stderr and files written are the process's own, as with the script. The server is
    the worker's (`lit_fork.shared`), not started again for each batch of these tests."""
    folder = lit_fork.shared()
    script = str(Path(folder) / "tinyopt") if folder is not None else TINYOPT

    def run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([script, *args], cwd=cwd, capture_output=True, text=True)

    yield run


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_a_diagnostic(tmp_path: Path, case: str, tinyopt: Callable) -> None:
    """Non-zero exit, the expected message, no traceback, and no `-o` file left behind."""
    name, pipeline, message = CASES[case]
    (tmp_path / name).write_bytes((CORPUS / name).read_bytes())
    result = tinyopt(name, "-p", pipeline, "-o", "out.mlir", cwd=tmp_path)
    assert result.returncode == 1
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert_one_diagnostic(result.stderr)
    assert result.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == [name]


def assert_one_diagnostic(stderr: str) -> None:
    """The first line is `FILE:LINE:COL: error: ...` or `tinyopt: error: ...`, followed at most
    by the source line and a caret (no IR dump)."""
    lines = stderr.splitlines()
    assert re.match(r"(\S+:\d+:\d+|tinyopt): error: ", lines[0]), stderr
    assert len(lines) <= 3, stderr


@pytest.mark.parametrize("name", LOWERED)
def test_hostile_valid_input_lowers(tmp_path: Path, name: str, tinyopt: Callable) -> None:
    (tmp_path / name).write_bytes((CORPUS / name).read_bytes())
    result = tinyopt(name, "-p", FULL, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "__global__" in result.stdout


@pytest.mark.parametrize("name", PASS_LEVEL)
def test_passes_raise_only_diagnostics(name: str) -> None:
    """In process (as under plain xdsl-opt), the passes refuse these with xDSL's
    `DiagnosticException`, not an AssertionError or another exception."""
    with pytest.raises(DiagnosticException):
        lower((CORPUS / name).read_text(), FULL)


@pytest.mark.parametrize(
    "case",
    [
        "plan names no rule",
        "plan names a rule that does not match",
        "plan with a bad knob",
        "graph op in a region, passes out of order",
    ],
)
def test_tile_level_passes_refuse_in_process(case: str) -> None:
    """The same refusals in process (as another xDSL pipeline embedding the passes sees them):
    a `DiagnosticException` with the CLI's message."""
    name, pipeline, message = CASES[case]
    with pytest.raises(DiagnosticException) as refused:
        lower((CORPUS / name).read_text(), pipeline)
    assert message.removeprefix("tinyopt: error: ") in str(refused.value)


def test_chain_longer_than_the_recursion_limit_is_one_kernel() -> None:
    """3000 chained elementwise ops and their row sums lower to one kernel."""
    lines = [
        "func.func @chain(%x: tensor<4x8xf32>) -> tensor<4xf32> {",
        "  %v0 = graph.tanh %x : tensor<4x8xf32>",
        *(f"  %v{i} = graph.add %v{i - 1}, %x : tensor<4x8xf32>" for i in range(1, 3000)),
        "  %s = graph.reduce_sum %v2999 {dims = array<i64: 1>, keepdim = false} "
        ": tensor<4x8xf32> -> tensor<4xf32>",
        "  func.return %s : tensor<4xf32>",
        "}",
    ]
    _, module = lower("\n".join(lines), FULL)
    assert len([op for op in module.ops if op.name == "tile.cuda_kernel"]) == 1


def test_corpus_files_all_have_a_case() -> None:
    assert {p.name for p in CORPUS.glob("*.mlir")} == {f for f, _, _ in CASES.values()} | {
        "big_relu.mlir",
        "big_softmax.mlir",
        "big_matmul.mlir",
        *LOWERED,
    }


def test_output_file_written_on_success(tmp_path: Path, tinyopt: Callable) -> None:
    """With `-o`, a pipeline that succeeds writes the file (and nothing else)."""
    name = "matmul_f32.mlir"
    (tmp_path / name).write_text((CORPUS / name).read_text())
    result = tinyopt(name, "-p", FULL, "-o", "out.cu", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "__global__" in (tmp_path / "out.cu").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == [name, "out.cu"]


@pytest.mark.parametrize("name", ["big_relu.mlir", "big_softmax.mlir", "big_matmul.mlir"])
def test_large_tensors_index_with_64_bits(name: str) -> None:
    """Kernels over ≥ 2^31 elements use `long long` indices and compile with NVRTC."""
    _, module = lower((CORPUS / name).read_text(), FULL)
    sources = [op.properties["source"].data for op in module.ops if op.name == "tile.cuda_kernel"]
    assert sources and all("long long" in s and "int v" not in s for s in sources)
    compile_module(module, arch="sm_90a")


def test_index_range_just_below_2_31_is_accepted_with_32_bit_indices() -> None:
    """The largest index of the wide-intermediate case, one row short, stays in `int`."""
    text = (CORPUS / "wide_intermediate.mlir").read_text()
    narrow = text.replace("32769", "32768").replace("2147549184", "2147483648")
    _, module = lower(narrow, FULL)
    sources = [op.properties["source"].data for op in module.ops if op.name == "tile.cuda_kernel"]
    assert sources and all("long long" not in s for s in sources)
