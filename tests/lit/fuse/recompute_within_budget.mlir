// RUN: tinyopt %s -p 'fuse{debug=true}' 2>&1 | filecheck %s

// A recomputation that costs less than a round trip through memory stays inlined: softmax's
// `exp(x - max)` is computed by the sum's loop and again by the output's (9 operations more
// per element), and two chained softmaxes recompute the first one in each reduction of the
// second (17 operations per evaluation beyond the first). Each function is one row kernel.

// CHECK-NOT:  gets a buffer
// CHECK:      fuse: @one_0 computes %y (graph.div), fusing %{{[0-9]+}} (graph.reduce_max), %{{[0-9]+}} (graph.reduce_sum), inlining {{[0-9]+}} elementwise or index op{{s?}}
// CHECK-NEXT: fuse: @one_0 evaluates %{{[0-9]+}} (graph.sub) 2 times per element: 1 operation more, within the 56 of a round trip of 8 bytes
// CHECK-NEXT: fuse: @one_0 evaluates %{{[0-9]+}} (graph.exp) 2 times per element: 9 operations more, within the 56 of a round trip of 8 bytes
// CHECK:      fuse: @two_0 computes %x2 (graph.div)
// CHECK:      fuse: @two_0 evaluates %x1 (graph.div) 3 times per element: {{[0-9]+}} operations more, within the 56
// CHECK-NOT:  gets a buffer
// CHECK:      loop.kernel @one_0(
// CHECK-NOT:  loop.kernel @one_1(
// CHECK:      loop.kernel @two_0(
// CHECK-NOT:  loop.kernel @two_1(

func.func @one(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %y = graph.softmax %x {dim = 1 : i64} : tensor<4x32xf32>
  func.return %y : tensor<4x32xf32>
}

func.func @two(%x0: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %x1 = graph.softmax %x0 {dim = 1 : i64} : tensor<4x32xf32>
  %x2 = graph.softmax %x1 {dim = 1 : i64} : tensor<4x32xf32>
  func.return %x2 : tensor<4x32xf32>
}
