// RUN: not tinyopt %s -p fuse,tile 2>&1 | filecheck %s

// A softmax over 2^32 rows of 2^32 elements: 2^64 elements, an index space no 64-bit index
// reaches. It is refused by name, rather than launched with gridDim.x = 2^32 and overflowing
// `long long` index arithmetic.

// CHECK: error: tile: kernel @softmax_0: its buffer memref<4294967296x4294967296xf32> has 18446744073709551616 elements, an index space beyond the 64-bit indices' limit 2^63 - 1

func.func @softmax(%x: tensor<4294967296x4294967296xf32>) -> tensor<4294967296x4294967296xf32> {
  %y = graph.softmax %x {dim = 1 : i64} : tensor<4294967296x4294967296xf32>
  func.return %y : tensor<4294967296x4294967296xf32>
}
