"""Tests of backends/check.py: the arrays the runtime takes for each element type."""

import numpy as np
import pytest
from xdsl.dialects.builtin import bf16, f16, f32, i64

from tinyopt.backends.check import from_storage, to_storage


@pytest.mark.parametrize("element", [f32, f16, bf16, i64], ids=str)
def test_storage_keeps_the_shape_of_rank_0_and_strided_arrays(element) -> None:
    # A rank-0 input once came back as shape (1,), which the runtime refused (fuzzer, H200).
    for array in (np.array(1.5), np.arange(12.0).reshape(3, 4).T):
        stored = to_storage(array, element)
        assert isinstance(stored, np.ndarray), "a numpy scalar is refused at launch"
        assert stored.shape == array.shape and stored.flags.c_contiguous
        if element != i64:
            np.testing.assert_allclose(from_storage(stored, element), array)
