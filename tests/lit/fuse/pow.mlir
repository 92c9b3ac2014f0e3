// RUN: tinyopt %s -p fuse | filecheck %s

// `x ** 2` (how torch's RMSNorm squares) is one multiply; other exponents stay `math.powf`.

// CHECK:      loop.kernel @square_0(
// CHECK:        %[[X:.*]] = memref.load
// CHECK:        arith.mulf %[[X]], %[[X]] : f32
// CHECK-NOT:    math.powf
// CHECK:      loop.kernel @cube_0(
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
