"""The tuning cache: keys, reuse by the `apply-tuned` pass across processes, version
invalidation, corrupt entries and files, stale entries, concurrent writers."""

from __future__ import annotations

import multiprocessing
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tinyopt.compiler import apply_pipeline, parse
from tinyopt.dialects import loop
from tinyopt.passes.autotune import cache as tuning
from tinyopt.passes.autotune.cache import Entry, TuningCache, kernel_key

SOFTMAX = """
func.func @{name}(%x: tensor<16x256xf32>) -> tensor<16x256xf32> {{
  %y = graph.softmax %x {{dim = 1 : i64}} : tensor<16x256xf32>
  func.return %y : tensor<16x256xf32>
}}
"""
GPU = "Test GPU"


def softmax_key(name: str = "softmax") -> str:
    module = apply_pipeline(parse(SOFTMAX.format(name=name)), "fuse")
    return kernel_key(loop.kernels(module)[0])


def tiled(pipeline: str = "fuse,apply-tuned,tile,to-cuda") -> str:
    return str(apply_pipeline(parse(SOFTMAX.format(name="softmax")), pipeline))


@pytest.fixture
def db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "tuning.sqlite"
    monkeypatch.setenv("TINYOPT_TUNING_DB", str(path))
    monkeypatch.setenv("TINYOPT_GPU", GPU)
    return path


def store(path: Path, config: dict, ms: float = 1.0, version: str | None = None) -> None:
    with TuningCache(path) as cache:
        cache.store(softmax_key(), GPU, Entry(config, ms, 2.0, 10, "mcts"), version)


def test_key_is_structural() -> None:
    assert softmax_key("softmax") == softmax_key("other_name")
    wider = apply_pipeline(parse(SOFTMAX.format(name="s").replace("256", "512")), "fuse")
    assert kernel_key(loop.kernels(wider)[0]) != softmax_key()


def test_apply_tuned_uses_the_cache_and_options_override(db: Path) -> None:
    default = tiled()
    assert "__launch_bounds__(512)" not in default
    store(db, {"threads": 512, "vec": 2})
    assert "__launch_bounds__(512)" in tiled()
    assert "__launch_bounds__(512)" not in tiled("fuse,tile,to-cuda")  # untuned
    overridden = tiled("fuse,apply-tuned,tile{threads=128},to-cuda")
    assert "__launch_bounds__(128)" in overridden and "tinyopt_vec<float, 2>" in overridden


