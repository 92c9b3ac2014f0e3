// RUN: not tinyopt %s 2>&1 | filecheck %s

// A finite decimal element that a bf16 constant cannot hold is an error, as it is for f16
// and f32: xDSL rounded it to infinity, a silently different constant. The largest finite
// bf16 (3.3895e38) and hexadecimal infinities are still read.

func.func @big(%x: tensor<3xbf16>) -> tensor<3xbf16> {
  %c = graph.constant dense<[3.3895e38, 0xFF80, 3.4e38]> : tensor<3xbf16>
  %y = graph.mul %x, %c : tensor<3xbf16>
  func.return %y : tensor<3xbf16>
}
// CHECK: dense_bf16_overflow.mlir:8:49: error: element 3.4e38 is out of range for bf16
