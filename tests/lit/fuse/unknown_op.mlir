// RUN: not tinyopt %s -p fuse --allow-unregistered-dialect 2>&1 | filecheck %s

// CHECK: fuse: cannot lower 'foo.bar'

func.func @bad(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = "foo.bar"(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}
