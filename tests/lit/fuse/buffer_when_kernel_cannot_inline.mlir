// RUN: tinyopt %s -p 'fuse{debug=true}' 2>&1 | filecheck %s

// What a kernel cannot inline gets a buffer, and `fuse{debug=true}` says why: a reduction over
// leading dims (no row level to hoist it to), a matmul that a reduction reads (a contraction
// kernel computes the matmul at its own index only), a matmul operand holding a reduction
// (stored, so that the GEMM reads a plain operand), and a matmul read transposed.

// CHECK-DAG: fuse: %m (graph.reduce_mean) gets a buffer: not a trailing reduction read once per row, in the kernel of %y (graph.sub)
// CHECK-DAG: fuse: %s (graph.matmul) gets a buffer: a reduction reads it off its kernel's own index, in the kernel of %p (graph.div)
// CHECK-DAG: fuse: %a (graph.div) gets a buffer: a matmul operand holding a reduction, in the kernel of %o (graph.matmul)
// CHECK-DAG: fuse: %t (graph.matmul) gets a buffer: read off its kernel's own index, in the kernel of %tt (graph.transpose)
// CHECK:     loop.kernel @colnorm_0(
// CHECK:     loop.kernel @colnorm_1(
// CHECK-NOT: loop.kernel @colnorm_2(
// CHECK:     loop.kernel @scores_0(
// CHECK:     loop.kernel @scores_1(
// CHECK-NOT: loop.kernel @scores_2(
// CHECK:     loop.kernel @pv_0(
// CHECK:     loop.kernel @pv_1(
// CHECK-NOT: loop.kernel @pv_2(
// CHECK:     loop.kernel @transposed_0(
// CHECK:     loop.kernel @transposed_1(
// CHECK-NOT: loop.kernel @transposed_2(

func.func @colnorm(%x: tensor<5x7xf32>) -> tensor<5x7xf32> {
  %m = graph.reduce_mean %x {dims = array<i64: 0>, keepdim = true} : tensor<5x7xf32> -> tensor<1x7xf32>
  %mb = graph.broadcast %m : tensor<1x7xf32> -> tensor<5x7xf32>
  %y = graph.sub %x, %mb : tensor<5x7xf32>
  func.return %y : tensor<5x7xf32>
}

func.func @scores(%q: tensor<4x6xf32>, %k: tensor<6x5xf32>) -> tensor<4x5xf32> {
  %s = graph.matmul %q, %k : (tensor<4x6xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
  %p = graph.softmax %s {dim = 1 : i64} : tensor<4x5xf32>
  func.return %p : tensor<4x5xf32>
}

func.func @pv(%s: tensor<4x5xf32>, %v: tensor<5x3xf32>) -> tensor<4x3xf32> {
  %a = graph.softmax %s {dim = 1 : i64} : tensor<4x5xf32>
  %o = graph.matmul %a, %v : (tensor<4x5xf32>, tensor<5x3xf32>) -> tensor<4x3xf32>
  func.return %o : tensor<4x3xf32>
}

func.func @transposed(%x: tensor<4x6xf32>, %w: tensor<6x5xf32>) -> tensor<5x4xf32> {
  %t = graph.matmul %x, %w : (tensor<4x6xf32>, tensor<6x5xf32>) -> tensor<4x5xf32>
  %tt = graph.transpose %t {perm = array<i64: 1, 0>} : tensor<4x5xf32> -> tensor<5x4xf32>
  func.return %tt : tensor<5x4xf32>
}
