// RUN: tinyopt %s -p fuse,tile,to-cuda | filecheck %s

// arith.maximumf (torch's amax, maximum, relu) prints as PTX max.NaN, which gives NaN for a
// NaN operand, in the row maximum's shuffles too; CUDA's fmaxf would return the other operand.
// CHECK: __device__ __forceinline__ float tinyopt_fmax_nan(float a, float b) {
// CHECK:     asm("max.NaN.f32 %0, %1, %2;" : "=f"(d) : "f"(a), "f"(b));
// CHECK: __shfl_xor_sync
// CHECK: tinyopt_fmax_nan(
// CHECK-NOT: fmaxf(
func.func @row_max(%x: tensor<8x1000xf32>) -> tensor<8x1xf32> {
  %m = graph.reduce_max %x {dims = array<i64: 1>, keepdim = true} : tensor<8x1000xf32> -> tensor<8x1xf32>
  func.return %m : tensor<8x1xf32>
}
