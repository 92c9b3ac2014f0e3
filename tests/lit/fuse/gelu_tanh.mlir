// RUN: tinyopt %s -p fuse | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{mma=wgmma},to-cuda' | filecheck %s --check-prefix=CUDA

// GELU's tanh form (torch's `gelu(approximate="tanh")`, GPT-2's) is one op, computed in f32 and
// rounded once as torch's kernel does: x / (1 + exp(x·(k1 + k2·x²))) with k1 = -2·sqrt(2/pi)
// and k2 = 0.044715·k1, the same function as 0.5·x·(1 + tanh(u)) without a call to tanhf. In
// a bf16 GEMM epilogue its exp and divide are the approximate ones (fastmath=auto).

// CHECK-LABEL: loop.kernel @gelu_0
// CHECK:       arith.extf
// CHECK:       %[[SQ:.*]] = arith.mulf %[[X:.*]], %[[X]] : f32
// CHECK:       arith.constant -0.0713548
// CHECK:       arith.constant -1.59576
// CHECK:       math.exp
// CHECK:       arith.divf %[[X]], %{{.*}} : f32
// CHECK-NOT:   math.tanh
// CHECK:       arith.truncf
func.func @gelu(%x: tensor<4x8xbf16>) -> tensor<4x8xbf16> {
  %y = graph.gelu_tanh %x : tensor<4x8xbf16>
  func.return %y : tensor<4x8xbf16>
}

// CUDA-LABEL: kernel @up_0
// CUDA:       __expf(
// CUDA:       __fdividef(
// CUDA-NOT:   tanhf
func.func @up(%x: tensor<128x64xbf16>, %w: tensor<128x64xbf16>) -> tensor<128x128xbf16> {
  %h = graph.linear %x, %w : (tensor<128x64xbf16>, tensor<128x64xbf16>) -> tensor<128x128xbf16>
  %g = graph.gelu_tanh %h : tensor<128x128xbf16>
  func.return %g : tensor<128x128xbf16>
}
