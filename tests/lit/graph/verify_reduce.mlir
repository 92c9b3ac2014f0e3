// RUN: tinyopt %s --split-input-file --verify-diagnostics | filecheck %s

// graph.reduce_* ops reject bad dims and result types.
func.func @f0(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.reduce_sum: dims must not be empty}}
  %y = graph.reduce_sum %x {dims = array<i64>} : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return
}
// CHECK: graph.reduce_sum: dims must not be empty

// -----

func.func @f1(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.reduce_max: reduced dim 2 is out of range for rank 2}}
  %y = graph.reduce_max %x {dims = array<i64: 2>} : tensor<4x8xf32> -> tensor<4xf32>
  func.return
}
// CHECK: graph.reduce_max: reduced dim 2 is out of range for rank 2

// -----

func.func @f2(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.reduce_max: reduced dim -1 is out of range for rank 2}}
  %y = graph.reduce_max %x {dims = array<i64: -1>} : tensor<4x8xf32> -> tensor<4xf32>
  func.return
}
// CHECK: graph.reduce_max: reduced dim -1 is out of range for rank 2

// -----

func.func @f3(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.reduce_mean: dims contain duplicates: [1, 1]}}
  %y = graph.reduce_mean %x {dims = array<i64: 1, 1>} : tensor<4x8xf32> -> tensor<4xf32>
  func.return
}
// CHECK: graph.reduce_mean: dims contain duplicates: [1, 1]

// -----

func.func @f4(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.reduce_sum: result shape must be 4x1, got 4}}
  %y = graph.reduce_sum %x {dims = array<i64: 1>, keepdim = true} : tensor<4x8xf32> -> tensor<4xf32>
  func.return
}
// CHECK: graph.reduce_sum: result shape must be 4x1, got 4

// -----

func.func @f5(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.reduce_sum: element types differ: operand is f32, result is f16}}
  %y = graph.reduce_sum %x {dims = array<i64: 1>} : tensor<4x8xf32> -> tensor<4xf16>
  func.return
}
// CHECK: graph.reduce_sum: element types differ: operand is f32, result is f16
