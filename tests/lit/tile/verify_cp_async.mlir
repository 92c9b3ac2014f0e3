// RUN: tinyopt %s --split-input-file --verify-diagnostics | filecheck %s

// The verifier errors of tile.cp_async and tile.cp_async_wait.

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%a: memref<64x64xf32>) {
    %c0 = arith.constant 0 : index
    %s = tile.alloc : memref<2x8x68xf32, 3 : i32>
    // expected-error @+1 {{tile.cp_async: copies 4, 8 or 16 bytes, got 8 x f32}}
    tile.cp_async %a[%c0, %c0] -> %s[%c0, %c0, %c0] {width = 8 : i64} : memref<64x64xf32> -> memref<2x8x68xf32, 3 : i32>
  }
}
// CHECK: tile.cp_async: copies 4, 8 or 16 bytes, got 8 x f32

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%a: memref<64x66xf32>) {
    %c0 = arith.constant 0 : index
    %s = tile.alloc : memref<2x8x68xf32, 3 : i32>
    // expected-error @+1 {{tile.cp_async: the source's last dimension 66 is not a multiple of the width 4 (copies must be aligned)}}
    tile.cp_async %a[%c0, %c0] -> %s[%c0, %c0, %c0] {width = 4 : i64} : memref<64x66xf32> -> memref<2x8x68xf32, 3 : i32>
  }
}
// CHECK: the source's last dimension 66 is not a multiple of the width 4

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%a: memref<64x64xf32>) {
    %c0 = arith.constant 0 : index
    %s = tile.alloc : memref<2x8x68xf32, 5 : i32>
    // expected-error @+1 {{tile.cp_async: memref<2x8x68xf32, 5 : i32> must be in shared memory}}
    tile.cp_async %a[%c0, %c0] -> %s[%c0, %c0, %c0] {width = 4 : i64} : memref<64x64xf32> -> memref<2x8x68xf32, 5 : i32>
  }
}
// CHECK: must be in shared memory

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%a: memref<64x64xf32>) {
    // expected-error @+1 {{tile.cp_async_wait: pending must be in [0, 7], got 9}}
    tile.cp_async_wait 9
  }
}
// CHECK: tile.cp_async_wait: pending must be in [0, 7], got 9
