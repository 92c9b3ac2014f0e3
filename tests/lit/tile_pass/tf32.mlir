// RUN: tinyopt %s -p 'fuse,tile{mma=tf32 bm=64 bn=64 bk=16}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{mma=tf32 bm=64 bn=64 bk=16},to-cuda' | filecheck %s --check-prefix=CUDA
// RUN: tinyopt %s -p 'fuse,tile' | filecheck %s --check-prefix=DEFAULT
// RUN: not tinyopt %s -p 'fuse,tile{mma=tf32 bk=4}' 2>&1 | filecheck %s --check-prefix=BK

// mma=tf32 on x @ transpose(w), both f32 [.., K]: the mma_sync schedule with f32 tiles,
// K-major [64][16 + 4] (a row stride of 20 words: a warp's reads (row l/4, k l%4) are
// conflict-free), rounded to TF32 as they are staged (tile.to_tf32: cvt.rna), 4 warps of
// 32x32, and per K step of 8 each fragment element read alone, its bits (arith.bitcast) the
// operand of the m16n8k8 mma.sync with f32 accumulators.

// CHECK:      tile.kernel @linear_0 grid [3, 4, 1] block [128, 1, 1]
// CHECK:        %[[A:.*]] = tile.alloc : memref<64x20xf32, 3 : i32>
// CHECK-NEXT:   %[[B:.*]] = tile.alloc : memref<64x20xf32, 3 : i32>
// CHECK:        %[[R0:.*]] = tile.to_tf32 %{{.*}}
// CHECK-NEXT:   %[[R1:.*]] = tile.to_tf32 %{{.*}}
// CHECK-NEXT:   %[[R2:.*]] = tile.to_tf32 %{{.*}}
// CHECK-NEXT:   %[[R3:.*]] = tile.to_tf32 %{{.*}}
// CHECK-NEXT:   scf.yield %[[R0]], %[[R1]], %[[R2]], %[[R3]] : f32, f32, f32, f32
// CHECK:        tile.vstore({{.*}}), %[[A]]
// CHECK:        tile.barrier
// CHECK:        scf.for
// CHECK:          %[[A0:.*]] = memref.load %[[A]][%{{.*}}, %{{.*}}] : memref<64x20xf32, 3 : i32>
// CHECK-NEXT:     %{{.*}} = arith.bitcast %[[A0]] : f32 to i32
// CHECK:          %[[B0:.*]] = memref.load %[[B]][%{{.*}}, %{{.*}}] : memref<64x20xf32, 3 : i32>
// CHECK-NEXT:     %{{.*}} = arith.bitcast %[[B0]] : f32 to i32
// CHECK:          tile.mma_sync a[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] b[%{{.*}}, %{{.*}}] c[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : f32 -> f32, f32, f32, f32

// CUDA:      mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32
// CUDA:      asm("cvt.rna.tf32.f32 %0, %1;" : "=r"([[BITS:.*]]) : "f"
// CUDA-NEXT: float {{.*}} = __uint_as_float([[BITS]]);
// CUDA:      __float_as_int(
// CUDA:      tinyopt_mma_tf32(

// Never a default: without the knob the f32 contraction runs on CUDA cores.
// DEFAULT-NOT: tile.to_tf32
// DEFAULT-NOT: tile.mma_sync

// BK: error: tile: mma=tf32 needs bk to be a multiple of 8 (the mma K step), got bk=4

func.func @linear(%x: tensor<256x64xf32>, %w: tensor<192x64xf32>) -> tensor<256x192xf32> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<192x64xf32> -> tensor<64x192xf32>
  %y = graph.matmul %x, %wt : (tensor<256x64xf32>, tensor<64x192xf32>) -> tensor<256x192xf32>
  func.return %y : tensor<256x192xf32>
}
