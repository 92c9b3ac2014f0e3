// A runtime scalar (%pos, a 0-d i64 argument) through each level: an i64 argument of the host
// function with its bounds, passed by loop.launch to each kernel reading it, cast to an index
// once, and a by-value parameter of the CUDA kernel.
// RUN: tinyopt %s -p fuse | filecheck %s --check-prefix=LOOP
// RUN: tinyopt %s -p fuse,tile | filecheck %s --check-prefix=TILE
// RUN: tinyopt %s -p fuse,tile,to-cuda | filecheck %s --check-prefix=CUDA

func.func @rope_row(%table: tensor<64x8xf32>, %x: tensor<2x8xf32>, %pos: tensor<i64>) -> tensor<2x8xf32> {
  %rows = graph.dynamic_slice %table[%pos] {dim = 0 : i64} : (tensor<64x8xf32>, tensor<i64>) -> tensor<2x8xf32>
  %y = graph.mul %x, %rows : tensor<2x8xf32>
  func.return %y : tensor<2x8xf32>
}

// LOOP:      loop.kernel @rope_row_0(%0: memref<2x8xf32>, %pos: i64, %1: memref<64x8xf32>, %2: memref<2x8xf32>) {
// LOOP-NEXT:   loop.parallel (%3, %4) in [2, 8] {
// LOOP-NEXT:     %5 = memref.load %0[%3, %4] : memref<2x8xf32>
// LOOP-NEXT:     %6 = arith.index_cast %pos : i64 to index
// LOOP-NEXT:     %7 = arith.addi %3, %6 : index
// LOOP-NEXT:     %8 = memref.load %1[%7, %4] : memref<64x8xf32>
// LOOP:      func.func @rope_row(%0: memref<64x8xf32>, %1: memref<2x8xf32>, %pos: i64 {tinyopt.bounds = array<i64: 0, 62>}) -> memref<2x8xf32> {
// LOOP:        loop.launch @rope_row_0(%1, %pos, %0, %2) : memref<2x8xf32>, i64, memref<64x8xf32>, memref<2x8xf32>

// TILE:      tile.kernel @rope_row_0 {{.*}}(%0: memref<2x8xf32>, %pos: i64, %1: memref<64x8xf32>, %2: memref<2x8xf32>)
// TILE:        arith.index_cast %pos : i64 to index
// TILE:        tile.vload %1[

// CUDA:      void __launch_bounds__(256) rope_row_0(const float* __restrict__ v0, const long long pos, const float* __restrict__ v1, float* __restrict__ v2)
// CUDA:        int [[P:v[0-9]+]] = (int)pos;
// CUDA-NOT:    pos[
