// RUN: not tinyopt %s -p 'fuse,tile{mma=wgmma}' 2>&1 | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{mma=auto}' | filecheck %s --check-prefix=AUTO

// A matmul whose A side is read through a reshape that splits its rows into digits
// (m / 3, m % 3) is a sum of products no GEMM rule takes. With an explicit `mma` the user
// asked for tensor cores: a diagnostic with each GEMM rule's reason, not a silent naive kernel.
// With `mma=auto` it runs on the generic rules.

// CHECK: tile: mma=wgmma cannot run kernel @mm_0, a sum of products that no GEMM rule takes (wgmma: not a contraction; {{.*}}; contraction: not a contraction (a sum of products over K))
// AUTO: tile.kernel @mm_0

func.func @mm(%x: tensor<2x3x16xbf16>, %w: tensor<16x8xbf16>) -> tensor<6x8xbf16> {
  %x2 = graph.reshape %x : tensor<2x3x16xbf16> -> tensor<6x16xbf16>
  %y = graph.matmul %x2, %w : (tensor<6x16xbf16>, tensor<16x8xbf16>) -> tensor<6x8xbf16>
  func.return %y : tensor<6x8xbf16>
}
