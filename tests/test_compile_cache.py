"""The build cache (build_cache.py): a warm build runs no pass; the key changes with the pipeline,
a knob, the tuning state, tinyopt's source and the GPU model; a damaged entry is rebuilt; two
processes writing the same entry at once both succeed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tinyopt import build_cache
from tinyopt.build_cache import build
from tinyopt.compile_timer import timing
from tinyopt.compiler import lower
from tinyopt.dialects import loop
from tinyopt.passes.autotune.cache import Entry, TuningCache, kernel_key

SOFTMAX = """func.func @softmax(%x: tensor<4x64xf32>) -> tensor<4x64xf32> {
  %y = graph.softmax %x {dim = 1 : i64} : tensor<4x64xf32>
  func.return %y : tensor<4x64xf32>
}
"""
PIPELINE = "decompose,fuse,apply-tuned,tile,to-cuda"
GPU = "NVIDIA Test GPU"


@pytest.fixture
def caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A build cache of the test's own, no tuning cache, a fixed GPU model."""
    monkeypatch.setenv("TINYOPT_BUILD_CACHE", str(tmp_path / "builds"))
    monkeypatch.setenv("TINYOPT_TUNING_DB", "off")
    monkeypatch.setenv("TINYOPT_GPU", GPU)
    return tmp_path


def built(pipeline: str = PIPELINE) -> bool:
    """Build SOFTMAX through the cache; return whether it came from the cache."""
    _, _, hit = build(
        lambda: {"text": SOFTMAX},
        pipeline,
        "sm_90a",
        lambda: (lower(SOFTMAX, pipeline)[1], {}, True),
    )
    return hit


def test_reused_across_processes(caches: Path) -> None:
    """The second process takes the lowered module and its cubins from the cache: no pass runs."""
    script = (
        "from tinyopt.compiler import compile_text\n"
        f"compile_text({SOFTMAX!r}, {PIPELINE!r}, 'sm_90a', time_passes=True)\n"
    )
    command = [sys.executable, "-c", script]
    runs = [subprocess.run(command, capture_output=True, text=True) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    assert "pass tile" in runs[0].stderr
    assert "pass " not in runs[1].stderr and "cache" in runs[1].stderr


@pytest.mark.parametrize(
    "change",
    ["pipeline", "knob", "tuning", "source", "gpu"],
)
def test_key_changes_rebuild(caches: Path, change: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert not built() and built()
    pipeline = PIPELINE
    if change == "pipeline":
        pipeline = "decompose,fuse,tile,to-cuda"
    elif change == "knob":
        pipeline = PIPELINE.replace("tile", "tile{threads=128}")
    elif change == "tuning":
        db = caches / "tuning.sqlite"
        monkeypatch.setenv("TINYOPT_TUNING_DB", str(db))
        with TuningCache(db) as cache:  # an empty database is no tuning state yet
            assert built()
            fused = lower(SOFTMAX, "decompose,fuse")[1]
            kernel = next(op for op in fused.walk() if isinstance(op, loop.KernelOp))
            cache.store(kernel_key(kernel), GPU, Entry({"threads": 512}, 1.0, 2.0, 8, "mcts"))
    elif change == "source":
        monkeypatch.setattr(build_cache, "source_hash", lambda: "edited")
    else:
        monkeypatch.setenv("TINYOPT_GPU", "NVIDIA Other GPU")
    assert not built(pipeline) and built(pipeline)


def test_corrupted_entry_is_rebuilt(caches: Path) -> None:
    assert not built()
    (entry,) = [p for p in (caches / "builds" / "entries").rglob("*") if p.is_file()]
    data = entry.read_bytes()
    entry.write_bytes(data[: len(data) // 2])  # cut short, as by a crash without the rename
    assert not built() and built()
    entry.write_bytes(b"garbage")
    assert not built() and built()


def test_damaged_bytes_fail_the_checksum(caches: Path) -> None:
    good = build_cache.Build("module {}", {"k": b"\x7fELF"}, {"function": "f"})
    data = bytearray(good.encode())
    data[-1] ^= 1
    with pytest.raises(ValueError):
        build_cache.Build.decode(bytes(data))
    assert build_cache.Build.decode(good.encode()) == good


def test_two_concurrent_writers(caches: Path) -> None:
    """Two processes build the same program at once into an empty cache; both succeed and the
    entry they leave is whole."""
    script = (
        "from tinyopt.compiler import compile_text\n"
        f"m = compile_text({SOFTMAX!r}, {PIPELINE!r}, 'sm_90a')\n"
        "print(sorted(m.kernels))\n"
    )
    writers = [
        subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(2)
    ]
    outputs = [w.communicate() for w in writers]
    assert all(w.returncode == 0 for w in writers), outputs
    assert outputs[0][0] == outputs[1][0]
    entries = [p for p in (caches / "builds" / "entries").rglob("*") if p.is_file()]
    assert len(entries) == 1
    assert built()


def test_off_switch(caches: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYOPT_BUILD_CACHE", "off")
    assert not built() and not built()
    assert not (caches / "builds").exists()


def test_torch_module_fingerprint() -> None:
    """What determines a capture: the module's attributes (eps), its parameters' shapes and
    the inputs' shapes; not the weights' values."""
    torch = pytest.importorskip("torch")
    from tinyopt.frontends.module_fingerprint import fingerprint

    x = torch.randn(2, 8)
    norm = torch.nn.LayerNorm(8)
    same = fingerprint(norm, [x])
    with torch.no_grad():
        norm.weight.add_(1.0)
    assert fingerprint(norm, [x]) == same
    assert fingerprint(torch.nn.LayerNorm(8, eps=1e-3), [x]) != same
    assert fingerprint(norm, [torch.randn(3, 8)]) != same
    assert fingerprint(torch.nn.LayerNorm(8).to(torch.bfloat16), [x]) != same


def test_torch_module_warm_build_takes_the_modules_weights(caches: Path) -> None:
    """A warm build of a torch module captures nothing and binds the module's own tensors."""
    torch = pytest.importorskip("torch")
    from tinyopt.frontends.compiled_model import build_kernels

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU()).eval()
    x = torch.randn(4, 16)
    _, name, weights = build_kernels(model, [x], "decompose,fuse,tile,to-cuda")
    with timing(True, report=False) as timer:
        _, warm_name, warm_weights = build_kernels(model, [x], "decompose,fuse,tile,to-cuda")
    assert timer is not None and "capture" not in timer.phases
    assert not any(phase.startswith("pass ") for phase in timer.phases)
    assert warm_name == name
    assert [w.data_ptr() for w in warm_weights] == [w.data_ptr() for w in weights]


def test_torch_module_is_traced_once_cold_and_never_warm(
    caches: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold build of a torch module runs torch.export once, a warm build never (compile
    time, issue 21: a second trace would cost as much again)."""
    torch = pytest.importorskip("torch")
    from tinyopt.frontends.compiled_model import build_kernels

    export, traces = torch.export.export, []

    def traced(*args: object, **kwargs: object) -> object:
        traces.append(args)
        return export(*args, **kwargs)

    monkeypatch.setattr(torch.export, "export", traced)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU()).eval()
    x = torch.randn(4, 16)
    build_kernels(model, [x], "decompose,fuse,tile,to-cuda")
    assert len(traces) == 1
    build_kernels(model, [x], "decompose,fuse,tile,to-cuda")
    assert len(traces) == 1
