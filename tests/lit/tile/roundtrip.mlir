// RUN: tinyopt %s | tinyopt --print-op-generic | tinyopt | filecheck %s
// RUN: tinyopt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// Every tile op survives custom -> generic -> custom printing unchanged: kernel, block_id,
// thread_id, alloc (shared and registers), barrier, vload, vstore, warp_reduce (with a width),
// block_reduce (2-value state), yield and cuda_kernel, next to scf loops and a host launch.

// CHECK:      builtin.module {
// CHECK-NEXT:   tile.kernel @sm_0 grid [64, 1, 1] block [128, 1, 1] (%[[X:.*]]: memref<64x128xf32>, %[[OUT:.*]]: memref<64x128xf32>) {
// CHECK-NEXT:     %[[ROW:.*]] = tile.block_id x
// CHECK-NEXT:     %[[T:.*]] = tile.thread_id x
// CHECK-NEXT:     %[[TY:.*]] = tile.thread_id y
// CHECK-NEXT:     %[[BZ:.*]] = tile.block_id z
// CHECK-NEXT:     %[[REGS:.*]] = tile.alloc : memref<4xf32, 5 : i32>
// CHECK-NEXT:     %[[SMEM:.*]] = tile.alloc : memref<4x33xf32, 3 : i32>
// CHECK-NEXT:     %[[A:.*]], %[[B:.*]], %[[C:.*]], %[[D:.*]] = tile.vload %[[X]][%[[ROW]], %[[T]]] : memref<64x128xf32> -> f32, f32, f32, f32
// CHECK-NEXT:     %[[S:.*]] = tile.warp_reduce %[[A]] : f32 attributes {width = 16 : i64} combine(%[[P:.*]], %[[Q:.*]]) {
// CHECK-NEXT:       %[[R:.*]] = arith.addf %[[P]], %[[Q]] : f32
// CHECK-NEXT:       tile.yield %[[R]] : f32
// CHECK-NEXT:     }
// CHECK-NEXT:     %[[M:.*]], %[[N:.*]] = tile.block_reduce %[[A]], %[[B]] : f32, f32 combine(%[[P0:.*]], %[[P1:.*]], %[[Q0:.*]], %[[Q1:.*]]) {
// CHECK-NEXT:       %[[R0:.*]] = arith.maximumf %[[P0]], %[[Q0]] : f32
// CHECK-NEXT:       %[[R1:.*]] = arith.addf %[[P1]], %[[Q1]] : f32
// CHECK-NEXT:       tile.yield %[[R0]], %[[R1]] : f32, f32
// CHECK-NEXT:     }
// CHECK-NEXT:     tile.barrier
// CHECK-NEXT:     tile.vstore(%[[S]], %[[B]], %[[M]], %[[N]] : f32, f32, f32, f32), %[[OUT]][%[[ROW]], %[[T]]] : memref<64x128xf32>
// CHECK-NEXT:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:     %[[C4:.*]] = arith.constant 4 : index
// CHECK-NEXT:     scf.for %[[K:.*]] = %[[C0]] to %[[C4]] step %[[C1]] {
// CHECK-NEXT:       %[[V:.*]] = memref.load %[[REGS]][%[[K]]] : memref<4xf32, 5 : i32>
// CHECK-NEXT:       memref.store %[[V]], %[[SMEM]][%[[K]], %[[T]]] : memref<4x33xf32, 3 : i32>
// CHECK-NEXT:     } {tile.unroll}
// A warp_reduce written without a width gets the default width 32 spelled out.
// CHECK-NEXT:     %[[W:.*]] = tile.warp_reduce %[[C]] : f32 attributes {width = 32 : i64} combine(%[[U:.*]], %[[UU:.*]]) {
// CHECK-NEXT:       %[[MX:.*]] = arith.maximumf %[[U]], %[[UU]] : f32
// CHECK-NEXT:       tile.yield %[[MX]] : f32
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT:   tile.cuda_kernel @k {grid = array<i64: 1, 1, 1>, block = array<i64: 32, 1, 1>, smem = 0 : i64, source = "extern \22C\22 __global__ void k() {}"}
// CHECK-NEXT:   func.func @host(%[[HX:.*]]: memref<64x128xf32>) -> memref<64x128xf32> {
// CHECK-NEXT:     %[[HO:.*]] = memref.alloc() : memref<64x128xf32>
// CHECK-NEXT:     loop.launch @sm_0(%[[HX]], %[[HO]]) : memref<64x128xf32>, memref<64x128xf32>
// CHECK-NEXT:     loop.launch @k() :
// CHECK-NEXT:     func.return %[[HO]] : memref<64x128xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }

