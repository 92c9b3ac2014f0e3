// RUN: tinyopt %s -p 'fuse,plan{mma=wgmma}' | filecheck %s --check-prefix=WGMMA
// RUN: tinyopt %s -p 'fuse,plan{skinny=on}' | filecheck %s --check-prefix=ON

// The skinny rule's selector (docs/knobs.md, `skinny`): an explicit mma leaves a skinny GEMM
// to the rule it names (here wgmma, 32 blocks of 128x128); skinny=on takes one that `auto`
// leaves to the tensor cores (64 rows of bf16), and where M > 64 the other rules plan it.

// WGMMA: loop.kernel @rows8_0({{.*}}) attributes {plan = #tile.plan<wgmma,
// ON:    loop.kernel @rows8_0({{.*}}) attributes {plan = #tile.plan<skinny,
func.func @rows8(%x: tensor<8x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<8x4096xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  %y = graph.matmul %x, %wt : (tensor<8x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<8x4096xbf16>
  func.return %y : tensor<8x4096xbf16>
}

// WGMMA: loop.kernel @rows64_0({{.*}}) attributes {plan = #tile.plan<wgmma,
// ON:    loop.kernel @rows64_0({{.*}}) attributes {plan = #tile.plan<skinny, threads = 256, vec = 8, rows = 16, cols = 2, unroll = 4, splits = 1, evict = "{{[a-z]+}}">
func.func @rows64(%x: tensor<64x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<64x4096xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  %y = graph.matmul %x, %wt : (tensor<64x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<64x4096xbf16>
  func.return %y : tensor<64x4096xbf16>
}

// WGMMA: loop.kernel @rows65_0({{.*}}) attributes {plan = #tile.plan<wgmma,
// ON:    loop.kernel @rows65_0({{.*}}) attributes {plan = #tile.plan<wgmma,
func.func @rows65(%x: tensor<65x4096xbf16>, %w: tensor<4096x4096xbf16>) -> tensor<65x4096xbf16> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<4096x4096xbf16> -> tensor<4096x4096xbf16>
  %y = graph.matmul %x, %wt : (tensor<65x4096xbf16>, tensor<4096x4096xbf16>) -> tensor<65x4096xbf16>
  func.return %y : tensor<65x4096xbf16>
}
