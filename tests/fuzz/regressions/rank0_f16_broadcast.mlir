// PIPELINE: fuse,tile,to-cuda
// Fixed: a rank-0 f16 input reached the runtime as shape (1,) and was refused (H200 fuzz run).
builtin.module {
  func.func @fuzz(%a1: tensor<f16>) -> tensor<16xf16> {
    %v1 = graph.broadcast %a1 : tensor<f16> -> tensor<16xf16>
    func.return %v1 : tensor<16xf16>
  }
}
