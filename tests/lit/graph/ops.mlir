// RUN: tinyopt %s | tinyopt --print-op-generic | tinyopt | filecheck %s
// RUN: tinyopt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// Every graph op survives custom -> generic -> custom printing unchanged.

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %h: tensor<4x8xbf16>) -> tensor<4x8xf32> {
  // CHECK-NEXT: %neg = graph.neg %x : tensor<4x8xf32>
  %neg = graph.neg %x : tensor<4x8xf32>
  // CHECK-NEXT: %abs = graph.abs %x : tensor<4x8xf32>
  %abs = graph.abs %x : tensor<4x8xf32>
  // CHECK-NEXT: %exp = graph.exp %x : tensor<4x8xf32>
  %exp = graph.exp %x : tensor<4x8xf32>
  // CHECK-NEXT: %log = graph.log %x : tensor<4x8xf32>
  %log = graph.log %x : tensor<4x8xf32>
  // CHECK-NEXT: %sqrt = graph.sqrt %x : tensor<4x8xf32>
  %sqrt = graph.sqrt %x : tensor<4x8xf32>
  // CHECK-NEXT: %rsqrt = graph.rsqrt %x : tensor<4x8xf32>
  %rsqrt = graph.rsqrt %x : tensor<4x8xf32>
  // CHECK-NEXT: %reciprocal = graph.reciprocal %x : tensor<4x8xf32>
  %reciprocal = graph.reciprocal %x : tensor<4x8xf32>
  // CHECK-NEXT: %tanh = graph.tanh %x : tensor<4x8xf32>
  %tanh = graph.tanh %x : tensor<4x8xf32>
  // CHECK-NEXT: %sigmoid = graph.sigmoid %x : tensor<4x8xf32>
  %sigmoid = graph.sigmoid %x : tensor<4x8xf32>
  // CHECK-NEXT: %relu = graph.relu %x : tensor<4x8xf32>
  %relu = graph.relu %x : tensor<4x8xf32>
  // CHECK-NEXT: %gelu = graph.gelu %x : tensor<4x8xf32>
  %gelu = graph.gelu %x : tensor<4x8xf32>
  // CHECK-NEXT: %gelu_tanh = graph.gelu_tanh %x : tensor<4x8xf32>
  %gelu_tanh = graph.gelu_tanh %x : tensor<4x8xf32>
  // CHECK-NEXT: %silu = graph.silu %x : tensor<4x8xf32>
  %silu = graph.silu %x : tensor<4x8xf32>
  // CHECK-NEXT: %add = graph.add %x, %y : tensor<4x8xf32>
  %add = graph.add %x, %y : tensor<4x8xf32>
  // CHECK-NEXT: %sub = graph.sub %x, %y : tensor<4x8xf32>
  %sub = graph.sub %x, %y : tensor<4x8xf32>
  // CHECK-NEXT: %mul = graph.mul %x, %y : tensor<4x8xf32>
  %mul = graph.mul %x, %y : tensor<4x8xf32>
  // CHECK-NEXT: %div = graph.div %x, %y : tensor<4x8xf32>
  %div = graph.div %x, %y : tensor<4x8xf32>
  // CHECK-NEXT: %max = graph.max %x, %y : tensor<4x8xf32>
  %max = graph.max %x, %y : tensor<4x8xf32>
  // CHECK-NEXT: %min = graph.min %x, %y : tensor<4x8xf32>
  %min = graph.min %x, %y : tensor<4x8xf32>
  // CHECK-NEXT: %pow = graph.pow %x, %y : tensor<4x8xf32>
  %pow = graph.pow %x, %y : tensor<4x8xf32>
  // CHECK-NEXT: %to_f16 = graph.cast %x : tensor<4x8xf32> -> tensor<4x8xf16>
  %to_f16 = graph.cast %x : tensor<4x8xf32> -> tensor<4x8xf16>
  // CHECK-NEXT: %to_f32 = graph.cast %h : tensor<4x8xbf16> -> tensor<4x8xf32>
  %to_f32 = graph.cast %h : tensor<4x8xbf16> -> tensor<4x8xf32>
  func.return %add : tensor<4x8xf32>
}
// GENERIC-LABEL: sym_name = "elementwise"
// GENERIC: %exp = "graph.exp"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// GENERIC: %add = "graph.add"(%x, %y) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-LABEL: func.func @reductions
func.func @reductions(%x: tensor<4x8x16xf16>) {
  // CHECK-NEXT: %s = graph.reduce_sum %x {dims = array<i64: 1>, keepdim = true} : tensor<4x8x16xf16> -> tensor<4x1x16xf16>
  %s = graph.reduce_sum %x {dims = array<i64: 1>, keepdim = true} : tensor<4x8x16xf16> -> tensor<4x1x16xf16>
  // CHECK-NEXT: %m = graph.reduce_max %x {dims = array<i64: 0, 2>} : tensor<4x8x16xf16> -> tensor<8xf16>
  %m = graph.reduce_max %x {dims = array<i64: 0, 2>} : tensor<4x8x16xf16> -> tensor<8xf16>
  // keepdim = false is the default, so it is not printed.
  // CHECK-NEXT: %a = graph.reduce_mean %x {dims = array<i64: 2>} : tensor<4x8x16xf16> -> tensor<4x8xf16>
  %a = graph.reduce_mean %x {dims = array<i64: 2>, keepdim = false} : tensor<4x8x16xf16> -> tensor<4x8xf16>
  func.return
}
// GENERIC-LABEL: sym_name = "reductions"
// GENERIC: "graph.reduce_sum"(%x) <{dims = array<i64: 1>, keepdim = true}> : (tensor<4x8x16xf16>) -> tensor<4x1x16xf16>
// GENERIC: "graph.reduce_max"(%x) <{dims = array<i64: 0, 2>, keepdim = false}> : (tensor<4x8x16xf16>) -> tensor<8xf16>

