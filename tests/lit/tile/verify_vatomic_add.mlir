// RUN: tinyopt %s --split-input-file --verify-diagnostics | filecheck %s

// tile.vatomic_add: red.global.add.v2/v4.f32 on global memory, aligned along the last dimension.

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%a: memref<64x64xf32>) {
    %c0 = arith.constant 0 : index
    %v = arith.constant 1.0 : f32
    tile.vatomic_add(%v, %v, %v, %v), %a[%c0, %c0] : memref<64x64xf32>
  }
}
// CHECK: tile.vatomic_add(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}), %{{.*}}[%{{.*}}, %{{.*}}] : memref<64x64xf32>

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%a: memref<64x64xf32>) {
    %c0 = arith.constant 0 : index
    %v = arith.constant 1.0 : f32
    %s = tile.alloc : memref<64x64xf32, 3 : i32>
    // expected-error @+1 {{tile.vatomic_add: the buffer must be global memory, got memref<64x64xf32, 3 : i32>}}
    tile.vatomic_add(%v, %v), %s[%c0, %c0] : memref<64x64xf32, 3 : i32>
  }
}
// CHECK: tile.vatomic_add: the buffer must be global memory, got memref<64x64xf32, 3 : i32>

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%a: memref<64x66xf32>) {
    %c0 = arith.constant 0 : index
    %v = arith.constant 1.0 : f32
    // expected-error @+1 {{tile.vatomic_add: last dimension 66 is not a multiple of the width 4}}
    tile.vatomic_add(%v, %v, %v, %v), %a[%c0, %c0] : memref<64x66xf32>
  }
}
// CHECK: tile.vatomic_add: last dimension 66 is not a multiple of the width 4

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%a: memref<64x64xf32>) {
    %c0 = arith.constant 0 : index
    %v = arith.constant 1.0 : f32
    // expected-error @+1 {{tile.vatomic_add: width must be 2 or 4, got 1}}
    tile.vatomic_add(%v), %a[%c0, %c0] : memref<64x64xf32>
  }
}
// CHECK: tile.vatomic_add: width must be 2 or 4, got 1
