"""Shared pytest configuration: markers for tests that need hardware."""

import pytest

from tinyopt.backends.cuda.nvrtc import gpu_available

requires_gpu = pytest.mark.skipif(not gpu_available(), reason="no CUDA GPU")
