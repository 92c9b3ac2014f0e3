"""The GEMM wing of the tile rules: contractions on CUDA cores, mma.sync, TF32 and wgmma."""
