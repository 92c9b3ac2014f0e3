// RUN: not tinyopt %s -p 'fuse,tile{mma=wgmma}' 2>&1 | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{mma=auto}' | filecheck %s --check-prefix=AUTO

// A matmul whose A rows are gathered (an embedding's rows at token ids) is a sum of products
// no GEMM rule takes. With an explicit `mma` the user asked for tensor cores: a diagnostic with
// each GEMM rule's reason, not a silent naive kernel. With `mma=auto` it runs on the generic
// rules.

// CHECK: tile: mma=wgmma cannot run kernel @mm_0, a sum of products that no GEMM rule takes (wgmma: not a contraction; {{.*}}; contraction: not a contraction (a sum of products over K))
// AUTO: tile.kernel @mm_0

func.func @mm(%t: tensor<50x16xbf16>, %ids: tensor<6xi64>, %w: tensor<16x8xbf16>) -> tensor<6x8xbf16> {
  %x = graph.gather %t, %ids : (tensor<50x16xbf16>, tensor<6xi64>) -> tensor<6x16xbf16>
  %y = graph.matmul %x, %w : (tensor<6x16xbf16>, tensor<16x8xbf16>) -> tensor<6x8xbf16>
  func.return %y : tensor<6x8xbf16>
}
