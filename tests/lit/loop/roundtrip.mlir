// RUN: tinyopt %s | tinyopt --print-op-generic | tinyopt | filecheck %s
// RUN: tinyopt %s --print-op-generic | filecheck %s --check-prefix=GENERIC

// Every loop op survives custom -> generic -> custom printing unchanged: kernel, launch,
// parallel (1-D, 2-D, nested, with attributes), reduce (1-value and 2-value tuple state), yield.

// CHECK:      builtin.module {
// CHECK-NEXT:   loop.kernel @sm_0(%[[X:.*]]: memref<64x128xf32>, %[[OUT:.*]]: memref<64x128xf32>) {
// CHECK-NEXT:     loop.parallel (%[[I:.*]]) in [64] {
// CHECK-NEXT:       %[[NINF:.*]] = arith.constant -3.000000e+38 : f32
// CHECK-NEXT:       %[[M:.*]] = loop.reduce (%[[J:.*]]) in [128] init(%[[NINF]] : f32) {
// CHECK-NEXT:         %[[V:.*]] = memref.load %[[X]][%[[I]], %[[J]]] : memref<64x128xf32>
// CHECK-NEXT:         loop.yield %[[V]] : f32
// CHECK-NEXT:       } combine(%[[A:.*]], %[[B:.*]]) {
// CHECK-NEXT:         %[[C:.*]] = arith.maximumf %[[A]], %[[B]] : f32
// CHECK-NEXT:         loop.yield %[[C]] : f32
// CHECK-NEXT:       }
// CHECK-NEXT:       loop.parallel (%[[J2:.*]]) in [128] {
// CHECK-NEXT:         %[[V2:.*]] = memref.load %[[X]][%[[I]], %[[J2]]] : memref<64x128xf32>
// CHECK-NEXT:         %[[D:.*]] = arith.subf %[[V2]], %[[M]] : f32
// CHECK-NEXT:         memref.store %[[D]], %[[OUT]][%[[I]], %[[J2]]] : memref<64x128xf32>
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:   }

// CHECK-NEXT:   loop.kernel @stats_0(%[[SX:.*]]: memref<8x32xf32>, %[[MS:.*]]: memref<8xf32>, %[[LS:.*]]: memref<8xf32>) {
// CHECK-NEXT:     loop.parallel (%[[R:.*]]) in [8] {
// CHECK-NEXT:       %[[SNINF:.*]] = arith.constant 0xff800000 : f32
// CHECK-NEXT:       %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:       %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:       %[[SM:.*]], %[[SL:.*]] = loop.reduce (%[[SC:.*]]) in [32] init(%[[SNINF]], %[[ZERO]] : f32, f32) {
// CHECK-NEXT:         %[[SV:.*]] = memref.load %[[SX]][%[[R]], %[[SC]]] : memref<8x32xf32>
// CHECK-NEXT:         loop.yield %[[SV]], %[[ONE]] : f32, f32
// CHECK-NEXT:       } combine(%[[M1:.*]], %[[L1:.*]], %[[M2:.*]], %[[L2:.*]]) {
// CHECK-NEXT:         %[[MX:.*]] = arith.maximumf %[[M1]], %[[M2]] : f32
// CHECK-NEXT:         %[[D1:.*]] = arith.subf %[[M1]], %[[MX]] : f32
// CHECK-NEXT:         %[[D2:.*]] = arith.subf %[[M2]], %[[MX]] : f32
// CHECK-NEXT:         %[[E1:.*]] = math.exp %[[D1]] : f32
// CHECK-NEXT:         %[[E2:.*]] = math.exp %[[D2]] : f32
// CHECK-NEXT:         %[[S1:.*]] = arith.mulf %[[L1]], %[[E1]] : f32
// CHECK-NEXT:         %[[S2:.*]] = arith.mulf %[[L2]], %[[E2]] : f32
// CHECK-NEXT:         %[[L:.*]] = arith.addf %[[S1]], %[[S2]] : f32
// CHECK-NEXT:         loop.yield %[[MX]], %[[L]] : f32, f32
// CHECK-NEXT:       }
// CHECK-NEXT:       memref.store %[[SM]], %[[MS]][%[[R]]] : memref<8xf32>
// CHECK-NEXT:       memref.store %[[SL]], %[[LS]][%[[R]]] : memref<8xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }

