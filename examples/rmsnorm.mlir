// RMSNorm over the last dimension: y = x / sqrt(mean(x^2) + eps) * weight.
func.func @rmsnorm(%x: tensor<1024x4096xf32>, %weight: tensor<4096xf32>) -> tensor<1024x4096xf32> {
  %y = graph.rms_norm %x, %weight {eps = 1.0e-06 : f32} : (tensor<1024x4096xf32>, tensor<4096xf32>) -> tensor<1024x4096xf32>
  func.return %y : tensor<1024x4096xf32>
}
