// RUN: tinyopt %s -p to-cuda | filecheck %s
// An online-softmax warp reduction of a (max, sum) pair: one XOR shuffle per state component,
// then the combine region inline; the loaded buffer is const, the stored one is not.

// CHECK:      // kernel @online grid (4, 1, 1) block (32, 1, 1) smem 0
// CHECK:      extern "C" __global__ void __launch_bounds__(32) online(const float* __restrict__ x, float* __restrict__ out) {
// CHECK:        float m = v;
// CHECK-NEXT:   float l = 1.0f;
// CHECK-NEXT:   for (int offset = 16; offset > 0; offset >>= 1) {
// CHECK-NEXT:     float m2 = __shfl_xor_sync(0xffffffff, m, offset, 32);
// CHECK-NEXT:     float l2 = __shfl_xor_sync(0xffffffff, l, offset, 32);
// CHECK-NEXT:     float mx = tinyopt_fmax_nan(m, m2);
// CHECK:          float e1 = expf(d1);
// CHECK:          m = mx;
// CHECK-NEXT:     l = total;
// CHECK-NEXT:   }
// CHECK:        if (first) {
// CHECK-NEXT:     out[row * 2] = m;
// CHECK-NEXT:     out[row * 2 + 1] = l;
builtin.module {
  tile.kernel @online grid [4, 1, 1] block [32, 1, 1] (%x: memref<4x32xf32>, %out: memref<4x2xf32>) {
    %row = tile.block_id x
    %lane = tile.thread_id x
    %v = memref.load %x[%row, %lane] : memref<4x32xf32>
    %one = arith.constant 1.0 : f32
    %m, %l = tile.warp_reduce %v, %one : f32, f32 combine(%m1, %l1, %m2, %l2) {
      %mx = arith.maximumf %m1, %m2 : f32
      %d1 = arith.subf %m1, %mx : f32
      %d2 = arith.subf %m2, %mx : f32
      %e1 = math.exp %d1 : f32
      %e2 = math.exp %d2 : f32
      %w1 = arith.mulf %l1, %e1 : f32
      %w2 = arith.mulf %l2, %e2 : f32
      %total = arith.addf %w1, %w2 : f32
      tile.yield %mx, %total : f32, f32
    }
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %first = arith.cmpi eq, %lane, %c0 : index
    scf.if %first {
      memref.store %m, %out[%row, %c0] : memref<4x2xf32>
      memref.store %l, %out[%row, %c1] : memref<4x2xf32>
    }
  }
}
