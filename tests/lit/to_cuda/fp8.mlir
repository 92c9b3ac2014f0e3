// RUN: tinyopt %s -p fuse,tile,to-cuda | filecheck %s
// 8-bit floats are one-byte cuda_fp8.h values: read as `(float)x`, written through the
// conversions that round as torch does (e4m3fn saturating, infinity included; e5m2 without
// saturation), and moved several to a vector access.

// CHECK:      #include <cuda_fp8.h>
// CHECK:      __nv_fp8_e4m3 tinyopt_to_e4m3(float x) {
// CHECK-NEXT:   __nv_fp8_e4m3 r;
// CHECK-NEXT:   r.__x = __nv_cvt_float_to_fp8(isinf(x) ? copysignf(448.0f, x) : x, __NV_SATFINITE, __NV_E4M3);
// CHECK:      __nv_fp8_e5m2 tinyopt_to_e5m2(float x) {
// CHECK-NEXT:   __nv_fp8_e5m2 r;
// CHECK-NEXT:   r.__x = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2);
// CHECK:      quantize_0(const __nv_bfloat16* __restrict__ v0, __nv_fp8_e4m3* __restrict__ v1)
// CHECK:        __nv_fp8_e4m3 [[Q:v[0-9]+]] = tinyopt_to_e4m3(
// CHECK:        *reinterpret_cast<tinyopt_vec<__nv_fp8_e4m3, 8>*>(&v1[{{.*}}]) = tinyopt_vec<__nv_fp8_e4m3, 8>{{[{][{]}}[[Q]],
// CHECK:      quantize_1(const __nv_bfloat16* __restrict__ v0, __nv_fp8_e5m2* __restrict__ v1)
// CHECK:        __nv_fp8_e5m2 {{v[0-9]+}} = tinyopt_to_e5m2(
// CHECK:      quantize_2(
// CHECK:        = (float)(
func.func @quantize(%x: tensor<4x64xbf16>) -> (tensor<4x64xf8E4M3FN>, tensor<4x64xf8E5M2>, tensor<4x64xbf16>) {
  %q4 = graph.cast %x : tensor<4x64xbf16> -> tensor<4x64xf8E4M3FN>
  %q5 = graph.cast %x : tensor<4x64xbf16> -> tensor<4x64xf8E5M2>
  %back = graph.cast %q5 : tensor<4x64xf8E5M2> -> tensor<4x64xbf16>
  func.return %q4, %q5, %back : tensor<4x64xf8E4M3FN>, tensor<4x64xf8E5M2>, tensor<4x64xbf16>
}
