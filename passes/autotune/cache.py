"""The tuning cache: the best measured knobs per loop kernel, GPU model and tinyopt source.

An sqlite file whose location, keys and safety under concurrent tuners docs/tuning.md ("The
tuning cache") describes. The `apply-tuned` pass (`apply_tuned.py`) is the compiler's only reader.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

from xdsl.dialects.builtin import StringAttr

from tinyopt.dialects import loop, tile
from tinyopt.passes.tile.knobs import KNOB, Knobs, check
from tinyopt.source_hash import source_hash

Config = dict[str, int | str]

SQLITE_BUSY = 5  # the primary result code of `database is locked`

SCHEMA = """
CREATE TABLE IF NOT EXISTS tuned (
    kernel TEXT NOT NULL,
    gpu TEXT NOT NULL,
    version TEXT NOT NULL,
    config TEXT NOT NULL,
    ms REAL NOT NULL,
    default_ms REAL,
    trials INTEGER,
    method TEXT,
    created REAL,
    PRIMARY KEY (kernel, gpu, version)
)
"""


def db_path() -> Path | None:
    """Returns where the cache lives, or None when `TINYOPT_TUNING_DB=off` disables it."""
    configured = os.environ.get("TINYOPT_TUNING_DB")
    if configured == "off":
        return None
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "tinyopt" / "tuning.sqlite"


def tinyopt_version() -> str:
    """Returns the version part of every key: the hash of tinyopt's source files (any change to
    the compiler re-tunes; the version string stays 0.1.0 while the code changes)."""
    return source_hash()


@functools.cache
def _device_name() -> str | None:
    from tinyopt.backends.cuda.nvrtc import gpu_available

    if not gpu_available():
        return None
    from cuda.core import Device

    return Device().name


def gpu_model() -> str | None:
    """Returns the GPU model tuned results are looked up for: `$TINYOPT_GPU` when set, else the
    current GPU's name, else None (then `apply-tuned` looks nothing up)."""
    return os.environ.get("TINYOPT_GPU") or _device_name()


def kernel_key(kernel: loop.KernelOp) -> str:
    """Returns the sha256 of the kernel's printed IR with its symbol and value names erased,
    and without its `plan` and `tuned` attributes (what the compiler attached, not the kernel)."""
    clone = kernel.clone()
    clone.sym_name = StringAttr("kernel")
    for attached in (tile.PLAN, tile.TUNED):
        clone.attributes.pop(attached, None)
    for op in clone.walk():
        args = (arg for region in op.regions for block in region.blocks for arg in block.args)
        for value in (*op.results, *args):
            value.name_hint = None
    return hashlib.sha256(str(clone).encode()).hexdigest()


def load_config(text: str) -> Config:
    """Parses a stored configuration; raises ValueError if it is no valid set of knobs."""
    config = json.loads(text)
    if not isinstance(config, dict) or not set(config) <= set(KNOB):
        raise ValueError(f"not a knob configuration: {text[:80]!r}")
    for name, value in config.items():
        if not isinstance(value, type(KNOB[name].default)):
            raise ValueError(f"knob {name} has a {type(value).__name__} value")
    check(Knobs(**config))
    return config


@dataclass(frozen=True)
class Entry:
    """A tuned result: the knobs, their time, the default's time, and how it was found."""

    config: Config
    ms: float
    default_ms: float | None
    trials: int
    method: str


class TuningCache:
    """The sqlite store of tuned configurations."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = self._open()
        except sqlite3.OperationalError:
            raise
        except sqlite3.DatabaseError:
            path.replace(path.with_name(f"{path.name}.corrupt-{int(time.time())}"))
            self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        """Connects and creates the table. Another process creating the same file at the same
        moment makes sqlite answer `database is locked` at once (its busy timeout does not cover
        the switch to WAL): that is retried for up to a minute, never taken for a corrupt file."""
        deadline = time.monotonic() + 60
        while True:
            db = sqlite3.connect(self.path, timeout=60, isolation_level=None)
            try:
                db.execute("PRAGMA journal_mode=WAL")
                db.execute(SCHEMA)
                return db
            except sqlite3.OperationalError as error:
                db.close()
                if error.sqlite_errorcode & 0xFF != SQLITE_BUSY or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
            except sqlite3.DatabaseError:
                db.close()
                raise

    def close(self) -> None:
        """Closes the connection."""
        self._db.close()

    def __enter__(self) -> TuningCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def lookup(self, kernel: str, gpu: str, version: str | None = None) -> Entry | None:
        """Returns the entry for a kernel key on a GPU model, discarding one that is corrupt."""
        version = version or tinyopt_version()
        row = self._db.execute(
            "SELECT config, ms, default_ms, trials, method FROM tuned "
            "WHERE kernel = ? AND gpu = ? AND version = ?",
            (kernel, gpu, version),
        ).fetchone()
        if row is None:
            return None
        try:
            return Entry(load_config(row[0]), float(row[1]), row[2], int(row[3] or 0), row[4])
        except (ValueError, TypeError):
            self.discard(kernel, gpu, version)
            return None

    def configs(self, gpu: str, version: str | None = None) -> list[list[str]]:
        """Returns every stored (kernel, configuration) of a GPU model, sorted: all that
        `apply-tuned` may read for it (the build cache keys builds by them)."""
        rows = self._db.execute(
            "SELECT kernel, config FROM tuned WHERE gpu = ? AND version = ? ORDER BY kernel",
            (gpu, version or tinyopt_version()),
        ).fetchall()
        return [list(row) for row in rows]

    def store(self, kernel: str, gpu: str, entry: Entry, version: str | None = None) -> bool:
        """Records an entry unless a faster one is stored; returns whether it was written."""
        row = (kernel, gpu, version or tinyopt_version(), json.dumps(entry.config, sort_keys=True))
        self._db.execute("BEGIN IMMEDIATE")
        try:
            cursor = self._db.execute(
                "INSERT INTO tuned VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (kernel, gpu, version) DO UPDATE SET config = excluded.config, "
                "ms = excluded.ms, default_ms = excluded.default_ms, trials = excluded.trials, "
                "method = excluded.method, created = excluded.created "
                "WHERE excluded.ms < tuned.ms",
                (*row, entry.ms, entry.default_ms, entry.trials, entry.method, time.time()),
            )
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return cursor.rowcount > 0

    def discard(self, kernel: str, gpu: str, version: str | None = None) -> None:
        """Deletes a kernel's entry (it failed to load or to lower)."""
        self._db.execute(
            "DELETE FROM tuned WHERE kernel = ? AND gpu = ? AND version = ?",
            (kernel, gpu, version or tinyopt_version()),
        )
