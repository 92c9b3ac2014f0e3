// An fp32 SGEMM, 4096 x 4096 x 4096 (the SGEMM ladder's size), for `tinyopt explain` in the README.
func.func @matmul(%a: tensor<4096x4096xf32>, %b: tensor<4096x4096xf32>) -> tensor<4096x4096xf32> {
  %c = graph.matmul %a, %b : (tensor<4096x4096xf32>, tensor<4096x4096xf32>) -> tensor<4096x4096xf32>
  func.return %c : tensor<4096x4096xf32>
}
