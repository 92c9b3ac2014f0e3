// RUN: tinyopt %s --split-input-file --verify-diagnostics | filecheck %s

// tile.named_barrier: bar.sync on hardware barrier %id for `threads` threads (whole warps).

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [256, 1, 1] () {
    %c1 = arith.constant 1 : index
    tile.named_barrier %c1, 128
  }
}
// CHECK: tile.named_barrier %{{.*}}, 128

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [256, 1, 1] () {
    %c1 = arith.constant 1 : index
    // expected-error @+1 {{tile.named_barrier: threads must be a positive multiple of 32, got 100}}
    tile.named_barrier %c1, 100
  }
}
// CHECK: tile.named_barrier: threads must be a positive multiple of 32, got 100
