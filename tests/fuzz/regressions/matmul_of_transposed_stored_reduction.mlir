// PIPELINE: fuse,tile,to-cuda
// A matmul operand that is a stored reduction read transposed (w @ mean(x, 1)ᵀ): fuse refused
// it (the kernel asked again for the reduction's buffer); an operand that is a buffer below
// its last inner-dims swap is read as stored.
func.func @f(%x: tensor<2x7x16xf32>, %w: tensor<3x16xf32>) -> tensor<3x2xf32> {
  %m = graph.reduce_mean %x {dims = array<i64: 1>, keepdim = false} : tensor<2x7x16xf32> -> tensor<2x16xf32>
  %t = graph.transpose %m {perm = array<i64: 1, 0>} : tensor<2x16xf32> -> tensor<16x2xf32>
  %y = graph.matmul %w, %t : (tensor<3x16xf32>, tensor<16x2xf32>) -> tensor<3x2xf32>
  func.return %y : tensor<3x2xf32>
}
