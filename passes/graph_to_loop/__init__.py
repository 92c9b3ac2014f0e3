"""Graph → loop: decompose composites, fuse primitives into `loop.kernel`s, and index helpers."""
