// RUN: tinyopt %s -p to-cuda | filecheck %s
// A block reduction over 4 warps: shuffles within each warp, lane 0 publishes the warp's
// partial in shared memory, and after a barrier every thread folds the partials in order.

// CHECK:      __launch_bounds__(128) rowsum(const float* __restrict__ x, float* __restrict__ out)
// CHECK:        float s = v;
// CHECK-NEXT:   for (int offset = 16; offset > 0; offset >>= 1) {
// CHECK-NEXT:     float q = __shfl_xor_sync(0xffffffff, s, offset, 32);
// CHECK-NEXT:     float r = s + q;
// CHECK-NEXT:     s = r;
// CHECK-NEXT:   }
// CHECK-NEXT:   __shared__ float s_partials[4];
// CHECK-NEXT:   if (threadIdx.x % 32 == 0) {
// CHECK-NEXT:     s_partials[threadIdx.x / 32] = s;
// CHECK-NEXT:   }
// CHECK-NEXT:   __syncthreads();
// CHECK-NEXT:   s = s_partials[0];
// CHECK-NEXT:   for (int warp = 1; warp < 4; ++warp) {
// CHECK-NEXT:     float q = s_partials[warp];
// CHECK-NEXT:     float r = s + q;
// CHECK-NEXT:     s = r;
// CHECK-NEXT:   }
// CHECK-NEXT:   out[row] = s;
builtin.module {
  tile.kernel @rowsum grid [64, 1, 1] block [128, 1, 1] (%x: memref<64x128xf32>, %out: memref<64xf32>) {
    %row = tile.block_id x
    %t = tile.thread_id x
    %v = memref.load %x[%row, %t] : memref<64x128xf32>
    %s = tile.block_reduce %v : f32 combine(%p, %q) {
      %r = arith.addf %p, %q : f32
      tile.yield %r : f32
    }
    memref.store %s, %out[%row] : memref<64xf32>
  }
}
