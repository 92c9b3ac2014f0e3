"""Docs that run (issue 22, item 5): every shell command and Python snippet in README.md and
docs/*.md is executed, and where a block shows output, the output is compared.

Blocks are the fenced (```) and indented (4 spaces, or 4 past a list item's text) code blocks.
Each is classified by its content:

- shell: its first line starts with a command (`tinyopt`, `python`, `pip`, `pytest`, `lit`,
  `xdsl-opt`, or `$ `). It runs under `bash -e -o pipefail` in a scratch copy of the repository
  (its tracked and untracked, not ignored, files), with the venv's bin first on PATH and a
  tuning cache of its own (`$TINYOPT_TUNING_DB` in the copy). In a block
  whose lines start with `$ `, those lines are the commands and the others their expected
  output. Install steps (`pip install`, `python -m venv`, activating a venv) are left out of
  the `&&` chain they appear in; a block of nothing else is skipped as an install. An optional
  argument shown as `[--option ...]` (a synopsis) is left out.
- python: a ```python block; it runs with the venv's interpreter in the same scratch copy (a
  CPU block as `python -c` in a process forked from one that has imported torch and tinyopt,
  tests/lit_fork.py's `PYTHON`).
- mlir (starts with `%`, `func.func`, `loop.`, `tile.`, ...) and text (formulas, diagrams,
  output formats): not run, only counted.

Expected output (stdout and stderr together) is compared line by line after stripping trailing
spaces: a line that starts
with `…` stands for any number of lines (an excerpt), and a `…` inside a line for any text.

Markers, an HTML comment on its own line before a block (blank lines between are allowed):

- `<!-- docs-run: gpu -->`: needs a CUDA GPU; runs only where one is present (otherwise counted
  as skipped, gpu). Unmarked blocks run with no GPU visible (`CUDA_VISIBLE_DEVICES=`), so
  they show the output the docs show for a CPU machine.
- `<!-- docs-run: slow -->`: takes minutes (the whole test suite, the benchmarks); runs only
  with `TINYOPT_DOCS_RUN_SLOW=1` (otherwise counted as skipped, slow).

Both may be combined (`<!-- docs-run: gpu slow -->`). No CPU block reads what another writes,
so they run side by side; GPU blocks run one after another in the docs' order. The test prints
(at the end of pytest's output) how many blocks ran and how many were skipped, by reason
(install, gpu, slow), and fails where
a block exits non-zero, its output differs from the shown output, or a marker is misplaced.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import lit_fork
import pytest

from tinyopt.backends.cuda.nvrtc import gpu_available

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

SHELL_WORDS = ("tinyopt", "python", "python3", "pip", "pytest", "lit", "xdsl-opt")
MLIR_STARTS = ("%", "func.func", "loop.", "tile.", "graph.", "module", "builtin.", "#", "^")
MARKER = re.compile(r"^\s*<!--\s*docs-run:\s*([a-z ]+?)\s*-->\s*$")
MARKS = {"gpu", "slow"}
LIST_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d+[.)])\s+")
INSTALL = re.compile(
    r"^\s*(?:python3? -m venv\b|\. \S*activate\b|source \S*activate\b|pip3? install\b)"
)
OPTIONAL_ARG = re.compile(r" \[-[^\[\]]*\]")
ELLIPSIS = "…"
BLOCK_TIMEOUT = 300  # seconds; a slow block (the whole suite) gets SLOW_TIMEOUT
SLOW_TIMEOUT = 3600
SLOW_ENV = "TINYOPT_DOCS_RUN_SLOW"
INNER_ENV = "TINYOPT_DOCS_RUN_INNER"


@dataclass
class Block:
    path: Path
    line: int  # 1-based line of the block's first line
    text: str
    info: str = ""  # a fenced block's info string
    marks: set[str] = field(default_factory=set)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO)}:{self.line}"

    @property
    def kind(self) -> str:
        first = self.text.lstrip().splitlines()[0] if self.text.strip() else ""
        if self.info == "python":
            return "python"
        if self.info == "mlir":
            return "mlir"
        if first.startswith("$ ") or first.split(" ", 1)[0] in SHELL_WORDS:
            return "shell"
        if first.startswith(MLIR_STARTS):
            return "mlir"
        return "text"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def extract_blocks(path: Path, text: str | None = None) -> list[Block]:
    """The fenced and indented code blocks of a markdown file, with their markers."""
    lines = (path.read_text() if text is None else text).splitlines()
    blocks: list[Block] = []
    pending: set[str] | None = None  # marks of a marker not yet given to a block
    list_indent: int | None = None  # indent of the text of the list item we are in
    prev_blank = True
    i = 0

    def take(block: Block) -> None:
        nonlocal pending
        block.marks = pending or set()
        pending = None
        blocks.append(block)

    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        fence = re.match(r"^(\s*)(```+|~~~+)\s*([\w-]*)", line)
        if fence:
            indent, ticks, info = len(fence.group(1)), fence.group(2), fence.group(3)
            body, j = [], i + 1
            while j < len(lines) and not lines[j].strip().startswith(ticks):
                body.append(lines[j][indent:] if _indent(lines[j]) >= indent else lines[j].lstrip())
                j += 1
            take(Block(path, i + 2, "\n".join(body) + "\n", info))
            i, prev_blank = j + 1, False
            continue
        marker = MARKER.match(line)
        if marker:
            words = set(marker.group(1).split())
            if not words <= MARKS or pending is not None:
                raise ValueError(f"{path}:{i + 1}: bad docs-run marker {stripped!r}")
            pending = words
            i += 1
            continue
        if not stripped:
            prev_blank = True
            i += 1
            continue
        base = 4 if list_indent is None else list_indent + 4
        if prev_blank and _indent(line) >= base:
            body, j = [], i
            while j < len(lines) and (not lines[j].strip() or _indent(lines[j]) >= base):
                body.append(lines[j][base:])
                j += 1
            while body and not body[-1].strip():
                body.pop()
            take(Block(path, i + 1, "\n".join(body) + "\n"))
            i, prev_blank = i + len(body), False
            continue
        if pending is not None:
            raise ValueError(f"{path}:{i + 1}: a docs-run marker must be followed by a code block")
        item = LIST_ITEM.match(line)
        if item:
            list_indent = len(item.group(0))
        elif prev_blank and _indent(line) == 0:
            list_indent = None
        prev_blank = False
        i += 1
    if pending is not None:
        raise ValueError(f"{path}: a docs-run marker at the end of the file")
    return blocks


def split_transcript(text: str) -> tuple[str, str | None]:
    """The commands of a shell block and the output it shows (None where it shows none)."""
    lines = text.splitlines()
    if not lines or not lines[0].startswith("$ "):
        return text, None
    commands = [line[2:] for line in lines if line.startswith("$ ")]
    output = [line for line in lines if not line.startswith("$ ")]
    return "\n".join(commands) + "\n", "\n".join(output) + "\n"


def runnable_commands(script: str) -> str:
    """The script without its install steps and without synopsis-only optional arguments."""
    kept = []
    for line in script.splitlines():
        parts = [p for p in line.split("&&") if not INSTALL.match(p)]
        line = "&&".join(parts).strip() if len(parts) != len(line.split("&&")) else line
        kept.append(OPTIONAL_ARG.sub("", line))
    return "\n".join(kept).strip() + "\n" if any(k.strip() for k in kept) else ""


def output_matches(expected: str, actual: str) -> str | None:
    """None where `actual` is `expected` with its elisions filled in, else why not."""
    want = [line.rstrip() for line in expected.rstrip("\n").splitlines()]
    got = [line.rstrip() for line in actual.rstrip("\n").splitlines()]

    def line_ok(pattern: str, line: str) -> bool:
        if ELLIPSIS not in pattern:
            return pattern == line
        regex = ".*".join(re.escape(part) for part in pattern.split(ELLIPSIS))
        return re.fullmatch(regex, line) is not None

    # Segments between whole-line elisions: the first is anchored at the start of the output,
    # the last at its end, the others found in order in between.
    segments: list[list[str]] = [[]]
    for line in want:
        if line.lstrip().startswith(ELLIPSIS):
            segments.append([])
        else:
            segments[-1].append(line)

    def at(segment: list[str], start: int) -> bool:
        return start + len(segment) <= len(got) and all(
            line_ok(p, got[start + k]) for k, p in enumerate(segment)
        )

    def fail(segment: list[str]) -> str:
        shown = "\n".join(segment) or "(end of output)"
        return f"shown output not found in order:\n{shown}\n--- actual output:\n{actual}"

    if len(segments) == 1:
        return None if len(got) == len(want) and at(want, 0) else fail(want)
    if not at(segments[0], 0):
        return fail(segments[0])
    pos = len(segments[0])
    for segment in segments[1:-1]:
        for start in range(pos, len(got) - len(segment) + 1):
            if at(segment, start):
                pos = start + len(segment)
                break
        else:
            return fail(segment)
    last = segments[-1]
    if len(got) - len(last) < pos or not at(last, len(got) - len(last)):
        return fail(last)
    return None


@dataclass
class Result:
    block: Block
    status: str  # "ran" or "skipped"
    reason: str = ""
    failure: str | None = None
    left_out_install: bool = False  # install steps were left out of the commands it ran


def _env(scratch: Path, gpu: bool, forks: Path | None = None) -> dict[str, str]:
    """The environment a block runs in; `forks`: a folder of tests/lit_fork.py's clients,
    put first on the PATH of CPU blocks (GPU blocks run the real scripts: the server must
    never fork a process that uses the GPU)."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    if forks is not None and not gpu:
        env["PATH"] = f"{forks}{os.pathsep}{env['PATH']}"
    env["TINYOPT_TUNING_DB"] = str(scratch / ".docs-run-tuning.sqlite")
    env[INNER_ENV] = "1"
    if not gpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def run_block(
    block: Block, scratch: Path, have_gpu: bool, slow: bool, forks: Path | None = None
) -> Result:
    kind = block.kind
    if kind in ("mlir", "text"):
        return Result(block, "not code", kind)
    if "gpu" in block.marks and not have_gpu:
        return Result(block, "skipped", "gpu")
    if "slow" in block.marks and not slow:
        return Result(block, "skipped", "slow")
    env = _env(scratch, "gpu" in block.marks, forks)
    timeout = SLOW_TIMEOUT if "slow" in block.marks else BLOCK_TIMEOUT
    expected, left_out = None, False
    if kind == "python":
        # A CPU block runs in a child of the server that has imported torch (lit_fork.PYTHON).
        forked = forks is not None and "gpu" not in block.marks
        cmd = [str(forks / lit_fork.PYTHON) if forked else sys.executable, "-c", block.text]
    else:
        script, expected = split_transcript(block.text)
        runnable = runnable_commands(script)
        if not runnable:
            return Result(block, "skipped", "install")
        left_out = any(
            INSTALL.match(part) for line in script.splitlines() for part in line.split("&&")
        )
        script = runnable
        cmd = ["bash", "-e", "-o", "pipefail", "-c", script]
    try:
        # A transcript shows stdout and stderr interleaved, as a terminal does.
        stderr = subprocess.STDOUT if expected is not None else subprocess.PIPE
        proc = subprocess.run(
            cmd,
            cwd=scratch,
            env=env,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return Result(block, "ran", failure=f"timed out after {timeout} s")
    failure = None
    if proc.returncode != 0:
        failure = (
            f"exit status {proc.returncode}\n--- stderr:\n{(proc.stderr or proc.stdout)[-4000:]}"
        )
    elif expected is not None:
        failure = output_matches(expected, proc.stdout)
    return Result(block, "ran", failure=failure, left_out_install=left_out)


def _scratch_copy(dest: Path) -> Path:
    """Copy the repository's files (git's tracked and untracked, not ignored, ones; outside a git
    checkout, everything but virtual environments and caches) into `dest`."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    if listed.returncode != 0:
        ignore = shutil.ignore_patterns(".git", ".venv", "venv", "__pycache__", "*.egg-info")
        shutil.copytree(REPO, dest, ignore=ignore, dirs_exist_ok=True)
        return dest
    for name in filter(None, listed.stdout.split("\0")):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def all_blocks() -> list[Block]:
    return [block for path in DOCS for block in extract_blocks(path)]


def test_docs_run(tmp_path, record_property):
    scratch = _scratch_copy(tmp_path / "repo")
    have_gpu = gpu_available()
    # A slow block runs the test suite, which holds this test: that inner run leaves them out.
    slow = os.environ.get(SLOW_ENV) == "1" and os.environ.get(INNER_ENV) != "1"
    blocks = all_blocks()
    # No CPU block reads what another writes, so they run side by side; the GPU blocks run one
    # after the other in the docs' order (`tinyopt tune`, then the pipeline reading its cache).
    gpu_blocks = [b for b in blocks if "gpu" in b.marks]
    chains = [[b] for b in blocks if "gpu" not in b.marks] + [gpu_blocks]

    # The CPU blocks' `tinyopt` commands fork from a process that has imported tinyopt
    # (tests/lit_fork.py, as the lit suite's do; TINYOPT_LIT_FORK=0 runs the real script).
    use_forks = os.environ.get("TINYOPT_LIT_FORK", "1") != "0"
    serving = lit_fork.Serving(capture=lit_fork.FRONTEND)
    with serving if use_forks else contextlib.nullcontext() as folder:
        forks = Path(folder) if folder is not None else None

        def run_chain(chain: list[Block]) -> list[Result]:
            return [run_block(b, scratch, have_gpu, slow, forks) for b in chain]

        with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
            results = [r for rs in pool.map(run_chain, chains) for r in rs]

    counts = Counter((r.status, r.reason) for r in results)
    ran = sum(n for (status, _), n in counts.items() if status == "ran")
    skipped = {reason: n for (status, reason), n in counts.items() if status == "skipped"}
    not_code = {reason: n for (status, reason), n in counts.items() if status == "not code"}
    partly = sum(r.left_out_install for r in results)
    summary = (
        f"docs-run: {len(blocks)} blocks in {len(DOCS)} files: ran {ran} ({partly} without "
        f"their install steps), skipped "
        f"{sum(skipped.values())} ({', '.join(f'{n} {r}' for r, n in sorted(skipped.items()))})"
        f", not code {sum(not_code.values())} "
        f"({', '.join(f'{n} {r}' for r, n in sorted(not_code.items()))})"
    )
    record_property("summary", summary)  # printed at the end of the run (tests/conftest.py)
    failures = [f"{r.block.where}: {r.failure}" for r in results if r.failure]
    assert not failures, summary + "\n\n" + "\n\n".join(failures)
    # Only installs, GPU-only and slow blocks may be skipped.
    assert set(skipped) <= {"install", "gpu", "slow"}, summary


# The machinery itself: a wrong doc must fail, not pass unnoticed.


def test_extract_blocks_markers_and_lists():
    md = (
        "Intro\n\n    tinyopt a.mlir\n\n1. item:\n\n       python -c 'print(1)'\n"
        "   continued\n\n<!-- docs-run: gpu slow -->\n\n```python\nprint(2)\n```\n\n"
        "- a list item\n  whose text\n     goes on (not a block)\n\nText.\n\n    %x = graph.exp\n"
    )
    blocks = extract_blocks(REPO / "README.md", md)
    assert [(b.kind, b.text, b.marks) for b in blocks] == [
        ("shell", "tinyopt a.mlir\n", set()),
        ("shell", "python -c 'print(1)'\n", set()),
        ("python", "print(2)\n", {"gpu", "slow"}),
        ("mlir", "%x = graph.exp\n", set()),
    ]
    with pytest.raises(ValueError, match="marker"):
        extract_blocks(REPO / "README.md", "<!-- docs-run: gpu -->\n\nText.\n")
    with pytest.raises(ValueError, match="marker"):
        extract_blocks(REPO / "README.md", "<!-- docs-run: skip -->\n\n    tinyopt a\n")


def test_install_steps_and_synopses():
    line = "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && tinyopt x.mlir"
    assert runnable_commands(line) == "tinyopt x.mlir\n"
    assert runnable_commands("pip install -e '.[test,torch]'\n") == ""
    assert runnable_commands("tinyopt run a.mlir [--func NAME] [--seed N]\n") == (
        "tinyopt run a.mlir\n"
    )


def test_output_comparison():
    assert split_transcript("$ echo a\na\n") == ("echo a\n", "a\n")
    assert output_matches("a\nb\n", "a\nb\n") is None
    assert output_matches("a\nb\n", "a\nc\n") is not None
    assert output_matches("a\nb\n", "a\nb\nc\n") is not None  # no elision: all of it
    assert output_matches("a\n… more\nz\n", "a\nb\nc\nz\n") is None
    assert output_matches("a\n… more\nz\n", "a\nb\nc\nz\nextra\n") is not None
    assert output_matches("x = …;\n…\n", "x = 12;\ny\n") is None
    assert output_matches("b\n…\n", "a\nb\n") is not None  # the first line is anchored
    assert output_matches("a\n…\nc\n…\ne\n", "a\nb\nc\nd\ne\n") is None
    assert output_matches("a\n…\nd\n…\ne\n", "a\nb\nc\ne\n") is not None
