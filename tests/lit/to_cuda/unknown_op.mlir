// RUN: not tinyopt %s -p to-cuda --allow-unregistered-dialect 2>&1 | filecheck %s
// An op the printer has no CUDA C form for is a diagnostic naming it and its kernel.

// CHECK: error: to-cuda: cannot print 'foo.bar' (in tile.kernel @k)
builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<32xf32>) {
    "foo.bar"() : () -> ()
  }
}
