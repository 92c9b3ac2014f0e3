"""Frontends: capture programs written elsewhere (PyTorch) into the graph dialect."""
