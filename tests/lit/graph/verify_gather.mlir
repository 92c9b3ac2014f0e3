// RUN: tinyopt %s --split-input-file --verify-diagnostics | filecheck %s

// graph.gather takes rows of a float table at integer ids: result = ids shape ++ row shape.
func.func @ok(%t: tensor<10x4xbf16>, %i: tensor<2x3xi32>) -> tensor<2x3x4xbf16> {
  %y = graph.gather %t, %i : (tensor<10x4xbf16>, tensor<2x3xi32>) -> tensor<2x3x4xbf16>
  func.return %y : tensor<2x3x4xbf16>
}
// CHECK: graph.gather %t, %i : (tensor<10x4xbf16>, tensor<2x3xi32>) -> tensor<2x3x4xbf16>

// -----

func.func @float_ids(%t: tensor<10x4xf32>, %i: tensor<3xf32>) {
  // expected-error @+1 {{graph.gather: ids must be a ranked tensor of i32 or i64, got tensor<3xf32>}}
  %y = graph.gather %t, %i : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  func.return
}
// CHECK: graph.gather: ids must be a ranked tensor of i32 or i64, got tensor<3xf32>

// -----

func.func @shape(%t: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+1 {{graph.gather: result shape must be 3x4, got 4x3}}
  %y = graph.gather %t, %i : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<4x3xf32>
  func.return
}
// CHECK: graph.gather: result shape must be 3x4, got 4x3

// -----

func.func @integer_elsewhere(%i: tensor<3xi64>) {
  // expected-error @+1 {{graph.relu: operand element type must be f32, f16 or bf16, got i64}}
  %y = graph.relu %i : tensor<3xi64>
  func.return
}
// CHECK: graph.relu: operand element type must be f32, f16 or bf16, got i64
