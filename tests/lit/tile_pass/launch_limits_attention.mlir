// RUN: tinyopt %s -p 'decompose,fuse,flash-attention,tile{attn=sync}' | filecheck %s

// Attention over batch × heads = 1024 × 128 = 131072 heads (16 queries each, which `attn=auto`
// would give the decode rule): the attention rule runs the heads
// along grid.y, past its limit 65535. The launch is re-gridded (passes/tile/limits.py): one
// query tile per head, so the grid folds into x, and the head's batch and head indices are
// blockIdx.x divided and reduced by the 128 heads.
//
// The scale is a 1x1x1x1 splat broadcast to the scores' shape, as decompose writes it: a
// splat of the full shape would be parsed by xDSL into all of its 33.5M elements (50 s and
// 4.8 GB here); the lowered IR is the same either way.

// CHECK:      tile.kernel @attention_2 grid [131072, 1, 1] block [128, 1, 1]
// CHECK-NEXT:   %[[FLAT:.*]] = tile.block_id x
// CHECK-NOT:    tile.block_id
// CHECK:        %[[H:.*]] = arith.constant 128 : index
// CHECK:        arith.remui %[[FLAT]], %[[H]] : index
// CHECK-NEXT:   arith.divui %[[FLAT]], %[[H]] : index
// CHECK-NOT:    tile.block_id

func.func @attention(%q: tensor<1024x128x16x16xbf16>, %k: tensor<1024x128x16x16xbf16>, %v: tensor<1024x128x16x16xbf16>) -> tensor<1024x128x16x16xbf16> {
  %kt = graph.transpose %k {perm = array<i64: 0, 1, 3, 2>} : tensor<1024x128x16x16xbf16> -> tensor<1024x128x16x16xbf16>
  %s = graph.matmul %q, %kt : (tensor<1024x128x16x16xbf16>, tensor<1024x128x16x16xbf16>) -> tensor<1024x128x16x16xbf16>
  %c1 = graph.constant dense<0.25> : tensor<1x1x1x1xbf16>
  %c = graph.broadcast %c1 : tensor<1x1x1x1xbf16> -> tensor<1024x128x16x16xbf16>
  %scaled = graph.mul %s, %c : tensor<1024x128x16x16xbf16>
  %p = graph.softmax %scaled {dim = 3 : i64} : tensor<1024x128x16x16xbf16>
  %y = graph.matmul %p, %v : (tensor<1024x128x16x16xbf16>, tensor<1024x128x16x16xbf16>) -> tensor<1024x128x16x16xbf16>
  func.return %y : tensor<1024x128x16x16xbf16>
}
