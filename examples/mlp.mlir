// A 2-layer MLP with torch-layout weights: linear -> gelu -> linear (two matmul kernels).
func.func @mlp(%x: tensor<512x1024xf32>, %w1: tensor<4096x1024xf32>, %b1: tensor<4096xf32>, %w2: tensor<1024x4096xf32>, %b2: tensor<1024xf32>) -> tensor<512x1024xf32> {
  %h = graph.linear %x, %w1, %b1 : (tensor<512x1024xf32>, tensor<4096x1024xf32>, tensor<4096xf32>) -> tensor<512x4096xf32>
  %g = graph.gelu %h : tensor<512x4096xf32>
  %y = graph.linear %g, %w2, %b2 : (tensor<512x4096xf32>, tensor<1024x4096xf32>, tensor<1024xf32>) -> tensor<512x1024xf32>
  func.return %y : tensor<512x1024xf32>
}
