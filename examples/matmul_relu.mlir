// relu(matmul(x + bias, w)): the add is fused as a prologue, the relu as an epilogue.
func.func @matmul_relu(%x: tensor<1000x1000xf32>, %bias: tensor<1000xf32>, %w: tensor<1000x1000xf32>) -> tensor<1000x1000xf32> {
  %b = graph.broadcast %bias : tensor<1000xf32> -> tensor<1000x1000xf32>
  %a = graph.add %x, %b : tensor<1000x1000xf32>
  %m = graph.matmul %a, %w : (tensor<1000x1000xf32>, tensor<1000x1000xf32>) -> tensor<1000x1000xf32>
  %y = graph.relu %m : tensor<1000x1000xf32>
  func.return %y : tensor<1000x1000xf32>
}