// CHECK-LABEL: func.func @shapes
func.func @shapes(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %ba: tensor<2x4x8xf32>, %bb: tensor<2x8x16xf32>, %v: tensor<8xf32>) {
  // CHECK-NEXT: %c = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %c = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  // CHECK-NEXT: %bc = graph.matmul %ba, %bb : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
  %bc = graph.matmul %ba, %bb : (tensor<2x4x8xf32>, tensor<2x8x16xf32>) -> tensor<2x4x16xf32>
  // CHECK-NEXT: %t = graph.transpose %ba {perm = array<i64: 2, 0, 1>} : tensor<2x4x8xf32> -> tensor<8x2x4xf32>
  %t = graph.transpose %ba {perm = array<i64: 2, 0, 1>} : tensor<2x4x8xf32> -> tensor<8x2x4xf32>
  // CHECK-NEXT: %r = graph.reshape %ba : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %r = graph.reshape %ba : tensor<2x4x8xf32> -> tensor<8x8xf32>
  // CHECK-NEXT: %bv = graph.broadcast %v : tensor<8xf32> -> tensor<2x4x8xf32>
  %bv = graph.broadcast %v : tensor<8xf32> -> tensor<2x4x8xf32>
  // CHECK-NEXT: %k = graph.constant dense<1.000000e+00> : tensor<4x8xf32>
  %k = graph.constant dense<1.0> : tensor<4x8xf32>
  // CHECK-NEXT: %d = graph.constant dense<[0.000000e+00, -2.500000e+00]> : tensor<2xf32>
  %d = graph.constant dense<[0.0, -2.5]> : tensor<2xf32>
  func.return
}
// GENERIC-LABEL: sym_name = "shapes"
// GENERIC: "graph.transpose"(%ba) <{perm = array<i64: 2, 0, 1>}> : (tensor<2x4x8xf32>) -> tensor<8x2x4xf32>
// GENERIC: "graph.constant"() <{value = dense<1.000000e+00> : tensor<4x8xf32>}> : () -> tensor<4x8xf32>

