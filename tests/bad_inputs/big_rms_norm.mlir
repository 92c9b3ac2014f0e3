func.func @rms(%x: tensor<2147483648x8xf32>, %w: tensor<8xf32>) -> tensor<2147483648x8xf32> {
  %y = graph.rms_norm %x, %w {eps = 1.0e-06 : f32} : (tensor<2147483648x8xf32>, tensor<8xf32>) -> tensor<2147483648x8xf32>
  func.return %y : tensor<2147483648x8xf32>
}
