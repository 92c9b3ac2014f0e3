"""The attention wing of the tile rules: flash attention on mma.sync and on wgmma."""
