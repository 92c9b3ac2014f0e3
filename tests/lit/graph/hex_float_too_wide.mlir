// RUN: not tinyopt %s 2>&1 | filecheck %s

// A hex element of a float dense literal is the element's bits; more bits than the type
// holds is an error, not a large number.

func.func @wide() -> tensor<1xf16> {
  %c = graph.constant dense<0xFF800000> : tensor<1xf16>
  func.return %c : tensor<1xf16>
}
// CHECK: hexadecimal element 0xFF800000 has more bits than f16
