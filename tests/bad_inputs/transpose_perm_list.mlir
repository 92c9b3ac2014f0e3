// A permutation written as a list instead of `array<i64: ...>`: a diagnostic naming the op.
func.func @f(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  %t = graph.transpose %x {perm = [1, 0]} : tensor<4x8xf32> -> tensor<8x4xf32>
  func.return %t : tensor<8x4xf32>
}
