// RUN: tinyopt %s -p fuse | filecheck %s

// Exponents torch computes without `pow` are multiplies, a square root or a reciprocal:
// `x ** 2` (RMSNorm's square) one multiply, `x ** 3` (GPT-2's GELU) two, `x ** 0.5` sqrt,
// `x ** -1` and `x ** -2` a division; other exponents stay `math.powf`.

// CHECK:      loop.kernel @square_0(
// CHECK:        %[[X:.*]] = memref.load
// CHECK:        arith.mulf %[[X]], %[[X]] : f32
// CHECK-NOT:    math.powf
// CHECK:      loop.kernel @cube_0(
// CHECK:        %[[C:.*]] = memref.load
// CHECK:        %[[S:.*]] = arith.mulf %[[C]], %[[C]] : f32
// CHECK:        arith.mulf %[[S]], %[[C]] : f32
// CHECK-NOT:    math.powf
// CHECK:      loop.kernel @root_and_inverses_0(
// CHECK:        math.sqrt
// CHECK:        arith.divf
// CHECK:        arith.divf
// CHECK-NOT:    math.powf
// CHECK:      loop.kernel @other_0(
// CHECK:        math.powf %{{.*}}, %{{.*}} : f32

func.func @square(%x: tensor<8x256xf32>) -> tensor<8x256xf32> {
  %two = graph.constant dense<2.000000e+00> : tensor<8x256xf32>
  %y = graph.pow %x, %two : tensor<8x256xf32>
  func.return %y : tensor<8x256xf32>
}

func.func @cube(%x: tensor<8x256xf32>) -> tensor<8x256xf32> {
  %three = graph.constant dense<3.000000e+00> : tensor<8x256xf32>
  %y = graph.pow %x, %three : tensor<8x256xf32>
  func.return %y : tensor<8x256xf32>
}

func.func @root_and_inverses(%x: tensor<8x256xf32>) -> tensor<8x256xf32> {
  %half = graph.constant dense<5.000000e-01> : tensor<8x256xf32>
  %r = graph.pow %x, %half : tensor<8x256xf32>
  %m1 = graph.constant dense<-1.000000e+00> : tensor<8x256xf32>
  %i = graph.pow %r, %m1 : tensor<8x256xf32>
  %m2 = graph.constant dense<-2.000000e+00> : tensor<8x256xf32>
  %y = graph.pow %i, %m2 : tensor<8x256xf32>
  func.return %y : tensor<8x256xf32>
}

func.func @other(%x: tensor<8x256xf32>) -> tensor<8x256xf32> {
  %e = graph.constant dense<1.500000e+00> : tensor<8x256xf32>
  %y = graph.pow %x, %e : tensor<8x256xf32>
  func.return %y : tensor<8x256xf32>
}