// CHECK-NEXT:   loop.kernel @mm_0(%[[MA:.*]]: memref<4x8xf32>, %[[MB:.*]]: memref<8x16xf32>, %[[MO:.*]]: memref<4x16xf32>) {
// CHECK-NEXT:     loop.parallel (%[[MM:.*]], %[[MN:.*]]) in [4, 16] attributes {tag = 1 : i64} {
// CHECK-NEXT:       %[[MZ:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:       %[[ACC:.*]] = loop.reduce (%[[K:.*]]) in [8] init(%[[MZ]] : f32) attributes {tinyopt.contraction} {
// CHECK-NEXT:         %[[AV:.*]] = memref.load %[[MA]][%[[MM]], %[[K]]] : memref<4x8xf32>
// CHECK-NEXT:         %[[BV:.*]] = memref.load %[[MB]][%[[K]], %[[MN]]] : memref<8x16xf32>
// CHECK-NEXT:         %[[P:.*]] = arith.mulf %[[AV]], %[[BV]] : f32
// CHECK-NEXT:         loop.yield %[[P]] : f32
// CHECK-NEXT:       } combine(%[[P1:.*]], %[[Q1:.*]]) {
// CHECK-NEXT:         %[[SUM:.*]] = arith.addf %[[P1]], %[[Q1]] : f32
// CHECK-NEXT:         loop.yield %[[SUM]] : f32
// CHECK-NEXT:       }
// CHECK-NEXT:       memref.store %[[ACC]], %[[MO]][%[[MM]], %[[MN]]] : memref<4x16xf32>
// CHECK-NEXT:     }
// CHECK-NEXT:   }

// CHECK-NEXT:   loop.kernel @total_0(%[[TX:.*]]: memref<4x8xf32>, %[[TOUT:.*]]: memref<1xf32>) {
// CHECK-NEXT:     %[[TZ:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:     %[[TS:.*]] = loop.reduce (%[[TI:.*]], %[[TJ:.*]]) in [4, 8] init(%[[TZ]] : f32) {
// CHECK-NEXT:       %[[TV:.*]] = memref.load %[[TX]][%[[TI]], %[[TJ]]] : memref<4x8xf32>
// CHECK-NEXT:       loop.yield %[[TV]] : f32
// CHECK-NEXT:     } combine(%[[TP:.*]], %[[TQ:.*]]) {
// CHECK-NEXT:       %[[TT:.*]] = arith.addf %[[TP]], %[[TQ]] : f32
// CHECK-NEXT:       loop.yield %[[TT]] : f32
// CHECK-NEXT:     }
// CHECK-NEXT:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-NEXT:     memref.store %[[TS]], %[[TOUT]][%[[C0]]] : memref<1xf32>
// CHECK-NEXT:   }

// CHECK-NEXT:   loop.kernel @nest_0(%[[NX:.*]]: memref<2x4x8xf32>, %[[NY:.*]]: memref<2x4x8xf32>) {
// CHECK-NEXT:     loop.parallel (%[[NB:.*]], %[[NR:.*]]) in [2, 4] {
// CHECK-NEXT:       loop.parallel (%[[NC:.*]]) in [8] {
// CHECK-NEXT:         %[[NV:.*]] = memref.load %[[NX]][%[[NB]], %[[NR]], %[[NC]]] : memref<2x4x8xf32>
// CHECK-NEXT:         %[[NE:.*]] = math.exp %[[NV]] : f32
// CHECK-NEXT:         memref.store %[[NE]], %[[NY]][%[[NB]], %[[NR]], %[[NC]]] : memref<2x4x8xf32>
// CHECK-NEXT:       }
// CHECK-NEXT:     }
// CHECK-NEXT:   }

// CHECK-NEXT:   func.func @host(%[[HX:.*]]: memref<64x128xf32>) -> memref<64x128xf32> {
// CHECK-NEXT:     %[[HO:.*]] = memref.alloc() : memref<64x128xf32>
// CHECK-NEXT:     loop.launch @sm_0(%[[HX]], %[[HO]]) : memref<64x128xf32>, memref<64x128xf32>
// CHECK-NEXT:     func.return %[[HO]] : memref<64x128xf32>
// CHECK-NEXT:   }
// CHECK-NEXT: }

// The generic form in the middle spells every op by its properties and regions.
// GENERIC:      "loop.kernel"() <{sym_name = "sm_0"}> ({
// GENERIC-NEXT: ^bb0(%{{.*}}: memref<64x128xf32>, %{{.*}}: memref<64x128xf32>):
// GENERIC-NEXT:   "loop.parallel"() <{bounds = array<i64: 64>}> ({
// GENERIC-NEXT:   ^bb0(%{{.*}}: index):
// GENERIC:          "loop.reduce"(%{{.*}}) <{bounds = array<i64: 128>}> ({
// GENERIC:            "loop.yield"(%{{.*}}) : (f32) -> ()
// GENERIC-NEXT:     }, {
// GENERIC-NEXT:     ^bb0(%{{.*}}: f32, %{{.*}}: f32):
// GENERIC:          }) : (f32) -> f32
// GENERIC:        "loop.reduce"(%{{.*}}, %{{.*}}) <{bounds = array<i64: 32>}> ({
// GENERIC:          ^bb0(%{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32, %{{.*}}: f32):
// GENERIC:            "loop.yield"(%{{.*}}, %{{.*}}) : (f32, f32) -> ()
// GENERIC-NEXT:     }) : (f32, f32) -> (f32, f32)
// GENERIC:        "loop.parallel"() <{bounds = array<i64: 4, 16>}> ({
// GENERIC-NEXT:   ^bb0(%{{.*}}: index, %{{.*}}: index):
// GENERIC:          }) {tinyopt.contraction} : (f32) -> f32
// GENERIC:        }) {tag = 1 : i64} : () -> ()
// GENERIC:        "loop.reduce"(%{{.*}}) <{bounds = array<i64: 4, 8>}> ({
// GENERIC-NEXT:   ^bb0(%{{.*}}: index, %{{.*}}: index):
// GENERIC:        "loop.launch"(%{{.*}}, %{{.*}}) <{callee = @sm_0}> : (memref<64x128xf32>, memref<64x128xf32>) -> ()

