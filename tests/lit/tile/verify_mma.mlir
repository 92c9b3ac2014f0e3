// RUN: tinyopt %s --split-input-file --verify-diagnostics | filecheck %s

// Verifier errors of the tensor-core ops: ldmatrix's buffer (shared, 16-bit, rank, aligned
// rows, 4 registers) and mma_sync's element type and register counts.

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<16x24xf16>) {
    %c0 = arith.constant 0 : index
    %z = arith.constant 0.0 : f32
    %s = tile.alloc : memref<16x24xf16, 3 : i32>
    %r = tile.alloc : memref<16x20xf16, 3 : i32>
    %f = tile.alloc : memref<16x24xf32, 3 : i32>
    %a0, %a1, %a2, %a3 = tile.ldmatrix %s[%c0, %c0] : memref<16x24xf16, 3 : i32> -> i32, i32, i32, i32
    // expected-error @+1 {{tile.ldmatrix: the buffer must be in shared memory, got memref<16x24xf16>}}
    %b0, %b1, %b2, %b3 = tile.ldmatrix %x[%c0, %c0] : memref<16x24xf16> -> i32, i32, i32, i32
  }
}
// CHECK: tile.ldmatrix: the buffer must be in shared memory, got memref<16x24xf16>

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<16x24xf16>) {
    %c0 = arith.constant 0 : index
    %z = arith.constant 0.0 : f32
    %s = tile.alloc : memref<16x24xf16, 3 : i32>
    %r = tile.alloc : memref<16x20xf16, 3 : i32>
    %f = tile.alloc : memref<16x24xf32, 3 : i32>
    %a0, %a1, %a2, %a3 = tile.ldmatrix %s[%c0, %c0] : memref<16x24xf16, 3 : i32> -> i32, i32, i32, i32
    // expected-error @+1 {{tile.ldmatrix: the buffer must hold f16 or bf16, got f32}}
    %b0, %b1, %b2, %b3 = tile.ldmatrix %f[%c0, %c0] : memref<16x24xf32, 3 : i32> -> i32, i32, i32, i32
  }
}
// CHECK: tile.ldmatrix: the buffer must hold f16 or bf16, got f32

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<16x24xf16>) {
    %c0 = arith.constant 0 : index
    %z = arith.constant 0.0 : f32
    %s = tile.alloc : memref<16x24xf16, 3 : i32>
    %r = tile.alloc : memref<16x20xf16, 3 : i32>
    %f = tile.alloc : memref<16x24xf32, 3 : i32>
    %a0, %a1, %a2, %a3 = tile.ldmatrix %s[%c0, %c0] : memref<16x24xf16, 3 : i32> -> i32, i32, i32, i32
    // expected-error @+1 {{tile.ldmatrix: 1 indices for a rank-2 buffer}}
    %b0, %b1, %b2, %b3 = tile.ldmatrix %s[%c0] : memref<16x24xf16, 3 : i32> -> i32, i32, i32, i32
  }
}
// CHECK: tile.ldmatrix: 1 indices for a rank-2 buffer

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<16x24xf16>) {
    %c0 = arith.constant 0 : index
    %z = arith.constant 0.0 : f32
    %s = tile.alloc : memref<16x24xf16, 3 : i32>
    %r = tile.alloc : memref<16x20xf16, 3 : i32>
    %f = tile.alloc : memref<16x24xf32, 3 : i32>
    %a0, %a1, %a2, %a3 = tile.ldmatrix %s[%c0, %c0] : memref<16x24xf16, 3 : i32> -> i32, i32, i32, i32
    // expected-error @+1 {{tile.ldmatrix: rows must start 16-byte aligned, but the last dimension 20 is not a multiple of 8}}
    %b0, %b1, %b2, %b3 = tile.ldmatrix %r[%c0, %c0] : memref<16x20xf16, 3 : i32> -> i32, i32, i32, i32
  }
}
// CHECK: tile.ldmatrix: rows must start 16-byte aligned, but the last dimension 20 is not a multiple of 8

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<16x24xf16>) {
    %c0 = arith.constant 0 : index
    %z = arith.constant 0.0 : f32
    %s = tile.alloc : memref<16x24xf16, 3 : i32>
    %r = tile.alloc : memref<16x20xf16, 3 : i32>
    %f = tile.alloc : memref<16x24xf32, 3 : i32>
    %a0, %a1, %a2, %a3 = tile.ldmatrix %s[%c0, %c0] : memref<16x24xf16, 3 : i32> -> i32, i32, i32, i32
    // expected-error @+1 {{tile.ldmatrix: must return 4 i32 registers (.x4), got 2}}
    %b0, %b1 = tile.ldmatrix %s[%c0, %c0] trans : memref<16x24xf16, 3 : i32> -> i32, i32
  }
}
// CHECK: tile.ldmatrix: must return 4 i32 registers (.x4), got 2

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<16x24xf16>) {
    %c0 = arith.constant 0 : index
    %z = arith.constant 0.0 : f32
    %s = tile.alloc : memref<16x24xf16, 3 : i32>
    %r = tile.alloc : memref<16x20xf16, 3 : i32>
    %f = tile.alloc : memref<16x24xf32, 3 : i32>
    %a0, %a1, %a2, %a3 = tile.ldmatrix %s[%c0, %c0] : memref<16x24xf16, 3 : i32> -> i32, i32, i32, i32
    // expected-error @+1 {{tile.mma_sync: element type must be f16, bf16 or f32 (TF32), got f64}}
    %d0, %d1, %d2, %d3 = tile.mma_sync a[%a0, %a1, %a2, %a3] b[%a0, %a1] c[%z, %z, %z, %z] : f64 -> f32, f32, f32, f32
  }
}
// CHECK: tile.mma_sync: element type must be f16, bf16 or f32 (TF32), got f64

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<16x24xf16>) {
    %c0 = arith.constant 0 : index
    %z = arith.constant 0.0 : f32
    %s = tile.alloc : memref<16x24xf16, 3 : i32>
    %r = tile.alloc : memref<16x20xf16, 3 : i32>
    %f = tile.alloc : memref<16x24xf32, 3 : i32>
    %a0, %a1, %a2, %a3 = tile.ldmatrix %s[%c0, %c0] : memref<16x24xf16, 3 : i32> -> i32, i32, i32, i32
    // expected-error @+1 {{tile.mma_sync: A must be 4 registers per lane, got 3}}
    %d0, %d1, %d2, %d3 = tile.mma_sync a[%a0, %a1, %a2] b[%a0, %a1] c[%z, %z, %z, %z] : bf16 -> f32, f32, f32, f32
  }
}
// CHECK: tile.mma_sync: A must be 4 registers per lane, got 3

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<16x24xf16>) {
    %c0 = arith.constant 0 : index
    %z = arith.constant 0.0 : f32
    %s = tile.alloc : memref<16x24xf16, 3 : i32>
    %r = tile.alloc : memref<16x20xf16, 3 : i32>
    %f = tile.alloc : memref<16x24xf32, 3 : i32>
    %a0, %a1, %a2, %a3 = tile.ldmatrix %s[%c0, %c0] : memref<16x24xf16, 3 : i32> -> i32, i32, i32, i32
    // expected-error @+1 {{tile.mma_sync: B must be 2 registers per lane, got 1}}
    %d0, %d1, %d2, %d3 = tile.mma_sync a[%a0, %a1, %a2, %a3] b[%a0] c[%z, %z, %z, %z] : bf16 -> f32, f32, f32, f32
  }
}
// CHECK: tile.mma_sync: B must be 2 registers per lane, got 1

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%x: memref<16x24xf16>) {
    %c0 = arith.constant 0 : index
    %z = arith.constant 0.0 : f32
    %s = tile.alloc : memref<16x24xf16, 3 : i32>
    %r = tile.alloc : memref<16x20xf16, 3 : i32>
    %f = tile.alloc : memref<16x24xf32, 3 : i32>
    %a0, %a1, %a2, %a3 = tile.ldmatrix %s[%c0, %c0] : memref<16x24xf16, 3 : i32> -> i32, i32, i32, i32
    // expected-error @+1 {{tile.mma_sync: C must be 4 registers per lane, got 2}}
    %d0, %d1 = tile.mma_sync a[%a0, %a1, %a2, %a3] b[%a0, %a1] c[%z, %z] : f16 -> f32, f32
  }
}
// CHECK: tile.mma_sync: C must be 4 registers per lane, got 2

