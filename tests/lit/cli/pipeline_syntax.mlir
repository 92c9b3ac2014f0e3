// RUN: not tinyopt %s -p 'tile{' 2>&1 | filecheck %s

// CHECK-NOT: Traceback
// CHECK: tinyopt: error: invalid pass pipeline 'tile{':
// CHECK: Expected argument name here
// CHECK-NOT: Traceback
builtin.module {}