builtin.module {
  // A row kernel: 1-D parallel over rows, a 1-value max reduce, a nested 1-D parallel.
  loop.kernel @sm_0(%x: memref<64x128xf32>, %out: memref<64x128xf32>) {
    loop.parallel (%i) in [64] {
      %ninf = arith.constant -3.0e38 : f32
      %m = loop.reduce (%j) in [128] init(%ninf : f32) {
        %v = memref.load %x[%i, %j] : memref<64x128xf32>
        loop.yield %v : f32
      } combine(%a, %b) {
        %c = arith.maximumf %a, %b : f32
        loop.yield %c : f32
      }
      loop.parallel (%j) in [128] {
        %v = memref.load %x[%i, %j] : memref<64x128xf32>
        %d = arith.subf %v, %m : f32
        memref.store %d, %out[%i, %j] : memref<64x128xf32>
      }
    }
  }

  // Online softmax statistics: a reduce whose state is the tuple (m, l).
  loop.kernel @stats_0(%x: memref<8x32xf32>, %ms: memref<8xf32>, %ls: memref<8xf32>) {
    loop.parallel (%r) in [8] {
      %ninf = arith.constant 0xFF800000 : f32
      %zero = arith.constant 0.0 : f32
      %one = arith.constant 1.0 : f32
      %m, %l = loop.reduce (%c) in [32] init(%ninf, %zero : f32, f32) {
        %v = memref.load %x[%r, %c] : memref<8x32xf32>
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
      memref.store %m, %ms[%r] : memref<8xf32>
      memref.store %l, %ls[%r] : memref<8xf32>
    }
  }

  // A 2-D parallel with a 1-value sum over a 2-D index space and an attribute dictionary.
  loop.kernel @mm_0(%a: memref<4x8xf32>, %b: memref<8x16xf32>, %o: memref<4x16xf32>) {
    loop.parallel (%m, %n) in [4, 16] attributes {tag = 1 : i64} {
      %zero = arith.constant 0.0 : f32
      %acc = loop.reduce (%k) in [8] init(%zero : f32) attributes {tinyopt.contraction} {
        %av = memref.load %a[%m, %k] : memref<4x8xf32>
        %bv = memref.load %b[%k, %n] : memref<8x16xf32>
        %p = arith.mulf %av, %bv : f32
        loop.yield %p : f32
      } combine(%p, %q) {
        %s = arith.addf %p, %q : f32
        loop.yield %s : f32
      }
      memref.store %acc, %o[%m, %n] : memref<4x16xf32>
    }
  }

  // A 2-D reduce (over the whole buffer) inside a kernel with no outer parallel loop.
  loop.kernel @total_0(%x: memref<4x8xf32>, %out: memref<1xf32>) {
    %zero = arith.constant 0.0 : f32
    %s = loop.reduce (%i, %j) in [4, 8] init(%zero : f32) {
      %v = memref.load %x[%i, %j] : memref<4x8xf32>
      loop.yield %v : f32
    } combine(%p, %q) {
      %t = arith.addf %p, %q : f32
      loop.yield %t : f32
    }
    %c0 = arith.constant 0 : index
    memref.store %s, %out[%c0] : memref<1xf32>
  }

  // A nest of 2-D and 1-D parallel loops.
  loop.kernel @nest_0(%x: memref<2x4x8xf32>, %y: memref<2x4x8xf32>) {
    loop.parallel (%b, %r) in [2, 4] {
      loop.parallel (%c) in [8] {
        %v = memref.load %x[%b, %r, %c] : memref<2x4x8xf32>
        %e = math.exp %v : f32
        memref.store %e, %y[%b, %r, %c] : memref<2x4x8xf32>
      }
    }
  }

  func.func @host(%x: memref<64x128xf32>) -> memref<64x128xf32> {
    %o = memref.alloc() : memref<64x128xf32>
    loop.launch @sm_0(%x, %o) : memref<64x128xf32>, memref<64x128xf32>
    func.return %o : memref<64x128xf32>
  }
}
