// RUN: tinyopt %s -p to-cuda | filecheck %s
// Vector accesses go through the tinyopt_vec prelude type, for global and shared buffers;
// a vector-accessed shared array is 16-byte aligned.

// CHECK:      template <typename T, int N> struct alignas(sizeof(T) * N) tinyopt_vec { T v[N]; };
// CHECK:      __shared__ alignas(16) float stage[8][128];
// CHECK-NEXT: tinyopt_vec<float, 4> vec = *reinterpret_cast<const tinyopt_vec<float, 4>*>(&x[row * 128 + col]);
// CHECK-NEXT: float a = vec.v[0];
// CHECK-NEXT: float b = vec.v[1];
// CHECK-NEXT: float c = vec.v[2];
// CHECK-NEXT: float d = vec.v[3];
// CHECK-NEXT: *reinterpret_cast<tinyopt_vec<float, 4>*>(&stage[sub][col]) = tinyopt_vec<float, 4>{{[{][{]}}a, b, c, d{{[}][}]}};
// CHECK-NEXT: __syncthreads();
// CHECK-NEXT: tinyopt_vec<float, 4> vec_1 = *reinterpret_cast<const tinyopt_vec<float, 4>*>(&stage[sub][col]);
builtin.module {
  tile.kernel @staged grid [8, 1, 1] block [32, 1, 1] (%x: memref<64x128xf32>, %out: memref<64x128xf32>) {
    %row = tile.block_id x
    %lane = tile.thread_id x
    %c0 = arith.constant 0 : index
    %c4 = arith.constant 4 : index
    %col = arith.muli %lane, %c4 : index
    %sub = arith.addi %c0, %c0 : index
    %stage = tile.alloc : memref<8x128xf32, 3 : i32>
    %a, %b, %c, %d = tile.vload %x[%row, %col] : memref<64x128xf32> -> f32, f32, f32, f32
    tile.vstore (%a, %b, %c, %d : f32, f32, f32, f32), %stage[%sub, %col] : memref<8x128xf32, 3 : i32>
    tile.barrier
    %e, %f, %g, %h = tile.vload %stage[%sub, %col] : memref<8x128xf32, 3 : i32> -> f32, f32, f32, f32
    tile.vstore (%e, %f, %g, %h : f32, f32, f32, f32), %out[%row, %col] : memref<64x128xf32>
  }
}
