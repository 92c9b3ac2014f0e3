// RUN: not tinyopt %s -p 'fuse,tile{mma=wgmma}' 2>&1 | filecheck %s
// A fused prologue (x + bias) is math TMA cannot do while it copies.
// CHECK: tile: mma=wgmma needs both operands to be plain loads (TMA copies raw bytes: no prologue math)

func.func @mm(%x: tensor<64x64xbf16>, %b: tensor<64xbf16>, %w: tensor<64x64xbf16>) -> tensor<64x64xbf16> {
  %bb = graph.broadcast %b : tensor<64xbf16> -> tensor<64x64xbf16>
  %a = graph.add %x, %bb : tensor<64x64xbf16>
  %m = graph.matmul %a, %w : (tensor<64x64xbf16>, tensor<64x64xbf16>) -> tensor<64x64xbf16>
  func.return %m : tensor<64x64xbf16>
}
