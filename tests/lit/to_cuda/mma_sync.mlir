// RUN: tinyopt %s -p to-cuda | filecheck %s
// Tensor-core ops print as calls of inline-PTX helpers that the prelude defines only when the
// kernel uses them: ldmatrix (plain and .trans) takes the shared address of a 16-byte row,
// mma.sync takes A, B as 32-bit registers and C, D as floats. A shared buffer read by
// ldmatrix is 16-byte aligned.

// CHECK-LABEL: // kernel @mma
// CHECK:      #include <cuda_fp16.h>
// CHECK:      __device__ __forceinline__ void tinyopt_ldmatrix_x4(int& r0, int& r1, int& r2, int& r3, const void* row) {
// CHECK-NEXT:     unsigned address = (unsigned)__cvta_generic_to_shared(row);
// CHECK-NEXT:     asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
// CHECK-NEXT:                  : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(address));
// CHECK-NEXT: }
// CHECK-NEXT: __device__ __forceinline__ void tinyopt_ldmatrix_x4_trans(
// CHECK:          asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
// CHECK:      __device__ __forceinline__ void tinyopt_mma_f16(float& d0, float& d1, float& d2, float& d3, int a0, int a1, int a2, int a3, int b0, int b1, float c0, float c1, float c2, float c3) {
// CHECK-NEXT:     asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
// CHECK-NEXT:                  "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
// CHECK-NEXT:                  "{%10, %11, %12, %13};"
// CHECK-NEXT:                  : "=f"(d0), "=f"(d1), "=f"(d2), "=f"(d3)
// CHECK-NEXT:                  : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1),
// CHECK-NEXT:                    "f"(c0), "f"(c1), "f"(c2), "f"(c3));
// CHECK-NEXT: }
// CHECK:      __shared__ alignas(16) __half s[16][24];
// CHECK:      int a0, a1, a2, a3;
// CHECK-NEXT: tinyopt_ldmatrix_x4(a0, a1, a2, a3, &s[row][0]);
// CHECK-NEXT: int b0, b1, b2, b3;
// CHECK-NEXT: tinyopt_ldmatrix_x4_trans(b0, b1, b2, b3, &s[row][8]);
// CHECK-NEXT: float d0, d1, d2, d3;
// CHECK-NEXT: tinyopt_mma_f16(d0, d1, d2, d3, a0, a1, a2, a3, b0, b1, 0.0f, 0.0f, 0.0f, 0.0f);
// CHECK-NEXT: x[row * 16] = d0;

// CHECK-LABEL: // kernel @plain
// CHECK-NOT:  tinyopt_ldmatrix
// CHECK-NOT:  tinyopt_mma
// CHECK:      extern "C"
builtin.module {
  tile.kernel @mma grid [1, 1, 1] block [32, 1, 1] (%x: memref<16x16xf32>) {
    %s = tile.alloc : memref<16x24xf16, 3 : i32>
    %c0 = arith.constant 0 : index
    %c8 = arith.constant 8 : index
    %t = tile.thread_id x
    %row = arith.remui %t, %c8 : index
    %a0, %a1, %a2, %a3 = tile.ldmatrix %s[%row, %c0] : memref<16x24xf16, 3 : i32> -> i32, i32, i32, i32
    %b0, %b1, %b2, %b3 = tile.ldmatrix %s[%row, %c8] trans : memref<16x24xf16, 3 : i32> -> i32, i32, i32, i32
    %z = arith.constant 0.0 : f32
    %d0, %d1, %d2, %d3 = tile.mma_sync a[%a0, %a1, %a2, %a3] b[%b0, %b1] c[%z, %z, %z, %z] : f16 -> f32, f32, f32, f32
    memref.store %d0, %x[%row, %c0] : memref<16x16xf32>
  }
  tile.kernel @plain grid [1, 1, 1] block [32, 1, 1] (%x: memref<16x16xf32>) {
    %c0 = arith.constant 0 : index
    %z = arith.constant 0.0 : f32
    memref.store %z, %x[%c0, %c0] : memref<16x16xf32>
  }
}
