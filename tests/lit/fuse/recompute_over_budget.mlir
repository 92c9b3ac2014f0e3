// RUN: tinyopt %s -p 'fuse{debug=true}' 2>&1 | filecheck %s

// Three chained softmaxes. Inlined into one row kernel, each softmax is recomputed by every
// reduction of the later ones: the last kernel would evaluate the second softmax's exp at 4
// points per element, 78 FP32 operations (fuse_cost: an exp or a division costs 8, a
// subtraction 1) beyond the first evaluation, more than the 56 that a round trip of its 8
// bytes (written once, read once, 7 operations a byte) costs. The exp gets a buffer: two
// kernels, each within budget, instead of one.

// CHECK:      fuse: %[[E:[0-9]+]] (graph.exp) gets a buffer: the kernel of %x3 (graph.div) would evaluate it 4 times per element: 78 operations more, over the 56 of a round trip of 8 bytes
// CHECK-NEXT: fuse: @chain_0 computes %[[E]] (graph.exp), fusing
// CHECK:      fuse: @chain_1 computes %x3 (graph.div), fusing
// CHECK-NOT:  over the
// CHECK:      loop.kernel @chain_0(%{{.*}}: memref<4x32xf32>, %{{.*}}: memref<4x32xf32>)
// CHECK:      loop.kernel @chain_1(%{{.*}}: memref<4x32xf32>, %{{.*}}: memref<4x32xf32>)
// CHECK-NOT:  loop.kernel
// CHECK:      func.func @chain
// CHECK-COUNT-2: loop.launch
// CHECK-NOT:  loop.launch

func.func @chain(%x0: tensor<4x32xf32>) -> tensor<4x32xf32> {
  %x1 = graph.softmax %x0 {dim = 1 : i64} : tensor<4x32xf32>
  %x2 = graph.softmax %x1 {dim = 1 : i64} : tensor<4x32xf32>
  %x3 = graph.softmax %x2 {dim = 1 : i64} : tensor<4x32xf32>
  func.return %x3 : tensor<4x32xf32>
}
