// RUN: tinyopt %s -p 'fuse,plan{swap=off}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,plan{mma=none}' | filecheck %s --check-prefix=CORES
// RUN: tinyopt %s -p 'fuse,plan{splitk=1 swap=off}' | filecheck %s --check-prefix=UNSPLIT

// With swap=off (swap=auto takes 17 rows and more: swap_3xtf32.mlir), f32 linears of 33-64 rows too
// small for the CUDA-core rule's 64-row block (its stream-K wave would get fewer than 16 K
// steps of a 64x64 tile a block): under mma=auto the 3xTF32 rule takes them where K is split
// over its 64x64 blocks (passes/tile/gemm/wgmma_3xtf32.py, `_starved`); the split's partial
// kernel too.
// CHECK:      loop.kernel @kv_0_splitk({{.*}}) attributes {tinyopt.split_k_partial, plan = #tile.plan<wgmma_3xtf32, bm = 64, bn = 64,
// CHECK:      loop.kernel @kv_0_reduce
// CORES:      loop.kernel @kv_0({{.*}}plan = #tile.plan<contraction, bm = 32, bn = 64,
// With splitk=1 (never split) the 64x64 blocks would run unsplit: the CUDA cores keep it.
// UNSPLIT:    loop.kernel @kv_0({{.*}}plan = #tile.plan<contraction, bm = 32, bn = 64,
func.func @kv(%x: tensor<48x4096xf32>, %w: tensor<1024x4096xf32>) -> tensor<48x1024xf32> {
  %y = graph.linear %x, %w : (tensor<48x4096xf32>, tensor<1024x4096xf32>) -> tensor<48x1024xf32>
  func.return %y : tensor<48x1024xf32>
}

// K too short to split (two 32-wide steps): the CUDA cores keep it.
// CHECK:      loop.kernel @short_k_0({{.*}}plan = #tile.plan<contraction,
// CHECK-NOT:  @short_k_0_splitk
func.func @short_k(%x: tensor<64x64xf32>, %w: tensor<256x64xf32>) -> tensor<64x256xf32> {
  %y = graph.linear %x, %w : (tensor<64x64xf32>, tensor<256x64xf32>) -> tensor<64x256xf32>
  func.return %y : tensor<64x256xf32>
}

// Enough work for the 64-row block (31 K steps a block): the CUDA cores keep it, on 64x64
// tiles of 8x4 (too few steps a block for 64x128 ones).
// CHECK:      loop.kernel @qo_0({{.*}}plan = #tile.plan<contraction, bm = 64, bn = 64, bk = 16, tm = 8, tn = 4,
func.func @qo(%x: tensor<64x4096xf32>, %w: tensor<4096x4096xf32>) -> tensor<64x4096xf32> {
  %y = graph.linear %x, %w : (tensor<64x4096xf32>, tensor<4096x4096xf32>) -> tensor<64x4096xf32>
  func.return %y : tensor<64x4096xf32>
}
