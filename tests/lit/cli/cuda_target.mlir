// RUN: tinyopt %s -t cuda | filecheck %s
// RUN: not tinyopt %s -p canonicalize -t cuda --split-input-file 2>&1 | filecheck %s --check-prefix=EMPTY
// The cuda target prints each tile.cuda_kernel's source after a comment with its launch shape.

// CHECK:      // kernel @first grid (4, 1, 1) block (128, 1, 1) smem 0
// CHECK-NEXT: extern "C" __global__ void first() {}
// CHECK-EMPTY:
// CHECK-NEXT: // kernel @second grid (2, 3, 1) block (32, 4, 1) smem 1024
// CHECK-NEXT: extern "C" __global__ void second() {}
builtin.module {
  tile.cuda_kernel @first {grid = array<i64: 4, 1, 1>, block = array<i64: 128, 1, 1>, smem = 0 : i64, source = "extern \"C\" __global__ void first() {}\n"}
  tile.cuda_kernel @second {grid = array<i64: 2, 3, 1>, block = array<i64: 32, 4, 1>, smem = 1024 : i64, source = "extern \"C\" __global__ void second() {}"}
}

// -----

// EMPTY: tinyopt: error: nothing to compile: the module has no graph function
builtin.module {}
