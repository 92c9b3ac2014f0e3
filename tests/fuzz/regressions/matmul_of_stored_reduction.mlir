// PIPELINE: fuse,tile,to-cuda
// A matmul operand that is a reduction itself (mean pooling, then a linear layer) crashed fuse
// with AssertionError "materialized twice" (CPU sweep of run_gpu.py --seed 0, cases 702-704, 855):
// the reduction got a buffer, then the matmul's kernel asked for one again ("reads a stored
// reduction"). A matmul operand that has a buffer is now read as stored.
func.func @fuzz(%a0: tensor<2x7x16xf32>, %a1: tensor<16x3xf32>) -> (tensor<2x3xf32>) {
  %v1 = graph.reduce_mean %a0 {dims = array<i64: 1>, keepdim = false} : tensor<2x7x16xf32> -> tensor<2x16xf32>
  %v2 = graph.matmul %v1, %a1 : (tensor<2x16xf32>, tensor<16x3xf32>) -> tensor<2x3xf32>
  func.return %v2 : tensor<2x3xf32>
}
