// RUN: tinyopt %s | filecheck %s --check-prefix=GRAPH
// RUN: tinyopt %s -p fuse | filecheck %s
// RUN: tinyopt %s -p fuse,tile,to-cuda | filecheck %s --check-prefix=CUDA

// A product reduction is a `loop.reduce` from 1.0 whose combine multiplies (bf16 extended to
// f32 on load, the f32 product truncated on store); in CUDA each thread multiplies its share
// of the row and the warp's shuffle tree multiplies the partial products.

// GRAPH-LABEL: func.func @row_prod
// GRAPH-NEXT:  %p = graph.reduce_prod %x {dims = array<i64: 1>} : tensor<8x100xbf16> -> tensor<8xbf16>
// GRAPH-NEXT:  %q = graph.reduce_prod %x {dims = array<i64: 0, 1>, keepdim = true} : tensor<8x100xbf16> -> tensor<1x1xbf16>

// CHECK-LABEL: loop.kernel @row_prod_0
// CHECK:       %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:  loop.reduce (%{{.*}}) in [100] init(%[[ONE]] : f32) {
// CHECK-NEXT:    memref.load
// CHECK-NEXT:    %[[E:.*]] = arith.extf %{{.*}} : bf16 to f32
// CHECK-NEXT:    loop.yield %[[E]] : f32
// CHECK-NEXT:  } combine(%[[A:.*]], %[[B:.*]]) {
// CHECK-NEXT:    %[[M:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK-NEXT:    loop.yield %[[M]] : f32
// CHECK-NEXT:  }
// CHECK-NEXT:  arith.truncf %{{.*}} : f32 to bf16
// CHECK-LABEL: loop.kernel @row_prod_1
// CHECK:       loop.reduce (%{{.*}}, %{{.*}}) in [8, 100] init(%{{.*}} : f32) {
// CHECK:       } combine(%[[C:.*]], %[[D:.*]]) {
// CHECK-NEXT:    arith.mulf %[[C]], %[[D]] : f32

// CUDA-LABEL: // kernel @row_prod_0
// CUDA:       float [[P:v[0-9]+]] = 1.0f;
// CUDA:       float v{{[0-9]+}} = [[P]] * v{{[0-9]+}};
// CUDA:       __shfl_xor_sync(
// CUDA-NEXT:  float v{{[0-9]+}} = v{{[0-9]+}} * v{{[0-9]+}};
// CUDA:       __float2bfloat16_rn(
// CUDA-LABEL: // kernel @row_prod_1
// CUDA:       = 1.0f;
// CUDA:       = v{{[0-9]+}} * v{{[0-9]+}};

func.func @row_prod(%x: tensor<8x100xbf16>) -> (tensor<8xbf16>, tensor<1x1xbf16>) {
  %p = graph.reduce_prod %x {dims = array<i64: 1>, keepdim = false} : tensor<8x100xbf16> -> tensor<8xbf16>
  %q = graph.reduce_prod %x {dims = array<i64: 0, 1>, keepdim = true} : tensor<8x100xbf16> -> tensor<1x1xbf16>
  func.return %p, %q : tensor<8xbf16>, tensor<1x1xbf16>
}
