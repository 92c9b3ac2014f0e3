// RUN: not tinyopt %s -p 'tile{nope=1}' 2>&1 | filecheck %s
// RUN: not tinyopt %s -p 'fuse{nope=1}' 2>&1 | filecheck %s --check-prefix=FUSE

// CHECK-NOT: Traceback
// CHECK: tinyopt: error: unknown option 'nope' for pass 'tile' (options: {{.+}})
// CHECK-NOT: Traceback

// FUSE-NOT: Traceback
// FUSE: tinyopt: error: unknown option 'nope' for pass 'fuse'
// FUSE-NOT: Traceback
builtin.module {}
