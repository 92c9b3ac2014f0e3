// RUN: tinyopt %s -p fuse,online-softmax | filecheck %s

// bf16 softmax: the element is the extended load, the state stays f32.

// CHECK-LABEL: loop.kernel @softmax_bf16_0
// CHECK:         %{{.*}}, %{{.*}} = loop.reduce (%{{.*}}) in [300] init(%{{.*}}, %{{.*}} : f32, f32) {
// CHECK-NEXT:      %[[V:.*]] = memref.load
// CHECK-NEXT:      %[[X:.*]] = arith.extf %[[V]] : bf16 to f32
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      loop.yield %[[X]], %[[ONE]] : f32, f32
// CHECK-NOT:     loop.reduce
// CHECK:         loop.parallel

// The sum of exp(y - max(x)) subtracts x's maximum from another tensor: not the running
// softmax denominator, so both reductions stay.

// CHECK-LABEL: loop.kernel @other_0
// CHECK:         loop.reduce (%{{.*}}) in [16] init(%{{.*}} : f32)
// CHECK:         loop.reduce (%{{.*}}) in [16] init(%{{.*}} : f32)

func.func @softmax_bf16(%x: tensor<4x300xbf16>) -> tensor<4x300xbf16> {
  %y = graph.softmax %x {dim = 1 : i64} : tensor<4x300xbf16>
  func.return %y : tensor<4x300xbf16>
}

func.func @other(%x: tensor<4x16xf32>, %y: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %m = graph.reduce_max %x {dims = array<i64: 1>, keepdim = true} : tensor<4x16xf32> -> tensor<4x1xf32>
  %mb = graph.broadcast %m : tensor<4x1xf32> -> tensor<4x16xf32>
  %d = graph.sub %y, %mb : tensor<4x16xf32>
  %e = graph.exp %d : tensor<4x16xf32>
  %s = graph.reduce_sum %e {dims = array<i64: 1>, keepdim = true} : tensor<4x16xf32> -> tensor<4x1xf32>
  %sb = graph.broadcast %s : tensor<4x1xf32> -> tensor<4x16xf32>
  %o = graph.div %e, %sb : tensor<4x16xf32>
  func.return %o : tensor<4x16xf32>
}
