func.func @f() -> tensor<4xf32> {
  %c = graph.constant dense<1.0> : tensor<9223372036854775808xf32>
  %y = graph.slice %c {dim = 0 : i64, start = 0 : i64, step = 1 : i64} : tensor<9223372036854775808xf32> -> tensor<4xf32>
  func.return %y : tensor<4xf32>
}
