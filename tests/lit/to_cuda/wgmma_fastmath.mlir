// RUN: tinyopt %s -p 'fuse,tile{mma=wgmma},to-cuda' > %t.cu
// RUN: filecheck %s < %t.cu
// RUN: tinyopt %s -p 'fuse,tile{mma=wgmma fastmath=off},to-cuda' | filecheck %s --check-prefix=OFF
// RUN: filecheck %s --check-prefix=F32 < %t.cu

// fastmath=auto: the dual GEMM's epilogue silu(g) * up stores bf16, so its sigmoid uses CUDA's
// approximate __expf and __fdividef (fastmath<afn> on math.exp and arith.divf); off keeps
// the accurate expf and IEEE division, as does auto for an epilogue that stores f32.
// CHECK-LABEL: kernel @swiglu_0
// CHECK:       __expf(
// CHECK:       __fdividef(1.0f,
// OFF-LABEL:   kernel @swiglu_0
// OFF-NOT:     __expf
// OFF:         expf(
// OFF:         1.0f /
// F32-LABEL:   kernel @swiglu_f32_out_0
// F32-NOT:     __expf
// F32:         expf(

func.func @swiglu(%x: tensor<128x64xbf16>, %wg: tensor<128x64xbf16>, %wu: tensor<128x64xbf16>) -> tensor<128x128xbf16> {
  %g = graph.linear %x, %wg : (tensor<128x64xbf16>, tensor<128x64xbf16>) -> tensor<128x128xbf16>
  %u = graph.linear %x, %wu : (tensor<128x64xbf16>, tensor<128x64xbf16>) -> tensor<128x128xbf16>
  %s = graph.silu %g : tensor<128x128xbf16>
  %y = graph.mul %s, %u : tensor<128x128xbf16>
  func.return %y : tensor<128x128xbf16>
}

func.func @swiglu_f32_out(%x: tensor<128x64xbf16>, %wg: tensor<128x64xbf16>, %wu: tensor<128x64xbf16>) -> tensor<128x128xf32> {
  %g = graph.linear %x, %wg : (tensor<128x64xbf16>, tensor<128x64xbf16>) -> tensor<128x128xbf16>
  %u = graph.linear %x, %wu : (tensor<128x64xbf16>, tensor<128x64xbf16>) -> tensor<128x128xbf16>
  %s = graph.silu %g : tensor<128x128xbf16>
  %y = graph.mul %s, %u : tensor<128x128xbf16>
  %z = graph.cast %y : tensor<128x128xbf16> -> tensor<128x128xf32>
  func.return %z : tensor<128x128xf32>
}
