// RUN: tinyopt %s -p fuse | filecheck %s
// RUN: tinyopt %s -p fuse,tile,to-cuda | filecheck %s --check-prefix=CUDA

// A causal mask built from row and column indices (graph.iota), a comparison and a select
// is computed inside the softmax's row kernel: no S x S mask is ever stored.

func.func @causal_softmax(%x: tensor<2x8x8xf32>) -> tensor<2x8x8xf32> {
  %rows = graph.iota {dim = 1} : tensor<2x8x8xf32>
  %cols = graph.iota {dim = 2} : tensor<2x8x8xf32>
  %keep = graph.compare %cols, %rows {predicate = "le"} : tensor<2x8x8xf32> -> tensor<2x8x8xi1>
  %ninf = graph.constant dense<0xFF800000> : tensor<1x1x1xf32>
  %fill = graph.broadcast %ninf : tensor<1x1x1xf32> -> tensor<2x8x8xf32>
  %masked = graph.select %keep, %x, %fill : tensor<2x8x8xi1>, tensor<2x8x8xf32>
  %y = graph.softmax %masked {dim = 2 : i64} : tensor<2x8x8xf32>
  func.return %y : tensor<2x8x8xf32>
}
// CHECK:      loop.kernel @causal_softmax_0(%{{.*}}: memref<2x8x8xf32>, %{{.*}}: memref<2x8x8xf32>) {
// CHECK:        arith.index_cast %{{.*}} : index to i64
// CHECK:        arith.sitofp %{{.*}} : i64 to f32
// CHECK:        arith.cmpf ole
// CHECK:        arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK-NOT:  loop.kernel
// CHECK-NOT:  xi1>
// CHECK:      func.func @causal_softmax(

// Masks as kernel inputs and outputs are bytes (C++ bool); an integer input converts with
// sitofp; a float becomes a mask with `!= 0` (une: NaN is true), a mask a float with a select.

func.func @masks(%m: tensor<4x16xi1>, %ids: tensor<4x16xi64>, %x: tensor<4x16xf32>) -> (tensor<4x16xf32>, tensor<4x16xi1>) {
  %f = graph.cast %ids : tensor<4x16xi64> -> tensor<4x16xf32>
  %s = graph.select %m, %x, %f : tensor<4x16xi1>, tensor<4x16xf32>
  %b = graph.cast %s : tensor<4x16xf32> -> tensor<4x16xi1>
  %one = graph.cast %m : tensor<4x16xi1> -> tensor<4x16xf32>
  %e = graph.erf %s : tensor<4x16xf32>
  %c = graph.cos %e : tensor<4x16xf32>
  %n = graph.sin %one : tensor<4x16xf32>
  %y = graph.add %c, %n : tensor<4x16xf32>
  func.return %y, %b : tensor<4x16xf32>, tensor<4x16xi1>
}
// CHECK:      loop.kernel @masks_0(%{{.*}}: memref<4x16xi1>, %{{.*}}: memref<4x16xf32>, %{{.*}}: memref<4x16xi64>, %{{.*}}: memref<4x16xi1>) {
// CHECK:        arith.sitofp %{{.*}} : i64 to f32
// CHECK:        arith.select
// CHECK:        arith.cmpf une
// CHECK:        memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}] : memref<4x16xi1>
// CHECK:      loop.kernel @masks_1(%{{.*}}: memref<4x16xi1>, %{{.*}}: memref<4x16xf32>, %{{.*}}: memref<4x16xi64>, %{{.*}}: memref<4x16xf32>) {
// CHECK:        math.erf
// CHECK:        math.cos
// CHECK:        arith.select
// CHECK:        math.sin

// CUDA:       void {{.*}}causal_softmax_0(const float* __restrict__ v0, float* __restrict__ v1)
// CUDA:       -INFINITY
// CUDA:       void {{.*}}masks_0(const bool* __restrict__ v0, const float* __restrict__ v1, const long long* __restrict__ v2, bool* __restrict__ v3)
// CUDA:       void {{.*}}masks_1(const bool* __restrict__ v0, const float* __restrict__ v1, const long long* __restrict__ v2, float* __restrict__ v3)
// CUDA:       erff(

// A minimum reduction starts from +inf and combines with minimumf.

func.func @row_min(%x: tensor<4x16xf32>) -> tensor<4xf32> {
  %m = graph.reduce_min %x {dims = array<i64: 1>} : tensor<4x16xf32> -> tensor<4xf32>
  func.return %m : tensor<4xf32>
}
// CHECK:      loop.kernel @row_min_0
// CHECK:        arith.constant 0x7f800000 : f32
// CHECK:        arith.minimumf
