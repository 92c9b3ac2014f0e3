// RUN: tinyopt %s --split-input-file --verify-diagnostics | filecheck %s

// graph.* elementwise ops and graph.cast reject bad dtypes and shapes.
func.func @f0(%x: tensor<4x8xi32>) {
  // expected-error @+1 {{graph.exp: operand element type must be f32, f16 or bf16, got i32}}
  %y = graph.exp %x : tensor<4x8xi32>
  func.return
}
// CHECK: graph.exp: operand element type must be f32, f16 or bf16, got i32

// -----

func.func @f1(%x: tensor<4x8xf64>) {
  // expected-error @+1 {{graph.add: operands element type must be f32, f16 or bf16, got f64}}
  %y = graph.add %x, %x : tensor<4x8xf64>
  func.return
}
// CHECK: graph.add: operands element type must be f32, f16 or bf16, got f64

// -----

func.func @f2(%a: tensor<4x8xf32>, %b: tensor<4x9xf32>) {
  // expected-error @+1 {{attribute tensor<4x8xf32> expected from variable 'T', but got tensor<4x9xf32>}}
  %z = "graph.add"(%a, %b) : (tensor<4x8xf32>, tensor<4x9xf32>) -> tensor<4x8xf32>
  func.return
}
// CHECK: attribute tensor<4x8xf32> expected from variable 'T', but got tensor<4x9xf32>

// -----

func.func @f3(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.cast: shapes differ: operand is 4x8, result is 8x4}}
  %y = graph.cast %x : tensor<4x8xf32> -> tensor<8x4xf16>
  func.return
}
// CHECK: graph.cast: shapes differ: operand is 4x8, result is 8x4

// -----

func.func @f4(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.cast: operand and result are both f32; cast must convert}}
  %y = graph.cast %x : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return
}
// CHECK: graph.cast: operand and result are both f32; cast must convert

// -----

func.func @f5(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.cast: result element type must be f32, f16, bf16, f8E4M3FN, f8E5M2, i1, i32 or i64, got i8}}
  %y = graph.cast %x : tensor<4x8xf32> -> tensor<4x8xi8>
  func.return
}
// CHECK: graph.cast: result element type must be f32, f16, bf16, f8E4M3FN, f8E5M2, i1, i32 or i64, got i8

// -----

func.func @f6(%x: tensor<4x8xi1>) {
  // expected-error @+1 {{graph.cast: cannot convert i1 to i64}}
  %y = graph.cast %x : tensor<4x8xi1> -> tensor<4x8xi64>
  func.return
}
// CHECK: graph.cast: cannot convert i1 to i64

// -----

func.func @f7(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.compare: predicate must be one of eq, ne, lt, le, gt, ge, got 'lte'}}
  %y = graph.compare %x, %x {predicate = "lte"} : tensor<4x8xf32> -> tensor<4x8xi1>
  func.return
}
// CHECK: graph.compare: predicate must be one of eq, ne, lt, le, gt, ge, got 'lte'

// -----

func.func @f8(%c: tensor<4x1xi1>, %x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.select: cond must be tensor<4x8xi1>, got tensor<4x1xi1>}}
  %y = graph.select %c, %x, %x : tensor<4x1xi1>, tensor<4x8xf32>
  func.return
}
// CHECK: graph.select: cond must be tensor<4x8xi1>, got tensor<4x1xi1>

// -----

func.func @f9(%x: tensor<4x8xi1>) {
  // expected-error @+1 {{graph.add: operands element type must be f32, f16 or bf16, got i1}}
  %y = graph.add %x, %x : tensor<4x8xi1>
  func.return
}
// CHECK: graph.add: operands element type must be f32, f16 or bf16, got i1
