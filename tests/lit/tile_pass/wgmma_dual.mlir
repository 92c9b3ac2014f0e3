// RUN: tinyopt %s -p 'fuse' | filecheck %s --check-prefix=FUSE
// RUN: tinyopt %s -p 'fuse,tile{bm=128 bn=256}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{bm=128 dual=off}' | filecheck %s --check-prefix=OFF
// RUN: not tinyopt %s -p 'fuse,tile{mma=sync dual=on}' 2>&1 | filecheck %s --check-prefix=REFUSED

// The Llama MLP's gate: silu(x @ wg^T) * (x @ wu^T). fuse builds one kernel with two K loops
// over the same A (a paired contraction); the second product is not a buffer of its own.
// FUSE:       loop.kernel @swiglu_0(
// FUSE:         loop.reduce {{.*}} attributes {tinyopt.contraction}
// FUSE:         loop.reduce {{.*}} attributes {tinyopt.contraction}
// FUSE-NOT:   loop.kernel
// FUSE:       func.func @swiglu

// The wgmma rule runs it as one dual GEMM: a 128x256 accumulator tile per block for 128 output
// columns (3 blocks over N=264), one tensor map per operand, both B boxes (128 rows each) into
// the two halves of the slot's 256 rows, one m64n256k16 wgmma per 16 of K, and one 64x64 f32
// staging tile per product and consumer warpgroup.
// CHECK:      tile.kernel @swiglu_0 grid [3, 1, 1] block [384, 1, 1]
// CHECK-SAME:   tile.tensor_maps = [{arg = 0 : i64, box = array<i64: 128, 64>, swizzle = 128 : i64}, {arg = 1 : i64, box = array<i64: 128, 64>, swizzle = 128 : i64}, {arg = 2 : i64, box = array<i64: 128, 64>, swizzle = 128 : i64}]
// CHECK:        %[[HALF:.*]] = arith.constant 128 : index
// CHECK:        %[[B:.*]] = tile.alloc dynamic : memref<3x256x64xbf16, 3 : i32>
// CHECK:        tile.alloc dynamic : memref<2x2x64x64xf32, 3 : i32>
// CHECK:        %[[ZERO:.*]] = arith.constant 0 : index
// CHECK:        tile.tma_load %{{.*}} -> %{{.*}} : memref<100x136xbf16> -> memref<3x128x64xbf16, 3 : i32>
// CHECK-NEXT:   tile.tma_load %{{.*}} -> %[[B]][%{{.*}}, %[[ZERO]], %[[ZERO]]]
// CHECK-NEXT:   tile.tma_load %{{.*}} -> %[[B]][%{{.*}}, %[[HALF]], %[[ZERO]]]
// CHECK:        tile.wgmma %{{.*}} {n = 256 : i64
// CHECK-NOT:  tile.kernel

// dual=off: the second product goes to an f32 workspace first; each kernel keeps only the
// buffers it uses.
// OFF:        tile.kernel @swiglu_0_second grid {{.*}}(%{{.*}}: memref<100x136xbf16>, %{{.*}}: memref<264x136xbf16>, %{{.*}}: memref<100x264xf32>)
// OFF:        tile.kernel @swiglu_0 grid {{.*}}(%{{.*}}: memref<100x136xbf16>, %{{.*}}: memref<264x136xbf16>, %{{.*}}: memref<100x264xbf16>, %{{.*}}: memref<100x264xf32>)
// OFF:        %[[WS:.*]] = memref.alloc() : memref<100x264xf32>
// OFF-NEXT:   loop.launch @swiglu_0_second(%{{.*}}, %{{.*}}, %[[WS]])
// OFF-NEXT:   loop.launch @swiglu_0(%{{.*}}, %{{.*}}, %{{.*}}, %[[WS]])

// REFUSED: error: tile: dual=on cannot run kernel @swiglu_0 as one dual GEMM: only the wgmma rule runs a dual GEMM (schedule=auto, mma=sync)

func.func @swiglu(%x: tensor<100x136xbf16>, %wg: tensor<264x136xbf16>, %wu: tensor<264x136xbf16>) -> tensor<100x264xbf16> {
  %g = graph.linear %x, %wg : (tensor<100x136xbf16>, tensor<264x136xbf16>) -> tensor<100x264xbf16>
  %u = graph.linear %x, %wu : (tensor<100x136xbf16>, tensor<264x136xbf16>) -> tensor<100x264xbf16>
  %s = graph.silu %g : tensor<100x264xbf16>
  %y = graph.mul %s, %u : tensor<100x264xbf16>
  func.return %y : tensor<100x264xbf16>
}
