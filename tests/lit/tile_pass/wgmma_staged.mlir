// RUN: tinyopt %s -p 'fuse,plan{why=1}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,plan{align=off}' | filecheck %s --check-prefix=OFF
// RUN: tinyopt %s -p 'fuse,plan{align=on}' | filecheck %s --check-prefix=ON

// Operand rows TMA cannot address (passes/tile/gemm/wgmma_staged.py): a row of 4095 bf16 is
// 8190 bytes, not a multiple of 16. Where the GEMM's FLOPs pay for the copies' bytes, each
// such operand is copied into a workspace with rows padded to 64 elements (zeros past the
// row), and the wgmma rule runs the GEMM on the workspaces; align=off leaves it to mma.sync.

// Batched 4095³ (torch.bmm): A's rows are K, B's ([K, N]) are N; both are copied.
// CHECK:      loop.kernel @bmm_0_pad_a(%{{.*}}: memref<3x4095x4095xbf16>, %{{.*}}: memref<3x4095x4096xbf16>) attributes {plan = #tile.plan<elementwise,
// CHECK:      loop.parallel (%{{.*}}, %{{.*}}, %{{.*}}) in [3, 4095, 4096]
// CHECK:      loop.kernel @bmm_0_pad_b(%{{.*}}: memref<3x4095x4095xbf16>, %{{.*}}: memref<3x4095x4096xbf16>) attributes {plan = #tile.plan<elementwise,
// CHECK:      loop.kernel @bmm_0(%{{.*}}: memref<3x4095x4095xbf16>, %{{.*}}: memref<3x4095x4096xbf16>, %{{.*}}: memref<3x4095x4096xbf16>) attributes {plan = #tile.plan<wgmma, bm = 128, bn = 256,
// CHECK:      loop.reduce (%{{.*}}) in [4095]
// CHECK:      func.func @bmm
// CHECK:      loop.launch @bmm_0_pad_a
// CHECK-NEXT: loop.launch @bmm_0_pad_b
// CHECK-NEXT: loop.launch @bmm_0(
// OFF:        loop.kernel @bmm_0({{.*}}) attributes {plan = #tile.plan<mma_sync, bm = 128, bn = 128,
// OFF-NOT:    _pad_
func.func @bmm(%a: tensor<3x4095x4095xbf16>, %b: tensor<3x4095x4095xbf16>) -> tensor<3x4095x4095xbf16> {
  %c = graph.matmul %a, %b : (tensor<3x4095x4095xbf16>, tensor<3x4095x4095xbf16>) -> tensor<3x4095x4095xbf16>
  func.return %c : tensor<3x4095x4095xbf16>
}

// A batch of 127³: two more launches would cost more than the product, so it stays on
// mma.sync, in 32×32 blocks (64×64 ones would be 12 for 132 SMs), its 48 blocks one partial
// wave whose whole K loop (4 steps) is in flight (stages = 5); align=on copies anyway.
// CHECK:      loop.kernel @small_0({{.*}}) attributes {plan = #tile.plan<mma_sync, bm = 32, bn = 32, bk = 32, wm = 16, wn = 16, vec = 8, stages = 5, store = "smem">
// CHECK-SAME: "wgmma_staged: the copies would not pay, by the estimate: 2 copies of
// ON:         loop.kernel @small_0_pad_a
// ON:         loop.kernel @small_0_pad_b
// ON:         loop.kernel @small_0({{.*}}) attributes {plan = #tile.plan<wgmma, bm = 64, bn = 64,
func.func @small(%a: tensor<3x127x127xbf16>, %b: tensor<3x127x127xbf16>) -> tensor<3x127x127xbf16> {
  %c = graph.matmul %a, %b : (tensor<3x127x127xbf16>, tensor<3x127x127xbf16>) -> tensor<3x127x127xbf16>
  func.return %c : tensor<3x127x127xbf16>
}

// A torch linear with K = 2047 and 64 rows: a skinny shape, never staged by auto (its plan is
// the one it had); K = 4096, N = 4095 with [N, K] weights: rows aligned, the wgmma rule alone.
// CHECK:      loop.kernel @skinny_0({{.*}}) attributes {plan = #tile.plan<mma_sync,
// CHECK-SAME: "wgmma_staged: M = 64 rows: the skinny and GEMV shapes are not staged (align=on does)"
// CHECK:      loop.kernel @aligned_0({{.*}}) attributes {plan = #tile.plan<wgmma,
// CHECK-NOT:  wgmma_staged
func.func @skinny(%x: tensor<64x2047xbf16>, %w: tensor<4096x2047xbf16>) -> tensor<64x4096xbf16> {
  %y = graph.linear %x, %w : (tensor<64x2047xbf16>, tensor<4096x2047xbf16>) -> tensor<64x4096xbf16>
  func.return %y : tensor<64x4096xbf16>
}
func.func @aligned(%x: tensor<1000x4096xbf16>, %w: tensor<4095x4096xbf16>) -> tensor<1000x4095xbf16> {
  %y = graph.linear %x, %w : (tensor<1000x4096xbf16>, tensor<4095x4096xbf16>) -> tensor<1000x4095xbf16>
  func.return %y : tensor<1000x4095xbf16>
}
