func.func @f(%x: tensor<8x18446744073709551616xf32>) -> tensor<8x18446744073709551616xf32> {
  %y = graph.relu %x : tensor<8x18446744073709551616xf32>
  func.return %y : tensor<8x18446744073709551616xf32>
}
