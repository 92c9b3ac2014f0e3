// RUN: tinyopt %s -p 'tile{schedule=sequential}' | filecheck %s

// schedule=sequential: one thread per row of the outer loop.parallel, 64 rows in one block of
// 64 threads guarded by `row < 64`. Inside the thread every loop runs as an scf.for; a
// reduction carries its state in iter_args (here the 2-value state (m, l) of online softmax)
// and folds each element with the reduce's combine region; the inner parallel loop is a plain
// scf.for with scalar loads and stores.

// CHECK:      tile.kernel @stats_0 grid [1, 1, 1] block [64, 1, 1] (%[[X:.*]]: memref<64x128xf32>, %[[OUT:.*]]: memref<64x128xf32>) attributes {plan = #tile.plan<{{.*}}>} {
// CHECK-NEXT:   %[[BID:.*]] = tile.block_id x
// CHECK-NEXT:   %[[C64:.*]] = arith.constant 64 : index
// CHECK-NEXT:   %[[BASE:.*]] = arith.muli %[[BID]], %[[C64]] : index
// CHECK-NEXT:   %[[TID:.*]] = tile.thread_id x
// CHECK-NEXT:   %[[ROW:.*]] = arith.addi %[[BASE]], %[[TID]] : index
// CHECK-NEXT:   %[[IN:.*]] = arith.cmpi ult, %[[ROW]], %[[C64]] : index
// CHECK-NEXT:   scf.if %[[IN]] {
// CHECK-NEXT:     %[[NINF:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:     %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:     %[[C128:.*]] = arith.constant 128 : index
// CHECK-NEXT:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-NEXT:     %[[MM:[^ ,]+]], %[[LL:[^ ,]+]] = scf.for %[[J:.*]] = %[[C0]] to %[[C128]] step %[[C1]] iter_args(%[[M:.*]] = %[[NINF]], %[[L:.*]] = %[[ZERO]]) -> (f32, f32) {
// CHECK-NEXT:       %[[V:.*]] = memref.load %[[X]][%[[ROW]], %[[J]]] : memref<64x128xf32>
// CHECK-NEXT:       %[[MX:.*]] = arith.maximumf %[[M]], %[[V]] : f32
// CHECK-NEXT:       %[[D1:.*]] = arith.subf %[[M]], %[[MX]] : f32
// CHECK-NEXT:       %[[D2:.*]] = arith.subf %[[V]], %[[MX]] : f32
// CHECK-NEXT:       %[[E1:.*]] = math.exp %[[D1]] : f32
// CHECK-NEXT:       %[[E2:.*]] = math.exp %[[D2]] : f32
// CHECK-NEXT:       %[[S1:.*]] = arith.mulf %[[L]], %[[E1]] : f32
// CHECK-NEXT:       %[[S2:.*]] = arith.mulf %[[ONE]], %[[E2]] : f32
// CHECK-NEXT:       %[[NL:.*]] = arith.addf %[[S1]], %[[S2]] : f32
// CHECK-NEXT:       scf.yield %[[MX]], %[[NL]] : f32, f32
// CHECK-NEXT:     }
// CHECK-NEXT:     scf.for %[[K:.*]] = %[[C0]] to %[[C128]] step %[[C1]] {
// CHECK-NEXT:       %[[W:.*]] = memref.load %[[X]][%[[ROW]], %[[K]]] : memref<64x128xf32>
// CHECK-NEXT:       %[[D:.*]] = arith.subf %[[W]], %[[MM]] : f32
// CHECK-NEXT:       %[[E:.*]] = math.exp %[[D]] : f32
// CHECK-NEXT:       %[[Y:.*]] = arith.divf %[[E]], %[[LL]] : f32
// CHECK-NEXT:       memref.store %[[Y]], %[[OUT]][%[[ROW]], %[[K]]] : memref<64x128xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }
// CHECK-NEXT: }
// CHECK-NOT:  tile.{{vload|vstore|warp_reduce|block_reduce|alloc}}

builtin.module {
  loop.kernel @stats_0(%x: memref<64x128xf32>, %out: memref<64x128xf32>) {
    loop.parallel (%r) in [64] {
      %ninf = arith.constant 0xFF800000 : f32
      %zero = arith.constant 0.0 : f32
      %one = arith.constant 1.0 : f32
      %m, %l = loop.reduce (%c) in [128] init(%ninf, %zero : f32, f32) {
        %v = memref.load %x[%r, %c] : memref<64x128xf32>
        loop.yield %v, %one : f32, f32
      } combine(%m1, %l1, %m2, %l2) {
        %mx = arith.maximumf %m1, %m2 : f32
        %d1 = arith.subf %m1, %mx : f32
        %d2 = arith.subf %m2, %mx : f32
        %e1 = math.exp %d1 : f32
        %e2 = math.exp %d2 : f32
        %s1 = arith.mulf %l1, %e1 : f32
        %s2 = arith.mulf %l2, %e2 : f32
        %l = arith.addf %s1, %s2 : f32
        loop.yield %mx, %l : f32, f32
      }
      loop.parallel (%c) in [128] {
        %v = memref.load %x[%r, %c] : memref<64x128xf32>
        %d = arith.subf %v, %m : f32
        %e = math.exp %d : f32
        %y = arith.divf %e, %l : f32
        memref.store %y, %out[%r, %c] : memref<64x128xf32>
      }
    }
  }
}