// The generic form in the middle: launch shape and hardware dims are properties.
// GENERIC:      "tile.kernel"() <{sym_name = "sm_0", grid = array<i64: 64, 1, 1>, block = array<i64: 128, 1, 1>}> ({
// GENERIC:        "tile.block_id"() <{dim = "x"}> : () -> index
// GENERIC:        "tile.thread_id"() <{dim = "x"}> : () -> index
// GENERIC:        "tile.alloc"() : () -> memref<4xf32, 5 : i32>
// GENERIC:        "tile.alloc"() : () -> memref<4x33xf32, 3 : i32>
// GENERIC:        "tile.vload"(%{{.*}}, %{{.*}}, %{{.*}}) : (memref<64x128xf32>, index, index) -> (f32, f32, f32, f32)
// GENERIC:        "tile.warp_reduce"(%{{.*}}) ({
// GENERIC:          "tile.yield"(%{{.*}}) : (f32) -> ()
// GENERIC-NEXT:   }) {width = 16 : i64} : (f32) -> f32
// GENERIC:        "tile.block_reduce"(%{{.*}}, %{{.*}}) ({
// GENERIC-NEXT:   ^bb0(%{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32):
// GENERIC:        }) : (f32, f32) -> (f32, f32)
// GENERIC-NEXT:   "tile.barrier"() : () -> ()
// GENERIC-NEXT:   "tile.vstore"(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) <{operandSegmentSizes = array<i32: 4, 1, 2>}> : (f32, f32, f32, f32, memref<64x128xf32>, index, index) -> ()
// GENERIC:      "tile.cuda_kernel"() <{sym_name = "k", grid = array<i64: 1, 1, 1>, block = array<i64: 32, 1, 1>, smem = 0 : i64, source = "extern \22C\22 __global__ void k() {}"}> : () -> ()

builtin.module {
  tile.kernel @sm_0 grid [64, 1, 1] block [128, 1, 1] (%x: memref<64x128xf32>, %out: memref<64x128xf32>) {
    %row = tile.block_id x
    %t = tile.thread_id x
    %ty = tile.thread_id y
    %bz = tile.block_id z
    %regs = tile.alloc : memref<4xf32, 5 : i32>
    %smem = tile.alloc : memref<4x33xf32, 3 : i32>
    %a, %b, %c, %d = tile.vload %x[%row, %t] : memref<64x128xf32> -> f32, f32, f32, f32
    %s = tile.warp_reduce %a : f32 attributes {width = 16 : i64} combine(%p, %q) {
      %r = arith.addf %p, %q : f32
      tile.yield %r : f32
    }
    %m, %n = tile.block_reduce %a, %b : f32, f32 combine(%p0, %p1, %q0, %q1) {
      %r0 = arith.maximumf %p0, %q0 : f32
      %r1 = arith.addf %p1, %q1 : f32
      tile.yield %r0, %r1 : f32, f32
    }
    tile.barrier
    tile.vstore (%s, %b, %m, %n : f32, f32, f32, f32), %out[%row, %t] : memref<64x128xf32>
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    scf.for %k = %c0 to %c4 step %c1 {
      %v = memref.load %regs[%k] : memref<4xf32, 5 : i32>
      memref.store %v, %smem[%k, %t] : memref<4x33xf32, 3 : i32>
    } {tile.unroll}
    %w = tile.warp_reduce %c : f32 combine(%u, %uu) {
      %mx = arith.maximumf %u, %uu : f32
      tile.yield %mx : f32
    }
  }
  tile.cuda_kernel @k {grid = array<i64: 1, 1, 1>, block = array<i64: 32, 1, 1>, smem = 0 : i64, source = "extern \"C\" __global__ void k() {}"}
  func.func @host(%x: memref<64x128xf32>) -> memref<64x128xf32> {
    %o = memref.alloc() : memref<64x128xf32>
    loop.launch @sm_0(%x, %o) : memref<64x128xf32>, memref<64x128xf32>
    loop.launch @k() :
    func.return %o : memref<64x128xf32>
  }
}
