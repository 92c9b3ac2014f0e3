// graph.attention over the first %L keys of a cache, causal: decompose records L's lower bound
// (Sq) on the argument and masks the keys past j <= L - Sq + i with -inf, through a window of
// an iota at offset L; fuse inlines that window into the kernel reading it, which takes L by
// value.
// RUN: tinyopt %s -p decompose | filecheck %s
// RUN: tinyopt %s -p decompose,fuse | filecheck %s --check-prefix=LOOP

func.func @f(%q: tensor<1x4x3x8xf32>, %k: tensor<1x2x16x8xf32>, %v: tensor<1x2x16x8xf32>, %L: tensor<i64>) -> tensor<1x4x3x8xf32> {
  %o = graph.attention %q, %k, %v valid(%L : tensor<i64>) {scale = 0.35 : f32, causal = true} : (tensor<1x4x3x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x4x3x8xf32>
  func.return %o : tensor<1x4x3x8xf32>
}

// CHECK: func.func @f({{.*}}, %L: tensor<i64> {tinyopt.bounds = array<i64: 3, 16>})
// CHECK:   %[[TABLE:.*]] = graph.iota {dim = 0 : i64} : tensor<32xf32>
// CHECK:   %[[U:.*]] = graph.dynamic_slice %[[TABLE]][%L] {dim = 0 : i64} : (tensor<32xf32>, tensor<i64>) -> tensor<16xf32>
// CHECK:   graph.compare {{.*}} {predicate = "le"} : tensor<3x16xf32> -> tensor<3x16xi1>
// CHECK:   graph.constant dense<0xff800000> : tensor<1x1x1xf32>
// CHECK:   graph.select

// LOOP: func.func @f({{.*}}, %L: i64 {tinyopt.bounds = array<i64: 3, 16>})
