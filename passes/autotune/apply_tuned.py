"""The `apply-tuned` pass: the tuning cache's knobs attached to the loop kernels it has tuned.

The only pass that reads the tuning cache (`cache.py`): for each `loop.kernel` without a
`tuned` attribute it looks the kernel's structural key up for this GPU model and, where the
cache holds an entry, attaches its knobs as `#tile.knobs<...>` (`tile.TUNED`). `plan` and
`tile` then take a tuned value for every knob their own options leave at its default
(`planner.kernel_knobs`). A pipeline without `apply-tuned` is untuned: its output never depends
on the cache, the environment or the GPU.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from tinyopt.dialects import loop, tile
from tinyopt.passes.autotune.cache import TuningCache, db_path, gpu_model, kernel_key
from tinyopt.passes.tile.knobs import Knobs
from tinyopt.passes.tile.planner import kernel_knobs, plan_kernels
from tinyopt.passes.tile.target import H200


@dataclass(frozen=True)
class ApplyTunedPass(ModulePass):
    """Attaches to each `loop.kernel` the knobs the tuning cache holds for it on this GPU model
    (`#tile.knobs`, read by `plan` and `tile`); an entry whose knobs no longer plan is deleted.

    The cache is `$TINYOPT_TUNING_DB` (`off`: none), else `~/.cache/tinyopt/tuning.sqlite`; the
    GPU model is `$TINYOPT_GPU`, else the current GPU's name. Without either, or when the cache
    cannot be read, the kernels are left untuned (docs/tuning.md)."""

    name = "apply-tuned"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        path = db_path()
        if path is None or not path.exists() or (gpu := gpu_model()) is None:
            return
        kernels = [(k, kernel_key(k)) for k in loop.kernels(op) if tile.TUNED not in k.attributes]
        distinct: dict[str, loop.KernelOp] = {}
        for kernel, key in kernels:
            distinct.setdefault(key, kernel)
        found: dict[str, tile.KnobsAttr] = {}
        try:
            with TuningCache(path) as cache:
                for key, kernel in distinct.items():
                    entry = cache.lookup(key, gpu)
                    if entry is None:
                        continue
                    knobs = tile.KnobsAttr(entry.config)
                    trial = kernel.clone()
                    trial.attributes.pop(tile.PLAN, None)
                    trial.attributes[tile.TUNED] = knobs
                    try:
                        plan_kernels(ModuleOp([trial]), trial, kernel_knobs(trial, Knobs()), H200)
                    except DiagnosticException:  # stale: the rules changed since it was tuned
                        cache.discard(key, gpu)
                        continue
                    found[key] = knobs
        except sqlite3.Error:
            return  # an unreadable cache tunes nothing
        for kernel, key in kernels:
            if key in found:
                kernel.attributes[tile.TUNED] = found[key]
