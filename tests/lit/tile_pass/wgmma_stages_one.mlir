// RUN: tinyopt %s -p 'fuse,plan{stages=1 why=1}' | filecheck %s

// stages=1 under mma=auto: the wgmma rule needs a ring of at least two TMA slots (a one-slot
// ring hung on the H200, 2026-12-03), so it refuses and the mma.sync rule takes the GEMM with
// its single-buffered K loop. (mma=wgmma stages=1 is a knob error: knob_errors.mlir.)
// CHECK:      loop.kernel @linear_0(
// CHECK-SAME: plan = #tile.plan<mma_sync, {{.*}}stages = 1, store = "smem">
// CHECK-SAME: "wgmma: mma=wgmma needs stages of at least 2 (a ring of TMA slots filled ahead), got stages=1"
func.func @linear(%x: tensor<334x264xbf16>, %w: tensor<957x264xbf16>) -> tensor<334x957xbf16> {
  %y = graph.linear %x, %w : (tensor<334x264xbf16>, tensor<957x264xbf16>) -> tensor<334x957xbf16>
  func.return %y : tensor<334x957xbf16>
}
