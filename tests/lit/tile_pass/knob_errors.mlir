// Knob values the tile pass rejects: each run fails with one line naming the knob.

// Out-of-domain knobs are rejected before any kernel is looked at.
// RUN: not tinyopt %s -p 'fuse,tile{threads=33}' 2>&1 | filecheck %s --check-prefix=THREADS
// THREADS-NOT: Traceback
// THREADS:     error: tile: threads must be a power of two in [32, 1024] (or 0 for auto), got 33
// THREADS-NOT: Traceback

// RUN: not tinyopt %s -p 'fuse,tile{rows=3}' 2>&1 | filecheck %s --check-prefix=ROWS3
// ROWS3: error: tile: rows must be a power of two in [1, 32] (or 0 for auto), got 3

// RUN: not tinyopt %s -p 'fuse,tile{cache=3}' 2>&1 | filecheck %s --check-prefix=CACHE
// CACHE: error: tile: cache must be 0, 1 or 2, got 3

// RUN: not tinyopt %s -p 'fuse,tile{schedule=rows}' 2>&1 | filecheck %s --check-prefix=SCHEDULE
// SCHEDULE: error: tile: schedule must be one of ('auto', 'sequential'), got 'rows'

// RUN: not tinyopt %s -p 'fuse,tile{pad=2}' 2>&1 | filecheck %s --check-prefix=PAD
// PAD: error: tile: pad must be a non-negative multiple of 4, got 2

// RUN: not tinyopt %s -p 'fuse,tile{store=shared}' 2>&1 | filecheck %s --check-prefix=STORE
// STORE: error: tile: store must be one of ('auto', 'direct', 'smem', 'tma'), got 'shared'

// A valid rows knob that does not divide the 6 rows of the softmax kernel.
// RUN: not tinyopt %s -p 'fuse,tile{rows=4}' 2>&1 | filecheck %s --check-prefix=ROWS
// ROWS-NOT: Traceback
// ROWS:     error: tile: rows=4 does not divide the 6 rows of the kernel
// ROWS-NOT: Traceback

// Several rows per block need one warp per row.
// RUN: not tinyopt %s -p 'fuse,tile{rows=2 threads=64}' 2>&1 | filecheck %s --check-prefix=WARP
// WARP: error: tile: rows=2 needs threads <= 32 (one warp per row), got threads=64

// 256x256 tiles with bk=64 need at least 4 * 64 * (260 + 260) = 133120 bytes of shared memory
// (times the pipeline stages). The 2048x2048 output is big enough for the default 8x8
// register tile, so the block has 32*32 threads and the shared memory check is the one that fails.
// RUN: not tinyopt %s -p 'fuse,tile{bm=256 bn=256 bk=64}' 2>&1 | filecheck %s --check-prefix=SMEM
// SMEM-NOT: Traceback
// SMEM:     error: tile: bm=256 bn=256 bk=64 {{(stages=[0-9]+ )?}}needs {{[0-9]+}} bytes of shared memory, more than the 49152 a block may declare statically
// SMEM-NOT: Traceback

// Block and register tiles that give a block too few or too many threads.
// RUN: not tinyopt %s -p 'fuse,tile{bm=16 bn=16 tm=4 tn=4}' 2>&1 | filecheck %s --check-prefix=FEW
// FEW: error: tile: (bm/tm)*(bn/tn) = 16 threads; a block needs 32 to 1024
// RUN: not tinyopt %s -p 'fuse,tile{bm=256 bn=256 tm=2 tn=2}' 2>&1 | filecheck %s --check-prefix=MANY
// MANY: error: tile: (bm/tm)*(bn/tn) = 16384 threads; a block needs 32 to 1024

func.func @mm(%x: tensor<2048x64xf32>, %w: tensor<64x2048xf32>) -> tensor<2048x2048xf32> {
  %y = graph.matmul %x, %w : (tensor<2048x64xf32>, tensor<64x2048xf32>) -> tensor<2048x2048xf32>
  func.return %y : tensor<2048x2048xf32>
}

func.func @sm(%x: tensor<6x128xf32>) -> tensor<6x128xf32> {
  %y = graph.softmax %x {dim = 1 : i64} : tensor<6x128xf32>
  func.return %y : tensor<6x128xf32>
}
