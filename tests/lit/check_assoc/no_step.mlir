// RUN: not tinyopt check-assoc %s 2>&1 | filecheck %s
// A file without a step function (no tinyopt.init attribute) is a one-line error.

// CHECK-NOT: Traceback
// CHECK: tinyopt: error: {{.*}}no_step.mlir has no step function (a func.func with a tinyopt.init attribute)
func.func @f(%s: f32, %x: f32) -> f32 {
  %r = arith.addf %s, %x : f32
  func.return %r : f32
}
