// RUN: tinyopt %s -p 'fuse,tile{copy=tma}' --split-input-file --verify-diagnostics | filecheck %s
// RUN: not tinyopt %s -p 'fuse,tile{copy=tma bm=128 bn=128 tm=4 tn=4}' 2>&1 | filecheck %s --check-prefix=WS
// CHECK-NOT: Traceback

// TMA copies raw bytes: a fused prologue (x + bias) has to go through registers.
// CHECK: tile: copy=tma needs each operand to be a plain f32 load (tma copies raw bytes: no prologue math, no conversion); the A side of kernel @mmb_0 is memref.load, memref.load, arith.addf (use copy=ld)

func.func @mmb(%x: tensor<64x64xf32>, %b: tensor<64xf32>, %w: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %bb = graph.broadcast %b : tensor<64xf32> -> tensor<64x64xf32>
  %a = graph.add %x, %bb : tensor<64x64xf32>
  %m = graph.matmul %a, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  func.return %m : tensor<64x64xf32>
}

// -----

// A tensor map's row stride must be a multiple of 16 bytes: K = 513 floats is not.
// CHECK: tile: copy=tma needs rows that are multiples of 16 bytes (tensor-map strides); the A side of kernel @odd_0 is memref<100x513xf32>, rows of 2052 bytes (use copy=cp_async or copy=ld)

func.func @odd(%x: tensor<100x513xf32>, %w: tensor<513x64xf32>) -> tensor<100x64xf32> {
  %m = graph.matmul %x, %w : (tensor<100x513xf32>, tensor<513x64xf32>) -> tensor<100x64xf32>
  func.return %m : tensor<100x64xf32>
}

// -----

// A buffer passed as a tensor map has no pointer: the residual add cannot read x.
// CHECK: tile: copy=tma passes operand buffer 0 of kernel @residual_0 as a tensor map, but the kernel also reads it elsewhere (use copy=cp_async)

func.func @residual(%x: tensor<64x64xf32>, %w: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %m = graph.matmul %x, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  %r = graph.add %m, %x : tensor<64x64xf32>
  func.return %r : tensor<64x64xf32>
}

// -----

// With ws=1 the producer warp is added to the block's threads (the second RUN line: its knobs
// make every block 1024 threads, so the first kernel already fails).
// WS: error: tile: copy=tma ws=1 adds a producer warp to (bm/tm)*(bn/tn) = 1024 threads, more than the 1024 a block may have (use ws=0 or a smaller block tile)

func.func @big(%x: tensor<256x64xf32>, %w: tensor<64x256xf32>) -> tensor<256x256xf32> {
  %m = graph.matmul %x, %w : (tensor<256x64xf32>, tensor<64x256xf32>) -> tensor<256x256xf32>
  func.return %m : tensor<256x256xf32>
}
