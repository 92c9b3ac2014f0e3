// PIPELINE: fuse,tile,to-cuda
// A bf16 layer_norm of one row (seed 0 cases 972-973 of run_gpu.py -n 2000, a decode step's
// norm): its row statistics were not read once per row (there is no row loop), so each got a
// kernel and was stored in bf16, and the output missed the tolerance (4.3e-2 against 2e-2 on
// the CPU emulation). A reduction over the whole of a tensor of at most 2^16 elements is now
// computed in its reader's kernel, as one row.
func.func @ln(%x: tensor<1x7xbf16>, %w: tensor<7xbf16>, %b: tensor<7xbf16>) -> tensor<1x7xbf16> {
  %0 = graph.reduce_mean %x {dims = array<i64: 1>, keepdim = true} : tensor<1x7xbf16> -> tensor<1x1xbf16>
  %1 = graph.broadcast %0 : tensor<1x1xbf16> -> tensor<1x7xbf16>
  %2 = graph.sub %x, %1 : tensor<1x7xbf16>
  %3 = graph.mul %2, %2 : tensor<1x7xbf16>
  %4 = graph.reduce_mean %3 {dims = array<i64: 1>, keepdim = true} : tensor<1x7xbf16> -> tensor<1x1xbf16>
  %5 = graph.constant dense<1.001360e-05> : tensor<1x1xbf16>
  %6 = graph.add %4, %5 : tensor<1x1xbf16>
  %7 = graph.rsqrt %6 : tensor<1x1xbf16>
  %8 = graph.broadcast %7 : tensor<1x1xbf16> -> tensor<1x7xbf16>
  %9 = graph.mul %2, %8 : tensor<1x7xbf16>
  %10 = graph.broadcast %w : tensor<7xbf16> -> tensor<1x7xbf16>
  %11 = graph.mul %9, %10 : tensor<1x7xbf16>
  %12 = graph.broadcast %b : tensor<7xbf16> -> tensor<1x7xbf16>
  %y = graph.add %11, %12 : tensor<1x7xbf16>
  func.return %y : tensor<1x7xbf16>
}
