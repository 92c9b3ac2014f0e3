// RUN: tinyopt %s | tinyopt | filecheck %s
// RUN: tinyopt %s -p fuse | tinyopt | filecheck %s --check-prefix=FUSE

// Infinities and NaNs print as their bits in hex, and hex elements read back as bits (as in
// MLIR), so a constant survives any number of text round trips. A hex element wider than
// its type is an error (tests/lit/graph/hex_float_too_wide.mlir).

func.func @special(%x: tensor<4xf32>, %h: tensor<3xbf16>) -> (tensor<4xf32>, tensor<3xbf16>) {
  %c = graph.constant dense<[0xFF800000, 0x7F800000, -0.0, 0x7FC00000]> : tensor<4xf32>
  %y = graph.add %x, %c : tensor<4xf32>
  %b = graph.constant dense<[0xFF80, 0x7F80, 1.5]> : tensor<3xbf16>
  %z = graph.mul %h, %b : tensor<3xbf16>
  func.return %y, %z : tensor<4xf32>, tensor<3xbf16>
}
// CHECK: graph.constant dense<[0xff800000, 0x7f800000, -0.000000e+00, 0x7fc00000]> : tensor<4xf32>
// CHECK: graph.constant dense<[0xff80, 0x7f80, 1.500000e+00]> : tensor<3xbf16>

// FUSE: sym_name = "special_cst0", type = memref<4xf32>, initial_value = dense<[0xff800000, 0x7f800000, -0.000000e+00, 0x7fc00000]>
// FUSE: sym_name = "special_cst1", type = memref<3xbf16>, initial_value = dense<[0xff80, 0x7f80, 1.500000e+00]>
