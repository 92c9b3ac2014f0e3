// RUN: not tinyopt %s -p 'fuse,tile{mma=wgmma store=tma}' 2>&1 | filecheck %s

// `store=tma` writes 16-bit outputs only (wgmma_tma_store.py `tma_output`): FP8 products to
// f32 are refused by name, with a non-zero exit.
// CHECK: tinyopt: error: tile: mma=wgmma store=tma writes the output with TMA stores: it needs a 16-bit float output (bf16 or f16), not f32
func.func @scaled_mm(%a: tensor<256x256xf8E4M3FN>, %b: tensor<256x256xf8E4M3FN>, %s: tensor<1xf32>) -> tensor<256x256xf32> {
  %a32 = graph.cast %a : tensor<256x256xf8E4M3FN> -> tensor<256x256xf32>
  %b32 = graph.cast %b : tensor<256x256xf8E4M3FN> -> tensor<256x256xf32>
  %bt = graph.transpose %b32 {perm = array<i64: 1, 0>} : tensor<256x256xf32> -> tensor<256x256xf32>
  %y = graph.matmul %a32, %bt : (tensor<256x256xf32>, tensor<256x256xf32>) -> tensor<256x256xf32>
  %sb = graph.broadcast %s : tensor<1xf32> -> tensor<256x256xf32>
  %z = graph.mul %y, %sb : tensor<256x256xf32>
  func.return %z : tensor<256x256xf32>
}
