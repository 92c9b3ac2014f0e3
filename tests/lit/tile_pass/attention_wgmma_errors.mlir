// RUN: not tinyopt %s -p 'decompose,fuse,flash-attention,tile{attn=wgmma}' 2>&1 | filecheck %s
// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,tile' | filecheck %s --check-prefix=AUTO

// Head dim 96 is not whole 128-byte rows of bf16: attn=wgmma says so; the default attn=auto
// takes the mma.sync schedule instead.
// CHECK: tile: attn=wgmma needs head dims in (64, 128), got 96 (q·k) and 96 (v)
// AUTO: tile.kernel @attention_2 grid [1, 2, 1] block [128, 1, 1]
// AUTO: tile.mma_sync
// AUTO-NOT: tile.wgmma

func.func @attention(%q: tensor<1x2x100x96xbf16>, %k: tensor<1x2x100x96xbf16>, %v: tensor<1x2x100x96xbf16>) -> tensor<1x2x100x96xbf16> {
  %y = graph.attention %q, %k, %v {scale = 0.1 : f32} : (tensor<1x2x100x96xbf16>, tensor<1x2x100x96xbf16>, tensor<1x2x100x96xbf16>) -> tensor<1x2x100x96xbf16>
  func.return %y : tensor<1x2x100x96xbf16>
}
