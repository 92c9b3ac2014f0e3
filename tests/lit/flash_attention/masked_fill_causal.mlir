// RUN: tinyopt %s -p fuse,flash-attention | filecheck %s

// Attention written out as GPT-2 writes it: scores masked_fill'ed with -inf where a causal
// mask (tril of ones, from row and column indices) is 0, softmax, times v. flash-attention
// proves the mask causal on the whole (i, j) grid and canonicalizes it to `j > i ? -inf : 0`
// added to the score, the form the attention tile rules skip masked tiles for.

func.func @gpt2_attention(%q: tensor<2x64x32xf32>, %k: tensor<2x64x32xf32>, %v: tensor<2x64x32xf32>) -> tensor<2x64x32xf32> {
  %kt = graph.transpose %k {perm = array<i64: 0, 2, 1>} : tensor<2x64x32xf32> -> tensor<2x32x64xf32>
  %s = graph.matmul %q, %kt : (tensor<2x64x32xf32>, tensor<2x32x64xf32>) -> tensor<2x64x64xf32>
  %rows = graph.iota {dim = 0} : tensor<64x64xf32>
  %cols = graph.iota {dim = 1} : tensor<64x64xf32>
  %above = graph.sub %cols, %rows : tensor<64x64xf32>
  %zero = graph.constant dense<0.0> : tensor<1x1xf32>
  %zeros = graph.broadcast %zero : tensor<1x1xf32> -> tensor<64x64xf32>
  %keep = graph.compare %above, %zeros {predicate = "le"} : tensor<64x64xf32> -> tensor<64x64xi1>
  %one = graph.constant dense<1.0> : tensor<1x1xf32>
  %ones = graph.broadcast %one : tensor<1x1xf32> -> tensor<64x64xf32>
  %tril = graph.select %keep, %ones, %zeros : tensor<64x64xi1>, tensor<64x64xf32>
  %off = graph.compare %tril, %zeros {predicate = "eq"} : tensor<64x64xf32> -> tensor<64x64xi1>
  %off3 = graph.broadcast %off : tensor<64x64xi1> -> tensor<2x64x64xi1>
  %ninf = graph.constant dense<0xFF800000> : tensor<1x1x1xf32>
  %fill = graph.broadcast %ninf : tensor<1x1x1xf32> -> tensor<2x64x64xf32>
  %masked = graph.select %off3, %fill, %s : tensor<2x64x64xi1>, tensor<2x64x64xf32>
  %p = graph.softmax %masked {dim = 2 : i64} : tensor<2x64x64xf32>
  %o = graph.matmul %p, %v : (tensor<2x64x64xf32>, tensor<2x64x32xf32>) -> tensor<2x64x32xf32>
  func.return %o : tensor<2x64x32xf32>
}
// CHECK:      loop.kernel @gpt2_attention_{{[0-9]+}}(%{{.*}}: memref<2x64x32xf32>, %{{.*}}: memref<2x64x32xf32>, %{{.*}}: memref<2x64x32xf32>, %{{.*}}: memref<2x64x32xf32>)
// CHECK:        loop.reduce {{.*}} attributes {tinyopt.flash_attention}
// CHECK:          %[[ABOVE:.*]] = arith.cmpi ugt, %{{.*}}, %{{.*}} : index
// CHECK:          %[[MASK:.*]] = arith.select %[[ABOVE]], %{{.*}}, %{{.*}} : f32
// CHECK:          arith.addf %{{.*}}, %[[MASK]] : f32
// CHECK-NOT:  loop.kernel
