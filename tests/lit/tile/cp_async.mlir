// RUN: tinyopt %s --split-input-file | filecheck %s
// RUN: tinyopt %s --split-input-file -p to-cuda | filecheck %s --check-prefix=CUDA

// tile.cp_async round-trips, with and without the zero-fill condition, and prints as the
// cp.async helper of its size: 16 bytes bypass L1 (.cg), 4 bytes go through it (.ca).

// CHECK:      tile.cp_async %a[%c0, %c0] -> %s[%c0, %c0, %c0] if %t {width = 4 : i64} : memref<64x64xf32> -> memref<2x8x68xf32, 3 : i32>
// CHECK-NEXT: tile.cp_async %a[%c0, %c0] -> %s[%c0, %c0, %c0] {width = 1 : i64} : memref<64x64xf32> -> memref<2x8x68xf32, 3 : i32>
// CHECK-NEXT: tile.cp_async_commit
// CHECK-NEXT: tile.cp_async_wait 1

// CUDA:      cp.async.cg.shared.global [%0], [%1], 16, %2;
// CUDA:      cp.async.ca.shared.global [%0], [%1], 4, %2;
// CUDA:      k(const float* __restrict__ a)
// CUDA:      tinyopt_cp_async_16(&s[0][0][0], &a[0], t);
// CUDA-NEXT: tinyopt_cp_async_4(&s[0][0][0], &a[0], true);
// CUDA-NEXT: asm volatile("cp.async.commit_group;" ::: "memory");
// CUDA-NEXT: asm volatile("cp.async.wait_group 1;" ::: "memory");

builtin.module {
  tile.kernel @k grid [1, 1, 1] block [32, 1, 1] (%a: memref<64x64xf32>) {
    %c0 = arith.constant 0 : index
    %c16 = arith.constant 16 : index
    %i = tile.thread_id x
    %t = arith.cmpi ult, %i, %c16 : index
    %s = tile.alloc : memref<2x8x68xf32, 3 : i32>
    tile.cp_async %a[%c0, %c0] -> %s[%c0, %c0, %c0] if %t {width = 4 : i64} : memref<64x64xf32> -> memref<2x8x68xf32, 3 : i32>
    tile.cp_async %a[%c0, %c0] -> %s[%c0, %c0, %c0] {width = 1 : i64} : memref<64x64xf32> -> memref<2x8x68xf32, 3 : i32>
    tile.cp_async_commit
    tile.cp_async_wait 1
  }
}
