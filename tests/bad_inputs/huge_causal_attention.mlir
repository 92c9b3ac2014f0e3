func.func @attention(%q: tensor<1x1x1099511627776x8xf32>, %k: tensor<1x1x1099511627776x8xf32>, %v: tensor<1x1x1099511627776x8xf32>) -> tensor<1x1x1099511627776x8xf32> {
  %o = graph.attention %q, %k, %v {scale = 0.125 : f32, causal = true} : (tensor<1x1x1099511627776x8xf32>, tensor<1x1x1099511627776x8xf32>, tensor<1x1x1099511627776x8xf32>) -> tensor<1x1x1099511627776x8xf32>
  func.return %o : tensor<1x1x1099511627776x8xf32>
}
