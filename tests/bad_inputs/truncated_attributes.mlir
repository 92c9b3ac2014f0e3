func.func @f(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = graph.softmax %x {dim = 1 : i64