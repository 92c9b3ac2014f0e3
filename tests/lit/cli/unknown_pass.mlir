// RUN: not tinyopt %s -p canonicalize,frobnicate 2>&1 | filecheck %s

// CHECK-NOT: Traceback
// CHECK: tinyopt: error: unknown pass 'frobnicate'
// CHECK-NOT: Traceback
builtin.module {}
