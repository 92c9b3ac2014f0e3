// RUN: tinyopt %s -p 'fuse{debug=true}' 2>&1 | filecheck %s

// A reduction that two kernels would each compute gets a buffer instead: both results read
// the row maximum, which one kernel computes and both then load.

// CHECK:      fuse: %m (graph.reduce_max) gets a buffer: 2 kernels would compute it
// CHECK:      fuse: @two_0 computes %m (graph.reduce_max)
// CHECK-NEXT: fuse: @two_1 computes %y (graph.sub), inlining {{[0-9]+}} elementwise or index op{{s?}}
// CHECK-NEXT: fuse: @two_2 computes %z (graph.div), inlining {{[0-9]+}} elementwise or index op{{s?}}
// CHECK:      loop.kernel @two_1(%{{.*}}: memref<3x7xf32>, %[[M:.*]]: memref<3x1xf32>, %{{.*}}: memref<3x7xf32>)
// CHECK-NOT:  loop.reduce
// CHECK:      memref.load %[[M]]
// CHECK:      loop.kernel @two_2(%{{.*}}: memref<3x7xf32>, %[[M2:.*]]: memref<3x1xf32>, %{{.*}}: memref<3x7xf32>)
// CHECK-NOT:  loop.reduce
// CHECK:      memref.load %[[M2]]

func.func @two(%x: tensor<3x7xf32>) -> (tensor<3x7xf32>, tensor<3x7xf32>) {
  %m = graph.reduce_max %x {dims = array<i64: 1>, keepdim = true} : tensor<3x7xf32> -> tensor<3x1xf32>
  %mb = graph.broadcast %m : tensor<3x1xf32> -> tensor<3x7xf32>
  %y = graph.sub %x, %mb : tensor<3x7xf32>
  %z = graph.div %x, %mb : tensor<3x7xf32>
  func.return %y, %z : tensor<3x7xf32>, tensor<3x7xf32>
}
