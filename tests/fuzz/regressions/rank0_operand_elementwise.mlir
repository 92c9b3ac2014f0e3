// PIPELINE: fuse,tile,to-cuda
// Fixed: a rank-0 operand (memref<f32>, no indices) crashed the vector-width proof of tile.
func.func @fuzz(%a0: tensor<1xf32>, %a1: tensor<f32>) -> (tensor<1xf32>) {
  %v1 = graph.broadcast %a1 : tensor<f32> -> tensor<1xf32>
  %v2 = graph.add %a0, %v1 : tensor<1xf32>
  func.return %v2 : tensor<1xf32>
}
