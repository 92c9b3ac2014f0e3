"""The `apply-tuned` pass, the only reader of the tuning cache: a pipeline without it is
untuned, its output never depending on the cache, the environment or the GPU (docs/tuning.md).
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
    Without a cache or a GPU model, or when the cache cannot be read, nothing is attached."""

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
