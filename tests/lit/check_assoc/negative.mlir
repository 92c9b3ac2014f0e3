// RUN: not tinyopt check-assoc %s | filecheck %s
// s = sin(s) + x has no merge: B = [-2] and B' = [0, -2] fold to the same state but differ
// after A = [-2]. The command exits 1 and prints the counterexample.

// CHECK:      @sine: not associative: counterexample A=[-2] B=[-2]: fold(A++B) = -2.9093 but merge(fold(A), fold(B)) = -2.78907
// CHECK-NEXT:   since B'=[0, -2] has fold(B') = fold(B) = -2 and fold(A++B') = -2.78907, no merge of the states can give both
// CHECK-NEXT:   the maps s ↦ f(s, x): math.sin of a state-dependent value leaves the affine and max-affine maps
// CHECK-NOT:  func.func
func.func @sine(%s: f32, %x: f32) -> f32 attributes {tinyopt.init = [0.0 : f32]} {
  %q = math.sin %s : f32
  %r = arith.addf %q, %x : f32
  func.return %r : f32
}
