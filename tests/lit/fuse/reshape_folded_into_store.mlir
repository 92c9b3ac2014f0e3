// RUN: tinyopt %s -p 'fuse{debug=true}' 2>&1 | filecheck %s

// A reshape of a matmul's result that splits its dims is folded into the GEMM's store: the
// kernel keeps the matmul's loops and stores a `memref.collapse_shape` view of the reshaped
// buffer at the loop indices, so there is no copy kernel (N split into [3, 4]; M split into
// [2, 3] after a relu epilogue). A reshape that merges the matmul's dims ([2, 8] batch and
// rows into 16 rows) would need index arithmetic in the store: the matmul gets its own
// buffer and the reshape is a copy.

// CHECK:      fuse: @split_n_0 computes %r (graph.reshape), fusing %o (graph.matmul)
// CHECK-NEXT: fuse: @split_n_0 stores %r (graph.reshape) through a 8x12 view: the reshape is folded into the store
// CHECK:      fuse: @split_m_0 stores %y (graph.reshape) through a 6x12 view: the reshape is folded into the store
// CHECK:      fuse: %r (graph.reshape) of %o (graph.matmul) is not folded into its kernel's store: [2, 8, 12] -> [16, 12] merges dims, which the store could index only through arithmetic
// CHECK-NEXT: fuse: %o (graph.matmul) gets a buffer: read off its kernel's own index, in the kernel of %r (graph.reshape)

// CHECK:      loop.kernel @split_n_0(%{{.*}}: memref<8x16xf32>, %{{.*}}: memref<16x12xf32>, %[[OUT:.*]]: memref<8x12xf32>) {
// CHECK-NEXT:   loop.parallel (%[[M:.*]], %[[N:.*]]) in [8, 12] {
// CHECK:          %[[ACC:.*]] = loop.reduce
// CHECK:          memref.store %[[ACC]], %[[OUT]][%[[M]], %[[N]]] : memref<8x12xf32>
// CHECK-NOT:  loop.kernel @split_n_1
// CHECK:      func.func @split_n(
// CHECK-NEXT:   %[[R:.*]] = memref.alloc() : memref<8x3x4xf32>
// CHECK-NEXT:   %[[V:.*]] = memref.collapse_shape %[[R]] {{\[\[}}0 : i64], [1 : i64, 2 : i64]] : memref<8x3x4xf32> into memref<8x12xf32>
// CHECK-NEXT:   loop.launch @split_n_0(%{{.*}}, %{{.*}}, %[[V]])
// CHECK-NEXT:   func.return %[[R]] : memref<8x3x4xf32>

// CHECK:      loop.kernel @split_m_0(
// CHECK:          arith.maximumf
// CHECK-NEXT:     memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<6x12xf32>
// CHECK-NOT:  loop.kernel @split_m_1
// CHECK:      memref.collapse_shape %{{.*}} {{\[\[}}0 : i64, 1 : i64], [2 : i64]] : memref<2x3x12xf32> into memref<6x12xf32>

// CHECK:      loop.kernel @merge_0(
// CHECK:      loop.kernel @merge_1(
// CHECK-NOT:  memref.collapse_shape

func.func @split_n(%h: tensor<8x16xf32>, %w: tensor<16x12xf32>) -> tensor<8x3x4xf32> {
  %o = graph.matmul %h, %w : (tensor<8x16xf32>, tensor<16x12xf32>) -> tensor<8x12xf32>
  %r = graph.reshape %o : tensor<8x12xf32> -> tensor<8x3x4xf32>
  func.return %r : tensor<8x3x4xf32>
}

func.func @split_m(%x: tensor<6x16xf32>, %w: tensor<16x12xf32>) -> tensor<2x3x12xf32> {
  %o = graph.matmul %x, %w : (tensor<6x16xf32>, tensor<16x12xf32>) -> tensor<6x12xf32>
  %r = graph.relu %o : tensor<6x12xf32>
  %y = graph.reshape %r : tensor<6x12xf32> -> tensor<2x3x12xf32>
  func.return %y : tensor<2x3x12xf32>
}

func.func @merge(%h: tensor<2x8x16xf32>, %w: tensor<2x16x12xf32>) -> tensor<16x12xf32> {
  %o = graph.matmul %h, %w : (tensor<2x8x16xf32>, tensor<2x16x12xf32>) -> tensor<2x8x12xf32>
  %r = graph.reshape %o : tensor<2x8x12xf32> -> tensor<16x12xf32>
  func.return %r : tensor<16x12xf32>
}
