// RUN: not tinyopt %s 2>&1 | filecheck %s
// Malformed text: a parse error is reported MLIR-style with its location, never a traceback.

// CHECK-NOT: Traceback
// CHECK:      parse_error.mlir:10:1: error: type expected
// CHECK-NEXT: }
// CHECK-NEXT: ^
builtin.module {
  %x = arith.constant 1 :
}
// CHECK-NOT: Traceback
