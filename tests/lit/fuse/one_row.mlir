// RUN: tinyopt %s -p 'decompose,fuse{debug=true}' 2>&1 | filecheck %s

// A norm of one row (a decode step's, `[1, N]` or `[N]`) has no row loop, but its statistics
// are still read once per row: the kernel computes them as one row, in one block, instead of
// storing each in its own kernel (in bf16, which lost the accuracy of a near-constant row).
// CHECK: fuse: @one_row_0 computes %y (graph.add), fusing %0 (graph.reduce_mean), %4 (graph.reduce_mean)
func.func @one_row(%x: tensor<1x7xbf16>, %w: tensor<7xbf16>, %b: tensor<7xbf16>) -> tensor<1x7xbf16> {
  %y = graph.layer_norm %x, %w, %b {eps = 1.0e-05 : f32} : (tensor<1x7xbf16>, tensor<7xbf16>, tensor<7xbf16>) -> tensor<1x7xbf16>
  func.return %y : tensor<1x7xbf16>
}

// CHECK: fuse: @rank_one_0 computes %y (graph.mul), fusing %{{[0-9]+}} (graph.reduce_mean)
func.func @rank_one(%x: tensor<4096xf32>, %w: tensor<4096xf32>) -> tensor<4096xf32> {
  %y = graph.rms_norm %x, %w {eps = 1.0e-06 : f32} : (tensor<4096xf32>, tensor<4096xf32>) -> tensor<4096xf32>
  func.return %y : tensor<4096xf32>
}

// Past 2^16 elements a reduction over the whole tensor gets a kernel of its own (many blocks).
// CHECK: fuse: %m (graph.reduce_mean) gets a buffer: not a trailing reduction read once per row
func.func @large(%x: tensor<512x512xf32>) -> tensor<512x512xf32> {
  %m = graph.reduce_mean %x {dims = array<i64: 0, 1>, keepdim = true} : tensor<512x512xf32> -> tensor<1x1xf32>
  %mb = graph.broadcast %m : tensor<1x1xf32> -> tensor<512x512xf32>
  %y = graph.sub %x, %mb : tensor<512x512xf32>
  func.return %y : tensor<512x512xf32>
}
