// RUN: tinyopt %s -p 'fuse,tile{splitk=4}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{splitk=4 splitk_mode=atomic},to-cuda' | filecheck %s --check-prefix=CUDA
// RUN: tinyopt %s -p 'fuse,tile{splitk=4 splitk_mode=twopass}' | filecheck %s --check-prefix=TWOPASS

// Atomic split-K of an epilogue-free 33x40x1000 product (what splitk_mode=auto picks): a
// zeroing kernel clears the output, then the partial-sum contraction over (4 splits, 33, 40)
// adds each chunk's sums into it (memref.atomic_rmw addf, kind 0), 4 columns per atomic
// (tile.vatomic_add: red.global.add.v4.f32) where the rows allow 16-byte vectors, one by one
// (atomicAdd) where they do not (41 columns). No workspace, no fold.

// CHECK:      tile.kernel @mm_0_zero grid [{{[0-9]+}}, 1, 1] block [256, 1, 1] (%{{.*}}: memref<33x40xf32>)
// CHECK:        tile.vstore
// CHECK:      tile.kernel @mm_0_splitk grid [{{[0-9]+}}, {{[0-9]+}}, 4]
// CHECK:        tile.vatomic_add(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}), %{{.*}}[%{{.*}}, %{{.*}}] : memref<33x40xf32>
// CHECK:      func.func @mm
// CHECK-NEXT:   %[[OUT:.*]] = memref.alloc() : memref<33x40xf32>
// CHECK-NEXT:   loop.launch @mm_0_zero(%[[OUT]])
// CHECK-NEXT:   loop.launch @mm_0_splitk(%{{.*}}, %{{.*}}, %[[OUT]])
// CHECK:      tile.kernel @mm_odd_0_zero
// CHECK:      tile.kernel @mm_odd_0_splitk
// CHECK:        "memref.atomic_rmw"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{kind = 0 : i64}> : (f32, memref<33x41xf32>, index, index) -> f32

// CUDA:      // kernel @mm_0_splitk
// CUDA:      asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" :: "l"(&{{.*}}), "f"({{.*}}), "f"({{.*}}), "f"({{.*}}), "f"({{.*}}) : "memory");
// CUDA:      // kernel @mm_odd_0_splitk
// CUDA:      atomicAdd(&{{.*}}, {{.*}});

// TWOPASS:   tile.kernel @mm_0_splitk
// TWOPASS:   tile.kernel @mm_0_reduce
// TWOPASS:   memref.alloc() : memref<4x33x40xf32>

func.func @mm(%x: tensor<33x1000xf32>, %w: tensor<1000x40xf32>) -> tensor<33x40xf32> {
  %m = graph.matmul %x, %w : (tensor<33x1000xf32>, tensor<1000x40xf32>) -> tensor<33x40xf32>
  func.return %m : tensor<33x40xf32>
}

func.func @mm_odd(%x: tensor<33x1000xf32>, %w: tensor<1000x41xf32>) -> tensor<33x41xf32> {
  %m = graph.matmul %x, %w : (tensor<33x1000xf32>, tensor<1000x41xf32>) -> tensor<33x41xf32>
  func.return %m : tensor<33x41xf32>
}
