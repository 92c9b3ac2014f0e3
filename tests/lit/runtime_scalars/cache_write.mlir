// A KV-cache write at a runtime position, in place: the write kernel loops over the step's
// keys only and stores them into the cache argument's buffer at %pos; nothing is allocated for
// the updated cache, the attention kernels read the argument's buffer after the write, and the
// host function returns the argument.
// RUN: tinyopt %s -p fuse | filecheck %s
// RUN: tinyopt %s -p fuse,tile,to-cuda | filecheck %s --check-prefix=CUDA

func.func @step(%q: tensor<1x4x1x8xf32>, %k: tensor<1x2x1x8xf32>, %cache: tensor<1x2x16x8xf32>, %pos: tensor<i32>) -> (tensor<1x4x1x8xf32>, tensor<1x2x16x8xf32>) {
  %new = graph.dynamic_update_slice %cache[%pos], %k {dim = 2 : i64} : (tensor<1x2x16x8xf32>, tensor<i32>, tensor<1x2x1x8xf32>) -> tensor<1x2x16x8xf32>
  %o = graph.attention %q, %new, %new {scale = 0.35355339 : f32} : (tensor<1x4x1x8xf32>, tensor<1x2x16x8xf32>, tensor<1x2x16x8xf32>) -> tensor<1x4x1x8xf32>
  func.return %o, %new : tensor<1x4x1x8xf32>, tensor<1x2x16x8xf32>
}

// CHECK:      loop.kernel @step_0(%0: memref<1x2x1x8xf32>, %pos: i32, %1: memref<1x2x16x8xf32>) {
// CHECK-NEXT:   loop.parallel (%2, %3) in [2, 8] {
// CHECK-NEXT:     %4 = arith.constant 0 : index
// CHECK-NEXT:     %5 = memref.load %0[%4, %2, %4, %3] : memref<1x2x1x8xf32>
// CHECK-NEXT:     %6 = arith.index_cast %pos : i32 to index
// CHECK-NEXT:     memref.store %5, %1[%4, %2, %6, %3] : memref<1x2x16x8xf32>
// CHECK:      func.func @step(%0: memref<1x4x1x8xf32>, %1: memref<1x2x1x8xf32>, %2: memref<1x2x16x8xf32>, %pos: i32 {tinyopt.bounds = array<i64: 0, 15>})
// CHECK-NEXT:   loop.launch @step_0(%1, %pos, %2) :
// CHECK-NOT:    memref.alloc() : memref<1x2x16x8xf32>
// CHECK:        loop.launch @step_1(%0, %2,
// CHECK:        func.return %{{[0-9]+}}, %2 :

// CUDA: step_0(const float* __restrict__ v0, const int pos, float* __restrict__ v1)
