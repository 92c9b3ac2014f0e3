// RUN: tinyopt %s --split-input-file --verify-diagnostics | filecheck %s

// graph.argmax: a float operand, an i32 or i64 result of the shape without dim (size 1 there
// with keepdim), a dim in range of at most 2^24 elements (the index is computed in f32).
func.func @ok(%x: tensor<4x8xf16>) -> tensor<4x1xi32> {
  %y = graph.argmax %x {dim = 1 : i64, keepdim = true} : tensor<4x8xf16> -> tensor<4x1xi32>
  func.return %y : tensor<4x1xi32>
}
// CHECK: graph.argmax %x {dim = 1 : i64, keepdim = true} : tensor<4x8xf16> -> tensor<4x1xi32>

// -----

func.func @wrong_shape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.argmax: result shape must be 4, got 8}}
  %y = graph.argmax %x {dim = 1 : i64} : tensor<4x8xf32> -> tensor<8xi64>
  func.return
}
// CHECK: graph.argmax: result shape must be 4, got 8

// -----

func.func @keepdim_shape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.argmax: result shape must be 4x1, got 4}}
  %y = graph.argmax %x {dim = 1 : i64, keepdim = true} : tensor<4x8xf32> -> tensor<4xi64>
  func.return
}
// CHECK: graph.argmax: result shape must be 4x1, got 4

// -----

func.func @integer_operand(%x: tensor<4x8xi64>) {
  // expected-error @+1 {{graph.argmax: operand element type must be f32, f16 or bf16, got i64}}
  %y = graph.argmax %x {dim = 1 : i64} : tensor<4x8xi64> -> tensor<4xi64>
  func.return
}
// CHECK: graph.argmax: operand element type must be f32, f16 or bf16, got i64

// -----

func.func @float_result(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.argmax: result must be a tensor of i32 or i64 (the indices), got tensor<4xf32>}}
  %y = graph.argmax %x {dim = 1 : i64} : tensor<4x8xf32> -> tensor<4xf32>
  func.return
}
// CHECK: graph.argmax: result must be a tensor of i32 or i64 (the indices), got tensor<4xf32>

// -----

func.func @dim_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.argmax: dim 2 is out of range for rank 2}}
  %y = graph.argmax %x {dim = 2 : i64} : tensor<4x8xf32> -> tensor<4xi64>
  func.return
}
// CHECK: graph.argmax: dim 2 is out of range for rank 2

// -----

func.func @negative_dim(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.argmax: dim -1 is out of range for rank 2}}
  %y = graph.argmax %x {dim = -1 : i64} : tensor<4x8xf32> -> tensor<4xi64>
  func.return
}
// CHECK: graph.argmax: dim -1 is out of range for rank 2

// -----

func.func @past_f32_integers(%x: tensor<2x16777217xf32>) {
  // expected-error @+1 {{graph.argmax: dim 1 has 16777217 elements, more than 2^24: the index is computed in f32, exact only up to 2^24}}
  %y = graph.argmax %x {dim = 1 : i64} : tensor<2x16777217xf32> -> tensor<2xi64>
  func.return
}
// CHECK: graph.argmax: dim 1 has 16777217 elements, more than 2^24
