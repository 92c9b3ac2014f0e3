// LayerNorm over the last dimension with a learned scale and shift.
func.func @layernorm(%x: tensor<3x1000x768xf32>, %weight: tensor<768xf32>, %bias: tensor<768xf32>) -> tensor<3x1000x768xf32> {
  %y = graph.layer_norm %x, %weight, %bias {eps = 1.0e-05 : f32} : (tensor<3x1000x768xf32>, tensor<768xf32>, tensor<768xf32>) -> tensor<3x1000x768xf32>
  func.return %y : tensor<3x1000x768xf32>
}
