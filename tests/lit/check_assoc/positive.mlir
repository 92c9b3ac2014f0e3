// RUN: tinyopt check-assoc %s | filecheck %s
// Secretly associative folds: the online softmax (m, l) update gets the rescaling merge and
// s = 0.5·max(s, x) + x composes as max-affine maps; each merge is printed as IR.

// CHECK:      @online_softmax: associative: merge = online-softmax rescaling with running maximum m: m = max(m_a, m_b), every other component c = c_a·exp(m_a − m) + c_b·exp(m_b − m)
// CHECK-NEXT: func.func @online_softmax_merge(%m_a: f32, %l_a: f32, %m_b: f32, %l_b: f32) -> (f32, f32) {
// CHECK-NEXT:   %[[M:.*]] = arith.maximumf %m_a, %m_b : f32
// CHECK-NEXT:   %[[DA:.*]] = arith.subf %m_a, %[[M]] : f32
// CHECK-NEXT:   %[[EA:.*]] = math.exp %[[DA]] : f32
// CHECK-NEXT:   %[[DB:.*]] = arith.subf %m_b, %[[M]] : f32
// CHECK-NEXT:   %[[EB:.*]] = math.exp %[[DB]] : f32
// CHECK-NEXT:   %[[SA:.*]] = arith.mulf %l_a, %[[EA]] : f32
// CHECK-NEXT:   %[[SB:.*]] = arith.mulf %l_b, %[[EB]] : f32
// CHECK-NEXT:   %[[L:.*]] = arith.addf %[[SA]], %[[SB]] : f32
// CHECK-NEXT:   func.return %[[M]], %[[L]] : f32, f32
// CHECK-NEXT: }
func.func @online_softmax(%m: f32, %l: f32, %x: f32) -> (f32, f32)
    attributes {tinyopt.init = [0xFF800000 : f32, 0.0 : f32]} {
  %nm = arith.maximumf %m, %x : f32
  %d = arith.subf %m, %nm : f32
  %e = math.exp %d : f32
  %sl = arith.mulf %l, %e : f32
  %dx = arith.subf %x, %nm : f32
  %ex = math.exp %dx : f32
  %nl = arith.addf %sl, %ex : f32
  func.return %nm, %nl : f32, f32
}

// CHECK:      @max_affine: associative: merge = composition of max-affine maps s ↦ max(c·s + d, e) (c ≥ 0): each element gives c = 0.5, d = x, e = (x * 0.5) + x;
// CHECK-NEXT: func.func @max_affine_lift(%x: f32) -> (f32, f32, f32) {
// CHECK:        func.return %{{.*}}, %x, %{{.*}} : f32, f32, f32
// CHECK:      func.func @max_affine_merge(%c_a: f32, %d_a: f32, %e_a: f32, %c_b: f32, %d_b: f32, %e_b: f32) -> (f32, f32, f32) attributes {tinyopt.identity = [1.000000e+00 : f32, 0.000000e+00 : f32, 0xff800000 : f32]} {
// CHECK:      func.func @max_affine_apply(%c: f32, %d: f32, %e: f32) -> f32 {
func.func @max_affine(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [0.0 : f32]} {
  %h = arith.constant 0.5 : f32
  %m = arith.maximumf %s, %x : f32
  %hm = arith.mulf %h, %m : f32
  %r = arith.addf %hm, %x : f32
  func.return %r : f32
}
