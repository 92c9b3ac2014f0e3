// RUN: tinyopt %s -p 'fuse,tile{copy=cp_async swizzle=1 bm=64 bn=64 tm=8 tn=8}' | filecheck %s
// RUN: not tinyopt %s -p 'fuse,tile{swizzle=1}' 2>&1 | filecheck %s --check-prefix=LD
// RUN: not tinyopt %s -p 'fuse,tile{swizzle=2}' 2>&1 | filecheck %s --check-prefix=DOMAIN

// swizzle=1 on x @ transpose(w), torch-layout w [N, K]: both sides are copied K-major by
// cp.async into rings stored flat, [3 stages][64 rows x 8], with no padding. Each 16-byte
// chunk moves inside its 128-byte line: flat index (8 row + k) XOR 4 ((row / 4) mod 8), for
// the copies and for the fragment reads alike.

// CHECK:      tile.kernel @linear_0 grid [3, 4, 1] block [64, 1, 1]
// CHECK:        %[[A:.*]] = tile.alloc : memref<3x512xf32, 3 : i32>
// CHECK-NEXT:   %[[B:.*]] = tile.alloc : memref<3x512xf32, 3 : i32>
// CHECK:        %[[ROW:.*]] = arith.divui %{{.*}}, %[[TWO:.*]] : index
// CHECK:        %[[GROUP:.*]] = arith.divui %[[ROW]], %[[FOUR:.*]] : index
// CHECK-NEXT:   %[[KEY8:.*]] = arith.remui %[[GROUP]], %[[EIGHT:.*]] : index
// CHECK-NEXT:   %[[KEY:.*]] = arith.muli %[[KEY8]], %[[FOUR]] : index
// CHECK-NEXT:   %[[ROWS:.*]] = arith.muli %[[ROW]], %[[EIGHT]] : index
// CHECK-NEXT:   %[[FLAT:.*]] = arith.addi %[[ROWS]], %{{.*}} : index
// CHECK-NEXT:   %[[SW:.*]] = arith.xori %[[FLAT]], %[[KEY]] : index
// CHECK-NEXT:   tile.cp_async %0[%{{.*}}, %{{.*}}] -> %[[A]][%{{.*}}, %[[SW]]] {width = 4 : i64}
// CHECK:        scf.for
// CHECK:          scf.for
// CHECK:            arith.xori
// CHECK-NEXT:       tile.vload %[[A]][%{{.*}}, %{{.*}}] : memref<3x512xf32, 3 : i32> -> f32, f32, f32, f32

// LD: error: tile: swizzle=1 applies to the shared ring of copy=cp_async, got copy=ld (the registers-staged `ld` layout is conflict-free with pad; TMA's boxes land dense)
// DOMAIN: error: tile: swizzle must be 0 or 1, got 2

func.func @linear(%x: tensor<256x64xf32>, %w: tensor<192x64xf32>) -> tensor<256x192xf32> {
  %wt = graph.transpose %w {perm = array<i64: 1, 0>} : tensor<192x64xf32> -> tensor<64x192xf32>
  %y = graph.matmul %x, %wt : (tensor<256x64xf32>, tensor<64x192xf32>) -> tensor<256x192xf32>
  func.return %y : tensor<256x192xf32>
}
