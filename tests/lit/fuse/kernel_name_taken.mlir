// RUN: sed -n '/^\/\/ FIRST/,/^\/\/ -----/p' %s | not tinyopt - -p fuse 2>&1 | filecheck %s --check-prefix=FIRST
// RUN: sed -n '/^\/\/ SECOND/,/^\/\/ -----/p' %s | not tinyopt - -p fuse 2>&1 | filecheck %s --check-prefix=SECOND
// RUN: sed -n '/^\/\/ THIRD/,$p' %s | not tinyopt - -p fuse 2>&1 | filecheck %s --check-prefix=THIRD

// fuse names the kernels of @f @f_0, @f_1, ... and its constants @f_cst0, ...: another
// function of the module named so is an error naming both, where it was xDSL's
// "Redefinition of symbol" or a loop.launch of the function in place of the kernel.

// FIRST
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.relu %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
func.func @f_0(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.exp %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// FIRST-LABEL: tinyopt: error: fuse: the kernel @f_0 of @f has the name of another symbol of the module (func.func @f_0): rename @f or @f_0

// -----

// SECOND
func.func @g_0(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.relu %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
func.func @g(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.exp %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
// SECOND-LABEL: tinyopt: error: fuse: the kernel @g_0 of @g has the name of another symbol of the module (func.func @g_0): rename @g or @g_0

// -----

// THIRD
func.func @h_cst0(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = graph.relu %x : tensor<4xf32>
  func.return %y : tensor<4xf32>
}
func.func @h(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %c = graph.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>
  %y = graph.add %x, %c : tensor<2x4xf32>
  func.return %y : tensor<2x4xf32>
}
// THIRD-LABEL: tinyopt: error: fuse: the constant @h_cst0 of @h has the name of another symbol of the module (func.func @h_cst0): rename @h or @h_cst0
