builtin.module {
  tile.kernel @sm_0 grid [64, 1, 1] block [128, 1, 1] (%x: memref<64x128xf32>, %out: memref<64x128xf32>) {
    %row = tile.block_id x
    %t = tile.thread_id x
    %regs = tile.alloc : memref<4xf32, 5 : i32>
    %smem = tile.alloc : memref<4x33xf32, 3 : i32>
    %a, %b, %c, %d = tile.vload %x[%row, %t] : memref<64x128xf32> -> f32, f32, f32, f32
    %s = tile.warp_reduce %a : f32 attributes {width = 16 : i64} combine(%p, %q) {
      %r = arith.addf %p, %q : f32
      tile.yield %r : f32
    }
    %m, %n = tile.block_reduce %a, %b : f32, f32 combine(%p0, %p1, %q0, %q1) {
      %r0 = arith.maximumf %p0, %q0 : f32
      %r1 = arith.addf %p1, %q1 : f32
      tile.yield %r0, %r1 : f32, f32
    }
    tile.barrier
    tile.vstore (%s, %b, %m, %n : f32, f32, f32, f32), %out[%row, %t] : memref<64x128xf32>
  }
  tile.cuda_kernel @k {grid = array<i64: 1, 1, 1>, block = array<i64: 32, 1, 1>, smem = 0 : i64, source = "extern \"C\" __global__ void k() {}"}
}
