// RUN: not tinyopt %s -p 'tile{' 2>&1 | filecheck %s

// CHECK-NOT: Traceback
// CHECK: tinyopt: error: invalid pass pipeline 'tile{': expected argument name here
// CHECK-NEXT: tile{
// CHECK-NOT: Traceback
builtin.module {}
