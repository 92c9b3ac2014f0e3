"""Shared pytest configuration: markers for tests that need hardware."""

import os

import pytest

from tinyopt.backends.cuda.nvrtc import gpu_available

# No test may read a user's tuning cache through apply-tuned (tests that need one set their own).
os.environ["TINYOPT_TUNING_DB"] = "off"

requires_gpu = pytest.mark.skipif(not gpu_available(), reason="no CUDA GPU")