def test_no_gpu_model_means_no_lookup(db: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store(db, {"threads": 512})
    monkeypatch.delenv("TINYOPT_GPU")
    monkeypatch.setattr(tuning, "_device_name", lambda: None)
    assert "__launch_bounds__(512)" not in tiled()
    monkeypatch.setenv("TINYOPT_TUNING_DB", "off")
    monkeypatch.setenv("TINYOPT_GPU", GPU)
    assert "__launch_bounds__(512)" not in tiled()


def test_reuse_across_processes(db: Path) -> None:
    writer = (
        "import sys; sys.path.insert(0, 'tests');"
        "from test_autotune_cache import store, Path;"
        f"store(Path({str(db)!r}), {{'threads': 512}})"
    )
    subprocess.run([sys.executable, "-c", writer], check=True, cwd=Path(__file__).parent.parent)
    source = Path(db.parent / "softmax.mlir")
    source.write_text(SOFTMAX.format(name="softmax"))
    tinyopt = Path(sys.executable).parent / "tinyopt"
    out = subprocess.run(
        [str(tinyopt), str(source), "-p", "fuse,apply-tuned,tile,to-cuda"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert "__launch_bounds__(512)" in out.stdout


def test_new_version_invalidates(db: Path) -> None:
    store(db, {"threads": 512}, version="0.0.0-old")
    assert "__launch_bounds__(512)" not in tiled()
    with TuningCache(db) as cache:
        assert cache.lookup(softmax_key(), GPU, "0.0.0-old") is not None
        assert cache.lookup(softmax_key(), GPU) is None


@pytest.mark.parametrize(
    "config",
    ['{"threads": 512', '{"threads": 33}', '{"no_such_knob": 1}', '["threads"]', '{"mma": 3}'],
)
def test_corrupt_entry_is_discarded(db: Path, config: str) -> None:
    store(db, {"threads": 512})
    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE tuned SET config = ?", (config,))
    assert "__launch_bounds__(512)" not in tiled()
    with TuningCache(db) as cache:
        assert cache.lookup(softmax_key(), GPU) is None
    with sqlite3.connect(db) as raw:
        assert raw.execute("SELECT COUNT(*) FROM tuned").fetchone() == (0,)
    store(db, {"threads": 512})  # measured again, stored again
    assert "__launch_bounds__(512)" in tiled()


def test_entry_that_no_longer_lowers_is_discarded(db: Path) -> None:
    store(db, {"threads": 64, "rows": 2})  # in the knobs' domains, refused by the row rule
    assert tiled() == tiled("fuse,tile,to-cuda")
    with TuningCache(db) as cache:
        assert cache.lookup(softmax_key(), GPU) is None


def test_corrupt_file_is_moved_aside(db: Path) -> None:
    db.write_bytes(b"this is not an sqlite database" * 100)
    assert "__launch_bounds__(512)" not in tiled()
    store(db, {"threads": 512})
    assert "__launch_bounds__(512)" in tiled()
    assert list(db.parent.glob("tuning.sqlite.corrupt-*"))


def test_keeps_the_faster_entry(db: Path) -> None:
    store(db, {"threads": 512}, ms=1.0)
    store(db, {"threads": 128}, ms=3.0)
    with TuningCache(db) as cache:
        assert cache.lookup(softmax_key(), GPU).config == {"threads": 512}
    store(db, {"threads": 256}, ms=0.5)
    with TuningCache(db) as cache:
        assert cache.lookup(softmax_key(), GPU).config == {"threads": 256}


def _writer(path: str, worker: int) -> None:
    with TuningCache(Path(path)) as cache:
        for i in range(100):
            cache.store(
                f"kernel{i}",
                GPU,
                Entry({"threads": 32 << worker}, 10.0 - worker - i / 1000, None, 1, "test"),
            )


def test_two_concurrent_writers(tmp_path: Path) -> None:
    path = tmp_path / "tuning.sqlite"
    spawn = multiprocessing.get_context("spawn")
    writers = [spawn.Process(target=_writer, args=(str(path), w)) for w in (0, 1)]
    for w in writers:
        w.start()
    for w in writers:
        w.join(120)
        assert w.exitcode == 0
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        rows = raw.execute("SELECT kernel, config FROM tuned").fetchall()
    assert len(rows) == 100
    assert all(config == '{"threads": 64}' for _, config in rows)  # worker 1's times are lower


def _opener(directory: str, barrier: multiprocessing.synchronize.Barrier, rounds: int) -> None:
    for attempt in range(rounds):
        barrier.wait(60)
        with TuningCache(Path(directory) / str(attempt) / "tuning.sqlite") as cache:
            cache.store("kernel", GPU, Entry({"threads": 64}, 1.0, None, 1, "test"))


def test_processes_creating_the_same_file_at_once(tmp_path: Path) -> None:
    """Several tuners creating a new cache file at the same moment: sqlite answers `database is
    locked` to some of them at once; that must be waited out, never taken for a corrupt file (a
    file moved aside under another writer loses its entries or reads as malformed)."""
    spawn = multiprocessing.get_context("spawn")
    processes, rounds = 4, 20
    barrier = spawn.Barrier(processes)
    openers = [
        spawn.Process(target=_opener, args=(str(tmp_path), barrier, rounds))
        for _ in range(processes)
    ]
    for opener in openers:
        opener.start()
    for opener in openers:
        opener.join(120)
    assert [opener.exitcode for opener in openers] == [0] * processes
    assert not list(tmp_path.glob("*/*.corrupt-*"))
    for attempt in range(rounds):
        with sqlite3.connect(tmp_path / str(attempt) / "tuning.sqlite") as raw:
            assert raw.execute("SELECT count(*) FROM tuned").fetchone() == (1,)
