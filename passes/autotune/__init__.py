"""Autotuning: search the `tile` knobs of each kernel, measure candidates, cache the best."""