// CHECK-LABEL: func.func @composites
func.func @composites(%x: tensor<2x3x8xbf16>, %w: tensor<8xbf16>, %b: tensor<8xbf16>, %lw: tensor<16x8xbf16>, %lb: tensor<16xbf16>, %q: tensor<2x4x16x8xf16>) {
  // CHECK-NEXT: %s = graph.softmax %x {dim = 2 : i64} : tensor<2x3x8xbf16>
  %s = graph.softmax %x {dim = 2 : i64} : tensor<2x3x8xbf16>
  // CHECK-NEXT: %n = graph.rms_norm %x, %w {eps = 1.000000e-06 : f32} : (tensor<2x3x8xbf16>, tensor<8xbf16>) -> tensor<2x3x8xbf16>
  %n = graph.rms_norm %x, %w {eps = 1.0e-06 : f32} : (tensor<2x3x8xbf16>, tensor<8xbf16>) -> tensor<2x3x8xbf16>
  // CHECK-NEXT: %ln = graph.layer_norm %x, %w, %b {eps = 1.000000e-05 : f32} : (tensor<2x3x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<2x3x8xbf16>
  %ln = graph.layer_norm %x, %w, %b {eps = 1.0e-05 : f32} : (tensor<2x3x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<2x3x8xbf16>
  // CHECK-NEXT: %l = graph.linear %x, %lw, %lb : (tensor<2x3x8xbf16>, tensor<16x8xbf16>, tensor<16xbf16>) -> tensor<2x3x16xbf16>
  %l = graph.linear %x, %lw, %lb : (tensor<2x3x8xbf16>, tensor<16x8xbf16>, tensor<16xbf16>) -> tensor<2x3x16xbf16>
  // CHECK-NEXT: %nb = graph.linear %x, %lw : (tensor<2x3x8xbf16>, tensor<16x8xbf16>) -> tensor<2x3x16xbf16>
  %nb = graph.linear %x, %lw : (tensor<2x3x8xbf16>, tensor<16x8xbf16>) -> tensor<2x3x16xbf16>
  // CHECK-NEXT: %a = graph.attention %q, %q, %q {causal = true, scale = 3.535530e-01 : f32} : (tensor<2x4x16x8xf16>, tensor<2x4x16x8xf16>, tensor<2x4x16x8xf16>) -> tensor<2x4x16x8xf16>
  %a = graph.attention %q, %q, %q {causal = true, scale = 0.353553 : f32} : (tensor<2x4x16x8xf16>, tensor<2x4x16x8xf16>, tensor<2x4x16x8xf16>) -> tensor<2x4x16x8xf16>
  // causal = false is the default, so it is not printed.
  // CHECK-NEXT: %nc = graph.attention %q, %q, %q {scale = 1.000000e+00 : f32} : (tensor<2x4x16x8xf16>, tensor<2x4x16x8xf16>, tensor<2x4x16x8xf16>) -> tensor<2x4x16x8xf16>
  %nc = graph.attention %q, %q, %q {causal = false, scale = 1.0 : f32} : (tensor<2x4x16x8xf16>, tensor<2x4x16x8xf16>, tensor<2x4x16x8xf16>) -> tensor<2x4x16x8xf16>
  // keepdim = false is the default, so it is not printed.
  // CHECK-NEXT: %am = graph.argmax %x {dim = 2 : i64} : tensor<2x3x8xbf16> -> tensor<2x3xi64>
  %am = graph.argmax %x {dim = 2 : i64, keepdim = false} : tensor<2x3x8xbf16> -> tensor<2x3xi64>
  // CHECK-NEXT: %ak = graph.argmax %x {dim = 0 : i64, keepdim = true} : tensor<2x3x8xbf16> -> tensor<1x3x8xi32>
  %ak = graph.argmax %x {dim = 0 : i64, keepdim = true} : tensor<2x3x8xbf16> -> tensor<1x3x8xi32>
  func.return
}
// GENERIC-LABEL: sym_name = "composites"
// GENERIC: "graph.softmax"(%x) <{dim = 2 : i64}> : (tensor<2x3x8xbf16>) -> tensor<2x3x8xbf16>
// GENERIC: "graph.linear"(%x, %lw) : (tensor<2x3x8xbf16>, tensor<16x8xbf16>) -> tensor<2x3x16xbf16>
// GENERIC: "graph.attention"(%q, %q, %q) <{causal = false, scale = 1.000000e+00 : f32, operandSegmentSizes = array<i32: 1, 1, 1, 0, 0>}> : (tensor<2x4x16x8xf16>, tensor<2x4x16x8xf16>, tensor<2x4x16x8xf16>) -> tensor<2x4x16x8xf16>
// GENERIC: "graph.argmax"(%x) <{dim = 2 : i64, keepdim = false}> : (tensor<2x3x8xbf16>) -> tensor<2x3xi64>
