// RUN: tinyopt %s --split-input-file --verify-diagnostics | filecheck %s

// Every tile dialect verifier error: launch shape (grid/block sizes, the 1024-thread limit),
// kernel arguments, hardware dims, alloc memory spaces, vector accesses (width, lane types,
// rank, 128 bits, last-dim divisibility) and the combine regions of warp/block reductions.

builtin.module {
  // expected-error @+1 {{tile.kernel @k: grid must be 3 positive sizes, got (4, 0, 1)}}
  tile.kernel @k grid [4, 0, 1] block [32, 1, 1] (%x: memref<4xf32>) {
  }
}
// CHECK: tile.kernel @k: grid must be 3 positive sizes, got (4, 0, 1)

// -----

builtin.module {
  // expected-error @+1 {{tile.kernel @k: grid must be 3 positive sizes, got (4, 1)}}
  tile.kernel @k grid [4, 1] block [32, 1, 1] (%x: memref<4xf32>) {
  }
}
// CHECK: tile.kernel @k: grid must be 3 positive sizes, got (4, 1)

// -----

builtin.module {
  // expected-error @+1 {{tile.kernel @k: block must be 3 positive sizes, got (32, 1, -1)}}
  tile.kernel @k grid [1, 1, 1] block [32, 1, -1] (%x: memref<4xf32>) {
  }
}
// CHECK: tile.kernel @k: block must be 3 positive sizes, got (32, 1, -1)

// -----

builtin.module {
  // expected-error @+1 {{tile.kernel @k: 2048 threads per block exceed the limit 1024}}
  tile.kernel @k grid [1, 1, 1] block [256, 4, 2] (%x: memref<4xf32>) {
  }
}
// CHECK: tile.kernel @k: 2048 threads per block exceed the limit 1024

// -----

builtin.module {
  // expected-error @+1 {{tile.kernel @k: arguments must be global memrefs or i32/i64 scalars, got memref<4xf32, 3 : i32>}}
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4xf32>, %s: memref<4xf32, 3 : i32>) {
  }
}
// CHECK: tile.kernel @k: arguments must be global memrefs or i32/i64 scalars, got memref<4xf32, 3 : i32>

// -----

