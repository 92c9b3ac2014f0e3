// RUN: not tinyopt %s 2>&1 | filecheck %s
// The generic form gets past the custom parser, so the verifier catches the mismatch.

// CHECK-NOT: Traceback
// CHECK: error: loop.parallel has 1 dimensions but its body has 2 index arguments
// CHECK-NOT: Traceback
builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    "loop.parallel"() <{bounds = array<i64: 4>}> ({
    ^bb0(%i: index, %j: index):
    }) : () -> ()
  }
}
