// RUN: tinyopt %s | filecheck %s --check-prefix=PRINT
// RUN: tinyopt %s -p decompose | filecheck %s

// graph.argmax prints its dim, and keepdim only when true (false is the default).
// PRINT-LABEL: func.func @argmax(
// PRINT-NEXT: %i = graph.argmax %x {dim = 1 : i64} : tensor<4x8xf32> -> tensor<4xi64>
// PRINT-LABEL: func.func @argmax_dim0_keepdim_bf16_i32(
// PRINT-NEXT: %i = graph.argmax %x {dim = 0 : i64, keepdim = true} : tensor<4x8xbf16> -> tensor<1x8xi32>

// argmax(x, dim) = the least index whose element equals the maximum, NaN counting as +inf:
// reduce_min(select(hit, iota, n)) in f32, where a NaN's index enters as index - n (below
// every other, so the first NaN wins over a +inf) and is shifted back by n; then a cast.
// CHECK-LABEL: func.func @argmax(
// CHECK-NEXT: %[[NAN:.*]] = graph.compare %x, %x {predicate = "ne"} : tensor<4x8xf32> -> tensor<4x8xi1>
// CHECK-NEXT: %[[INF:.*]] = graph.constant dense<0x7f800000> : tensor<1x1xf32>
// CHECK-NEXT: %[[INFS:.*]] = graph.broadcast %[[INF]] : tensor<1x1xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[KEY:.*]] = graph.select %[[NAN]], %[[INFS]], %x : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK-NEXT: %[[TOP:.*]] = graph.reduce_max %[[KEY]] {dims = array<i64: 1>, keepdim = true} : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK-NEXT: %[[TOPS:.*]] = graph.broadcast %[[TOP]] : tensor<4x1xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[HIT:.*]] = graph.compare %[[KEY]], %[[TOPS]] {predicate = "eq"} : tensor<4x8xf32> -> tensor<4x8xi1>
// CHECK-NEXT: %[[IOTA:.*]] = graph.iota {dim = 1 : i64} : tensor<4x8xf32>
// CHECK-NEXT: %[[N:.*]] = graph.constant dense<8.000000e+00> : tensor<1x1xf32>
// CHECK-NEXT: %[[NS:.*]] = graph.broadcast %[[N]] : tensor<1x1xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[FIRST:.*]] = graph.select %[[HIT]], %[[IOTA]], %[[NS]] : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK-NEXT: %[[BELOW:.*]] = graph.sub %[[IOTA]], %[[NS]] : tensor<4x8xf32>
// CHECK-NEXT: %[[CAND:.*]] = graph.select %[[NAN]], %[[BELOW]], %[[FIRST]] : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK-NEXT: %[[LEAST:.*]] = graph.reduce_min %[[CAND]] {dims = array<i64: 1>} : tensor<4x8xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[N2:.*]] = graph.constant dense<8.000000e+00> : tensor<1xf32>
// CHECK-NEXT: %[[N2S:.*]] = graph.broadcast %[[N2]] : tensor<1xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[SHIFTED:.*]] = graph.add %[[LEAST]], %[[N2S]] : tensor<4xf32>
// CHECK-NEXT: %[[ZERO:.*]] = graph.constant dense<0.000000e+00> : tensor<1xf32>
// CHECK-NEXT: %[[ZEROS:.*]] = graph.broadcast %[[ZERO]] : tensor<1xf32> -> tensor<4xf32>
// CHECK-NEXT: %[[NEG:.*]] = graph.compare %[[LEAST]], %[[ZEROS]] {predicate = "lt"} : tensor<4xf32> -> tensor<4xi1>
// CHECK-NEXT: %[[INDEX:.*]] = graph.select %[[NEG]], %[[SHIFTED]], %[[LEAST]] : tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT: %i = graph.cast %[[INDEX]] : tensor<4xf32> -> tensor<4xi64>
// CHECK-NEXT: func.return %i : tensor<4xi64>
// CHECK-NOT: graph.argmax
func.func @argmax(%x: tensor<4x8xf32>) -> tensor<4xi64> {
  %i = graph.argmax %x {dim = 1 : i64} : tensor<4x8xf32> -> tensor<4xi64>
  func.return %i : tensor<4xi64>
}

// Another dim, keepdim, a bf16 input and an i32 result: the maximum is taken in bf16, the
// index in f32.
// CHECK-LABEL: func.func @argmax_dim0_keepdim_bf16_i32(
// CHECK-NEXT: %[[NAN:.*]] = graph.compare %x, %x {predicate = "ne"} : tensor<4x8xbf16> -> tensor<4x8xi1>
// CHECK-NEXT: %[[INF:.*]] = graph.constant dense<0x7f80> : tensor<1x1xbf16>
// CHECK-NEXT: %[[INFS:.*]] = graph.broadcast %[[INF]] : tensor<1x1xbf16> -> tensor<4x8xbf16>
// CHECK-NEXT: %[[KEY:.*]] = graph.select %[[NAN]], %[[INFS]], %x : tensor<4x8xi1>, tensor<4x8xbf16>
// CHECK-NEXT: %[[TOP:.*]] = graph.reduce_max %[[KEY]] {dims = array<i64: 0>, keepdim = true} : tensor<4x8xbf16> -> tensor<1x8xbf16>
// CHECK-NEXT: %[[TOPS:.*]] = graph.broadcast %[[TOP]] : tensor<1x8xbf16> -> tensor<4x8xbf16>
// CHECK-NEXT: %[[HIT:.*]] = graph.compare %[[KEY]], %[[TOPS]] {predicate = "eq"} : tensor<4x8xbf16> -> tensor<4x8xi1>
// CHECK-NEXT: %[[IOTA:.*]] = graph.iota {dim = 0 : i64} : tensor<4x8xf32>
// CHECK-NEXT: %[[N:.*]] = graph.constant dense<4.000000e+00> : tensor<1x1xf32>
// CHECK-NEXT: %[[NS:.*]] = graph.broadcast %[[N]] : tensor<1x1xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[FIRST:.*]] = graph.select %[[HIT]], %[[IOTA]], %[[NS]] : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK-NEXT: %[[BELOW:.*]] = graph.sub %[[IOTA]], %[[NS]] : tensor<4x8xf32>
// CHECK-NEXT: %[[CAND:.*]] = graph.select %[[NAN]], %[[BELOW]], %[[FIRST]] : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK-NEXT: %[[LEAST:.*]] = graph.reduce_min %[[CAND]] {dims = array<i64: 0>, keepdim = true} : tensor<4x8xf32> -> tensor<1x8xf32>
// CHECK: %[[INDEX:.*]] = graph.select %{{.*}}, %{{.*}}, %[[LEAST]] : tensor<1x8xi1>, tensor<1x8xf32>
// CHECK-NEXT: %i = graph.cast %[[INDEX]] : tensor<1x8xf32> -> tensor<1x8xi32>
// CHECK-NEXT: func.return %i : tensor<1x8xi32>
func.func @argmax_dim0_keepdim_bf16_i32(%x: tensor<4x8xbf16>) -> tensor<1x8xi32> {
  %i = graph.argmax %x {dim = 0 : i64, keepdim = true} : tensor<4x8xbf16> -> tensor<1x8xi32>
  func.return %i : tensor<1x8xi32>
}
