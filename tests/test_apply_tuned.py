"""The `apply-tuned` pass is the only reader of the tuning cache: a pipeline without it never
imports the tuner or sqlite and is byte-identical whatever the cache holds; with it, a kernel
the cache holds is planned and emitted with its tuned knobs."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tinyopt.compiler import apply_pipeline, lower, parse
from tinyopt.dialects import loop, tile
from tinyopt.passes.autotune.cache import Entry, TuningCache, kernel_key

ROOT = Path(__file__).parent.parent
MATMUL_RELU = (ROOT / "examples" / "matmul_relu.mlir").read_text()
GPU = "Test GPU"
TUNED = {"bm": 64, "bn": 32}
"""Not the heuristic's tile for this kernel (bm = 32, bn = 64)."""


def loop_kernel() -> loop.KernelOp:
    (kernel,) = loop.kernels(apply_pipeline(parse(MATMUL_RELU), "fuse"))
    return kernel


def cuda(pipeline: str) -> str:
    return str(lower(MATMUL_RELU, pipeline)[1])


def plan_of(pipeline: str) -> tile.PlanAttr:
    (kernel,) = loop.kernels(lower(MATMUL_RELU, pipeline)[1])
    plan = kernel.attributes[tile.PLAN]
    assert isinstance(plan, tile.PlanAttr)
    return plan


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A cache holding `TUNED` for the matmul_relu kernel on `GPU`, which is the GPU model."""
    path = tmp_path / "tuning.sqlite"
    with TuningCache(path) as cache:
        cache.store(kernel_key(loop_kernel()), GPU, Entry(TUNED, 1.0, 2.0, 10, "mcts"))
    monkeypatch.setenv("TINYOPT_TUNING_DB", str(path))
    monkeypatch.setenv("TINYOPT_GPU", GPU)
    return path


def test_planning_without_apply_tuned_imports_neither_the_tuner_nor_sqlite() -> None:
    script = (
        "import sys; from pathlib import Path; from tinyopt.compiler import lower;"
        f"lower(Path({str(ROOT / 'examples' / 'matmul_relu.mlir')!r}).read_text(),"
        " 'fuse,plan,tile,to-cuda');"
        "print(sorted(m for m in sys.modules"
        " if m == 'sqlite3' or m.startswith('tinyopt.passes.autotune')))"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_pipeline_without_apply_tuned_ignores_the_cache(
    db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_cache = cuda("fuse,tile,to-cuda")

    def no_database(*args: object, **kwargs: object) -> sqlite3.Connection:
        raise AssertionError("the cache was opened")

    monkeypatch.setattr(sqlite3, "connect", no_database)
    assert cuda("fuse,tile,to-cuda") == with_cache
    monkeypatch.setenv("TINYOPT_TUNING_DB", "off")
    assert cuda("fuse,tile,to-cuda") == with_cache
    assert plan_of("fuse,plan").values["bm"] == 32


def test_apply_tuned_emits_the_tuned_kernel(db: Path) -> None:
    (kernel,) = loop.kernels(lower(MATMUL_RELU, "fuse,apply-tuned")[1])
    assert kernel.attributes[tile.TUNED] == tile.KnobsAttr(TUNED)
    plan = plan_of("fuse,apply-tuned,plan")
    assert (plan.values["bm"], plan.values["bn"]) == (64, 32)
    tuned = cuda("fuse,apply-tuned,tile,to-cuda")
    assert tuned != cuda("fuse,tile,to-cuda")
    assert tuned == cuda("fuse,tile{bm=64 bn=32},to-cuda")
    # an option off its default overrides the tuned value, the others stay tuned
    assert plan_of("fuse,apply-tuned,plan{bm=128}").values["bn"] == 32


def test_kernels_already_tuned_are_left_alone(db: Path) -> None:
    module = apply_pipeline(parse(MATMUL_RELU), "fuse")
    (kernel,) = loop.kernels(module)
    kernel.attributes[tile.TUNED] = tile.KnobsAttr({"bm": 128})
    apply_pipeline(module, "apply-tuned")
    assert kernel.attributes[tile.TUNED] == tile.KnobsAttr({"bm": 128})


def test_the_key_ignores_the_plan_and_the_tuned_knobs(db: Path) -> None:
    (planned,) = loop.kernels(lower(MATMUL_RELU, "fuse,apply-tuned,plan")[1])
    assert tile.TUNED in planned.attributes and tile.PLAN in planned.attributes
    assert kernel_key(planned) == kernel_key(loop_kernel())


def test_without_a_cache_file_nothing_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "absent" / "tuning.sqlite"
    monkeypatch.setenv("TINYOPT_TUNING_DB", str(path))
    monkeypatch.setenv("TINYOPT_GPU", GPU)
    assert cuda("fuse,apply-tuned,tile,to-cuda") == cuda("fuse,tile,to-cuda")
    assert not path.parent.exists()
