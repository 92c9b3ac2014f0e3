"""Every test program and example runs on the GPU and matches the float64 numpy reference.

Outputs are poisoned (NaN bytes) before each run by the runtime, so an element a kernel
fails to write fails the check. Inputs are fresh random data for every seed.
"""

import pytest
from conftest import requires_gpu
from programs import CASES, EXAMPLE_CASES, Case

from tinyopt.backends.check import (
    device_inputs,
    errors_against_reference,
    graph_function,
    tolerance,
)
from tinyopt.backends.cuda.runtime import compile_module
from tinyopt.compiler import lower


@requires_gpu
@pytest.mark.parametrize("case", CASES + EXAMPLE_CASES, ids=lambda c: c.id)
def test_program_matches_reference_on_gpu(case: Case) -> None:
    program, module = lower(case.text, case.pipeline)
    graph = graph_function(program)
    run = compile_module(module, poison=True).function(graph.sym_name.data)
    for seed in (0, 1):
        inputs, arrays = device_inputs(graph, seed)
        outputs = run(*arrays)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        errors = errors_against_reference(graph, outputs, inputs)
        limit = case.tolerance or tolerance(graph)
        assert all(e <= limit for e in errors), f"seed {seed}: errors {errors}"
