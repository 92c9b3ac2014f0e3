func.func @wide(%x: tensor<65536x1xf32>) -> tensor<65536xf32> {
  %b = graph.broadcast %x : tensor<65536x1xf32> -> tensor<65536x32769xf32>
  %f = graph.reshape %b : tensor<65536x32769xf32> -> tensor<2147549184xf32>
  %r = graph.reshape %f : tensor<2147549184xf32> -> tensor<32769x65536xf32>
  %s = graph.reduce_sum %r {dims = array<i64: 0>} : tensor<32769x65536xf32> -> tensor<65536xf32>
  func.return %s : tensor<65536xf32>
}
