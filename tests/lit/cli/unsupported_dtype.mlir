// RUN: not tinyopt %s 2>&1 | filecheck %s
// f64 is not a tinyopt element type: the graph verifier rejects it before any pass runs.

// CHECK-NOT: Traceback
// CHECK: unsupported_dtype.mlir:{{[0-9]+}}:3: error: graph.exp: {{.*}}f32, f16 or bf16, got f64
// CHECK-NEXT: %y = graph.exp %x : tensor<4xf64>
// CHECK-NEXT: ^^
// CHECK-NOT: Traceback
func.func @f(%x: tensor<4xf64>) -> tensor<4xf64> {
  %y = graph.exp %x : tensor<4xf64>
  func.return %y : tensor<4xf64>
}
