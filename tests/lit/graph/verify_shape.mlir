// RUN: tinyopt %s --split-input-file --verify-diagnostics | filecheck %s

// graph.matmul, transpose, reshape, broadcast and constant reject inconsistent types.
func.func @f0(%a: tensor<4x64xf32>, %b: tensor<32x16xf32>) {
  // expected-error @+1 {{graph.matmul: contraction dims differ: lhs has K=64, rhs has K=32}}
  %c = graph.matmul %a, %b : (tensor<4x64xf32>, tensor<32x16xf32>) -> tensor<4x16xf32>
  func.return
}
// CHECK: graph.matmul: contraction dims differ: lhs has K=64, rhs has K=32

// -----

func.func @f1(%a: tensor<2x4x8xf32>, %b: tensor<3x8x16xf32>) {
  // expected-error @+1 {{graph.matmul: batch dims differ: lhs has B=2, rhs has B=3}}
  %c = graph.matmul %a, %b : (tensor<2x4x8xf32>, tensor<3x8x16xf32>) -> tensor<2x4x16xf32>
  func.return
}
// CHECK: graph.matmul: batch dims differ: lhs has B=2, rhs has B=3

// -----

func.func @f2(%a: tensor<2x4x8xf32>, %b: tensor<8x16xf32>) {
  // expected-error @+1 {{graph.matmul: operands must have the same rank, at least 2 (no broadcasting: broadcast the other operand first), got lhs rank 3, rhs rank 2}}
  %c = graph.matmul %a, %b : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<2x4x16xf32>
  func.return
}
// CHECK: graph.matmul: operands must have the same rank, at least 2 (no broadcasting: broadcast the other operand first), got lhs rank 3, rhs rank 2

// -----

func.func @f3(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) {
  // expected-error @+1 {{graph.matmul: result shape must be 4x16, got 4x8}}
  %c = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x8xf32>
  func.return
}
// CHECK: graph.matmul: result shape must be 4x16, got 4x8

// -----

func.func @f4(%a: tensor<4x8xf32>, %b: tensor<8x16xf16>) {
  // expected-error @+1 {{graph.matmul: element types differ: lhs is f32, rhs is f16}}
  %c = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf16>) -> tensor<4x16xf32>
  func.return
}
// CHECK: graph.matmul: element types differ: lhs is f32, rhs is f16

// -----

func.func @f5(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{graph.transpose: perm [0, 0, 1] is not a permutation of 0..2}}
  %t = graph.transpose %x {perm = array<i64: 0, 0, 1>} : tensor<2x4x8xf32> -> tensor<2x2x4xf32>
  func.return
}
// CHECK: graph.transpose: perm [0, 0, 1] is not a permutation of 0..2

// -----

func.func @f6(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{graph.transpose: perm [1, 0] is not a permutation of 0..2}}
  %t = graph.transpose %x {perm = array<i64: 1, 0>} : tensor<2x4x8xf32> -> tensor<4x2x8xf32>
  func.return
}
// CHECK: graph.transpose: perm [1, 0] is not a permutation of 0..2

// -----

func.func @f7(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{graph.transpose: result shape must be 8x2x4, got 8x4x2}}
  %t = graph.transpose %x {perm = array<i64: 2, 0, 1>} : tensor<2x4x8xf32> -> tensor<8x4x2xf32>
  func.return
}
// CHECK: graph.transpose: result shape must be 8x2x4, got 8x4x2

// -----

func.func @f8(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{graph.reshape: element counts differ: operand has 64, result has 56}}
  %r = graph.reshape %x : tensor<2x4x8xf32> -> tensor<7x8xf32>
  func.return
}
// CHECK: graph.reshape: element counts differ: operand has 64, result has 56

// -----

func.func @f9(%x: tensor<2x4x8xf32>) {
  // expected-error @+1 {{graph.reshape: element types differ: operand is f32, result is bf16}}
  %r = graph.reshape %x : tensor<2x4x8xf32> -> tensor<64xbf16>
  func.return
}
// CHECK: graph.reshape: element types differ: operand is f32, result is bf16

// -----

func.func @f10(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.broadcast: operand rank 2 exceeds result rank 1}}
  %b = graph.broadcast %x : tensor<4x8xf32> -> tensor<8xf32>
  func.return
}
// CHECK: graph.broadcast: operand rank 2 exceeds result rank 1

// -----

func.func @f11(%x: tensor<3x8xf32>) {
  // expected-error @+1 {{graph.broadcast: operand dim 0 has size 3, which cannot broadcast to 4 (3x8 -> 2x4x8)}}
  %b = graph.broadcast %x : tensor<3x8xf32> -> tensor<2x4x8xf32>
  func.return
}
// CHECK: graph.broadcast: operand dim 0 has size 3, which cannot broadcast to 4 (3x8 -> 2x4x8)

// -----

func.func @f12() {
  // expected-error @+1 {{graph.constant: value element type must be f32, f16 or bf16, got i32}}
  %c = graph.constant dense<1> : tensor<4xi32>
  func.return
}
// CHECK: graph.constant: value element type must be f32, f16 or bf16, got i32

// -----

func.func @f13() {
  // expected-error @+1 {{graph.constant: value must be a ranked tensor, got vector<4xf32>}}
  %c = graph.constant dense<1.0> : vector<4xf32>
  func.return
}
// CHECK: graph.constant: value must be a ranked tensor, got vector<4xf32>

// -----

// A slice of another rank names the ranks (it was "result shape must be 4x0, got 4").
func.func @f14(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.slice: result rank must be the operand's, 2, got 1 (a slice keeps dim 1; reshape to drop it)}}
  %y = graph.slice %x {dim = 1 : i64, start = 0 : i64, step = 1 : i64} : tensor<4x8xf32> -> tensor<4xf32>
  func.return
}
// CHECK: graph.slice: result rank must be the operand's, 2, got 1 (a slice keeps dim 1; reshape to drop it)
