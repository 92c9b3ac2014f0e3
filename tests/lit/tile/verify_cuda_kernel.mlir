// RUN: tinyopt %s --split-input-file --verify-diagnostics | filecheck %s

// tile.cuda_kernel checks its launch shape, its shared memory and that its source defines it.
// expected-error @+1 {{tile.cuda_kernel @k: 2048 threads per block exceed the limit 1024}}
tile.cuda_kernel @k {grid = array<i64: 1, 1, 1>, block = array<i64: 2048, 1, 1>, smem = 0 : i64, source = "extern \"C\" __global__ void k() {}"}
// CHECK: tile.cuda_kernel @k: 2048 threads per block exceed the limit 1024

// -----

// expected-error @+1 {{tile.cuda_kernel @k: smem must be 0 to 232448 bytes (the dynamic shared memory a block may use), got 300000}}
tile.cuda_kernel @k {grid = array<i64: 1, 1, 1>, block = array<i64: 32, 1, 1>, smem = 300000 : i64, source = "extern \"C\" __global__ void k() {}"}
// CHECK: smem must be 0 to 232448 bytes

// -----

// expected-error @+1 {{tile.cuda_kernel @k: its source defines no kernel k}}
tile.cuda_kernel @k {grid = array<i64: 1, 1, 1>, block = array<i64: 32, 1, 1>, smem = 0 : i64, source = "extern \"C\" __global__ void other() {}"}
// CHECK: its source defines no kernel k
