func.func @f(%x: tensor<64xf32>) -> tensor<64xf32> {
  %r = scf.execute_region -> tensor<64xf32> {
    %y = graph.relu %x : tensor<64xf32>
    scf.yield %y : tensor<64xf32>
  }
  func.return %r : tensor<64xf32>
}