// -----

// An M-major A (`a_mn_major`) names the distance between its 64-row chunks (`a_lbo`), and only
// 16-bit operands are read so (wgmma transposes no other type).
builtin.module {
  tile.kernel @k grid [1, 1, 1] block [128, 1, 1] () {
    %c0 = arith.constant 0 : index
    %as = tile.alloc dynamic : memref<1x64x64xbf16, 3 : i32>
    %bs = tile.alloc dynamic : memref<64x64xbf16, 3 : i32>
    %acc = tile.alloc : memref<32xf32, 5 : i32>
    // expected-error @+1 {{tile.wgmma: an M-major A (a_mn_major) needs a_lbo, and only it}}
    tile.wgmma %acc, %as[%c0, %c0, %c0] a_mn_major, %bs[%c0, %c0] {n = 64 : i64, a_sbo = 1024 : i64, b_lbo = 16 : i64, b_sbo = 1024 : i64} : memref<32xf32, 5 : i32>, memref<1x64x64xbf16, 3 : i32>, memref<64x64xbf16, 3 : i32>
  }
}
// CHECK: tile.wgmma: an M-major A (a_mn_major) needs a_lbo, and only it

// -----

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [128, 1, 1] () {
    %c0 = arith.constant 0 : index
    %as = tile.alloc dynamic : memref<1x32x128xf8E4M3FN, 3 : i32>
    %bs = tile.alloc dynamic : memref<64x128xf8E4M3FN, 3 : i32>
    %acc = tile.alloc : memref<32xf32, 5 : i32>
    // expected-error @+1 {{tile.wgmma: a product of f8E4M3FN operands takes A K-major only}}
    tile.wgmma %acc, %as[%c0, %c0, %c0] a_mn_major, %bs[%c0, %c0] {n = 64 : i64, a_sbo = 1024 : i64, b_lbo = 16 : i64, b_sbo = 1024 : i64, a_lbo = 8192 : i64} : memref<32xf32, 5 : i32>, memref<1x32x128xf8E4M3FN, 3 : i32>, memref<64x128xf8E4M3FN, 3 : i32>
  }
}
// CHECK: tile.wgmma: a product of f8E4M3FN operands takes A K-major only
