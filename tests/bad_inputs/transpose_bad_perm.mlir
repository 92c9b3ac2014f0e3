func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = graph.transpose %x {perm = array<i64: 0, 0>} : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