builtin.module {
  // expected-error @+1 {{tile.kernel @k: arguments must be global memrefs or i32/i64 scalars, got index}}
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4xf32>, %n: index) {
  }
}
// CHECK: tile.kernel @k: arguments must be global memrefs or i32/i64 scalars, got index

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4xf32>) {
    // expected-error @+1 {{tile.thread_id: dimension must be x, y or z, got w}}
    %t = tile.thread_id w
  }
}
// CHECK: tile.thread_id: dimension must be x, y or z, got w

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4xf32>) {
    // expected-error @+1 {{tile.block_id: dimension must be x, y or z, got X}}
    %b = tile.block_id X
  }
}
// CHECK: tile.block_id: dimension must be x, y or z, got X

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4xf32>) {
    // expected-error @+1 {{tile.alloc: memory space must be 3 (shared) or 5 (registers), got memref<4xf32, 1 : i32>}}
    %a = tile.alloc : memref<4xf32, 1 : i32>
  }
}
// CHECK: tile.alloc: memory space must be 3 (shared) or 5 (registers), got memref<4xf32, 1 : i32>

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4xf32>) {
    // expected-error @+1 {{tile.alloc: memory space must be 3 (shared) or 5 (registers), got memref<4xf32>}}
    %a = tile.alloc : memref<4xf32>
  }
}
// CHECK: tile.alloc: memory space must be 3 (shared) or 5 (registers), got memref<4xf32>

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4x12xf32>) {
    %i = tile.thread_id x
    // expected-error @+1 {{tile.vload: width must be 1, 2, 4, 8 or 16, got 3}}
    %a, %b, %c = tile.vload %x[%i, %i] : memref<4x12xf32> -> f32, f32, f32
  }
}
// CHECK: tile.vload: width must be 1, 2, 4, 8 or 16, got 3

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4x8xf32>) {
    %i = tile.thread_id x
    // expected-error @+1 {{tile.vload: lanes must have the element type f32}}
    %a, %b = tile.vload %x[%i, %i] : memref<4x8xf32> -> f32, f16
  }
}
// CHECK: tile.vload: lanes must have the element type f32

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4x8xf32>) {
    %i = tile.thread_id x
    // expected-error @+1 {{tile.vload: 1 indices for a rank-2 buffer}}
    %a, %b = tile.vload %x[%i] : memref<4x8xf32> -> f32, f32
  }
}
// CHECK: tile.vload: 1 indices for a rank-2 buffer

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4x16xf32>) {
    %i = tile.thread_id x
    // expected-error @+1 {{tile.vload: 256-bit access is wider than 128 bits}}
    %a0, %a1, %a2, %a3, %a4, %a5, %a6, %a7 = tile.vload %x[%i, %i] : memref<4x16xf32> -> f32, f32, f32, f32, f32, f32, f32, f32
  }
}
// CHECK: tile.vload: 256-bit access is wider than 128 bits

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4x6xf32>) {
    %i = tile.thread_id x
    // expected-error @+1 {{tile.vload: last dimension 6 is not a multiple of the width 4}}
    %a, %b, %c, %d = tile.vload %x[%i, %i] : memref<4x6xf32> -> f32, f32, f32, f32
  }
}
// CHECK: tile.vload: last dimension 6 is not a multiple of the width 4

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4x8xf32>) {
    %i = tile.thread_id x
    %v = arith.constant 1.0 : f32
    // expected-error @+1 {{tile.vstore: width must be 1, 2, 4, 8 or 16, got 5}}
    tile.vstore (%v, %v, %v, %v, %v : f32, f32, f32, f32, f32), %x[%i, %i] : memref<4x8xf32>
  }
}
// CHECK: tile.vstore: width must be 1, 2, 4, 8 or 16, got 5

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4x8xf16>) {
    %i = tile.thread_id x
    %v = arith.constant 1.0 : f32
    // expected-error @+1 {{tile.vstore: lanes must have the element type f16}}
    tile.vstore (%v, %v : f32, f32), %x[%i, %i] : memref<4x8xf16>
  }
}
// CHECK: tile.vstore: lanes must have the element type f16

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4x8xf32>) {
    %i = tile.thread_id x
    %v = arith.constant 1.0 : f32
    // expected-error @+1 {{tile.vstore: 3 indices for a rank-2 buffer}}
    tile.vstore (%v, %v : f32, f32), %x[%i, %i, %i] : memref<4x8xf32>
  }
}
// CHECK: tile.vstore: 3 indices for a rank-2 buffer

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4x16xf16>) {
    %i = tile.thread_id x
    %v = arith.constant 1.0 : f16
    // expected-error @+1 {{tile.vstore: 256-bit access is wider than 128 bits}}
    tile.vstore (%v, %v, %v, %v, %v, %v, %v, %v, %v, %v, %v, %v, %v, %v, %v, %v : f16, f16, f16, f16, f16, f16, f16, f16, f16, f16, f16, f16, f16, f16, f16, f16), %x[%i, %i] : memref<4x16xf16>
  }
}
// CHECK: tile.vstore: 256-bit access is wider than 128 bits

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4x10xf16>) {
    %i = tile.thread_id x
    %v = arith.constant 1.0 : f16
    // expected-error @+1 {{tile.vstore: last dimension 10 is not a multiple of the width 8}}
    tile.vstore (%v, %v, %v, %v, %v, %v, %v, %v : f16, f16, f16, f16, f16, f16, f16, f16), %x[%i, %i] : memref<4x10xf16>
  }
}
// CHECK: tile.vstore: last dimension 10 is not a multiple of the width 8

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4xf32>) {
    %v = arith.constant 1.0 : f32
    // expected-error @+1 {{tile.warp_reduce: combine must take two states (2 arguments of types [f32, f32]), got [f32]}}
    // A 1-value state: the combine region takes (a, b).
    %s = "tile.warp_reduce"(%v) ({
    ^bb0(%a: f32):
      "tile.yield"(%a) : (f32) -> ()
    }) {width = 32 : i64} : (f32) -> f32
  }
}
// CHECK: tile.warp_reduce: combine must take two states (2 arguments of types [f32, f32]), got [f32]

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4xf32>) {
    %v = arith.constant 1.0 : f32
    // expected-error @+1 {{tile.block_reduce: combine must take two states (4 arguments of types [f32, f32, f32, f32]), got [f32, f32]}}
    // A 2-value state: the combine region takes (a0, a1, b0, b1), not (a, b).
    %m, %l = "tile.block_reduce"(%v, %v) ({
    ^bb0(%a: f32, %b: f32):
      "tile.yield"(%a, %b) : (f32, f32) -> ()
    }) : (f32, f32) -> (f32, f32)
  }
}
// CHECK: tile.block_reduce: combine must take two states (4 arguments of types [f32, f32, f32, f32]), got [f32, f32]

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4xf32>) {
    %v = arith.constant 1.0 : f32
    // expected-error @+1 {{tile.warp_reduce: combine must yield one state of types [f32], got [f32, f32]}}
    %s = tile.warp_reduce %v : f32 combine(%a, %b) {
      %c = arith.addf %a, %b : f32
      tile.yield %c, %c : f32, f32
    }
  }
}
// CHECK: tile.warp_reduce: combine must yield one state of types [f32], got [f32, f32]

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4xf32>) {
    %v = arith.constant 1.0 : f32
    // expected-error @+1 {{tile.block_reduce: combine must end with tile.yield}}
    // A terminator of another dialect gets past the generic checks; block_reduce names it.
    %m, %l = tile.block_reduce %v, %v : f32, f32 combine(%a0, %a1, %b0, %b1) {
      "test.termop"() : () -> ()
    }
  }
}
// CHECK: tile.block_reduce: combine must end with tile.yield

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<4xf32>) {
    %v = arith.constant 1.0 : f32
    %s = tile.warp_reduce %v : f32 combine(%a, %b) {
      // expected-error @+1 {{Operation arith.addf terminates block in single-block region but is not a terminator}}
      %c = arith.addf %a, %b : f32
    }
  }
}
// CHECK: Operation arith.addf terminates block in single-block region but is not a terminator

// -----

builtin.module {
  func.func @f(%v: f32) {
    // expected-error @+1 {{'tile.yield' expects parent op to be one of 'tile.warp_reduce', 'tile.block_reduce'}}
    tile.yield %v : f32
  }
}
// CHECK: 'tile.yield' expects parent op to be one of 'tile.warp_reduce', 'tile.block_reduce'
