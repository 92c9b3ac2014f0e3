// RUN: not tinyopt %s -p 'fuse,tile{copy=cp_async}' 2>&1 | filecheck %s --check-prefix=PROLOGUE
// PROLOGUE-NOT: Traceback

// cp.async copies bytes: a fused prologue (x + bias) has to go through registers.
// PROLOGUE: error: tile: copy=cp_async needs each operand to be a plain f32 load (cp_async copies raw bytes: no prologue math, no conversion); the A side of kernel @mmb_0 is memref.load, memref.load, arith.addf (use copy=ld)

func.func @mmb(%x: tensor<64x64xf32>, %b: tensor<64xf32>, %w: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %bb = graph.broadcast %b : tensor<64xf32> -> tensor<64x64xf32>
  %a = graph.add %x, %bb : tensor<64x64xf32>
  %m = graph.matmul %a, %w : (tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>
  func.return %m : tensor<64x64xf32>
}
