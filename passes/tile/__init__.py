"""The `tile` pass and its schedule rules, one rule per file."""

from tinyopt.passes.tile.tile_pass import TilePass

__all__ = ["TilePass"]
