// RUN: tinyopt %s --split-input-file --verify-diagnostics | filecheck %s

// graph composites (softmax, norms, linear, attention) reject inconsistent operands.
func.func @f0(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{graph.softmax: dim 2 is out of range for rank 2}}
  %y = graph.softmax %x {dim = 2 : i64} : tensor<4x8xf32>
  func.return
}
// CHECK: graph.softmax: dim 2 is out of range for rank 2

// -----

func.func @f1(%x: tensor<4x8xf32>, %w: tensor<4xf32>) {
  // expected-error @+1 {{graph.rms_norm: weight shape must be 8, got 4}}
  %y = graph.rms_norm %x, %w {eps = 1.0e-06 : f32} : (tensor<4x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  func.return
}
// CHECK: graph.rms_norm: weight shape must be 8, got 4

// -----

func.func @f2(%x: tensor<4x8xf32>, %w: tensor<8xf16>) {
  // expected-error @+1 {{graph.rms_norm: element types differ: x is f32, weight is f16}}
  %y = graph.rms_norm %x, %w {eps = 1.0e-06 : f32} : (tensor<4x8xf32>, tensor<8xf16>) -> tensor<4x8xf32>
  func.return
}
// CHECK: graph.rms_norm: element types differ: x is f32, weight is f16

// -----

func.func @f3(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{graph.rms_norm: result type tensor<8x4xf32> must equal x type tensor<4x8xf32>}}
  %y = graph.rms_norm %x, %w {eps = 1.0e-06 : f32} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<8x4xf32>
  func.return
}
// CHECK: graph.rms_norm: result type tensor<8x4xf32> must equal x type tensor<4x8xf32>

// -----

func.func @f4(%x: tensor<f32>, %w: tensor<f32>) {
  // expected-error @+1 {{graph.rms_norm: x must have rank at least 1}}
  %y = graph.rms_norm %x, %w {eps = 1.0e-06 : f32} : (tensor<f32>, tensor<f32>) -> tensor<f32>
  func.return
}
// CHECK: graph.rms_norm: x must have rank at least 1

// -----

func.func @f5(%x: tensor<4x8xf32>, %w: tensor<8xf32>, %b: tensor<1x8xf32>) {
  // expected-error @+1 {{graph.layer_norm: bias shape must be 8, got 1x8}}
  %y = graph.layer_norm %x, %w, %b {eps = 1.0e-05 : f32} : (tensor<4x8xf32>, tensor<8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  func.return
}
// CHECK: graph.layer_norm: bias shape must be 8, got 1x8

// -----

func.func @f6(%x: tensor<4x64xf32>, %w: tensor<16x32xf32>) {
  // expected-error @+1 {{graph.linear: contraction dims differ: x has K=64, weight has K=32}}
  %y = graph.linear %x, %w : (tensor<4x64xf32>, tensor<16x32xf32>) -> tensor<4x16xf32>
  func.return
}
// CHECK: graph.linear: contraction dims differ: x has K=64, weight has K=32

// -----

func.func @f7(%x: tensor<4x8xf32>, %w: tensor<8xf32>) {
  // expected-error @+1 {{graph.linear: weight must be rank 2 [N, K], got rank 1}}
  %y = graph.linear %x, %w : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4xf32>
  func.return
}
// CHECK: graph.linear: weight must be rank 2 [N, K], got rank 1

// -----

func.func @f8(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+1 {{graph.linear: bias shape must be 16, got 8}}
  %y = graph.linear %x, %w, %b : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<4x16xf32>
  func.return
}
// CHECK: graph.linear: bias shape must be 16, got 8

// -----

func.func @f9(%x: tensor<2x4x8xf32>, %w: tensor<16x8xf32>) {
  // expected-error @+1 {{graph.linear: result shape must be 2x4x16, got 8x16}}
  %y = graph.linear %x, %w : (tensor<2x4x8xf32>, tensor<16x8xf32>) -> tensor<8x16xf32>
  func.return
}
// CHECK: graph.linear: result shape must be 2x4x16, got 8x16

// -----

func.func @f10(%x: tensor<f32>, %w: tensor<16x8xf32>) {
  // expected-error @+1 {{graph.linear: x must have rank at least 1}}
  %y = graph.linear %x, %w : (tensor<f32>, tensor<16x8xf32>) -> tensor<16xf32>
  func.return
}
// CHECK: graph.linear: x must have rank at least 1

// -----

func.func @f11(%q: tensor<4x16x8xf32>) {
  // expected-error @+1 {{graph.attention: q must be rank 4 [B, H, S, D], got rank 3}}
  %o = graph.attention %q, %q, %q {scale = 0.125 : f32} : (tensor<4x16x8xf32>, tensor<4x16x8xf32>, tensor<4x16x8xf32>) -> tensor<4x16x8xf32>
  func.return
}
// CHECK: graph.attention: q must be rank 4 [B, H, S, D], got rank 3

// -----

func.func @f12(%q: tensor<1x6x4x8xf32>, %k: tensor<1x4x4x8xf32>) {
  // expected-error @+1 {{graph.attention: query heads (6) must be a multiple of key/value heads (4)}}
  %o = graph.attention %q, %k, %k {scale = 0.125 : f32} : (tensor<1x6x4x8xf32>, tensor<1x4x4x8xf32>, tensor<1x4x4x8xf32>) -> tensor<1x6x4x8xf32>
  func.return
}
// CHECK: graph.attention: query heads (6) must be a multiple of key/value heads (4)

// -----

func.func @f13(%q: tensor<1x2x8x8xf32>, %k: tensor<1x2x4x8xf32>) {
  // expected-error @+1 {{graph.attention: causal attention needs Sq <= Skv (query i sees keys j <= i + Skv - Sq; the first 4 queries would see none), got Sq=8, Skv=4}}
  %o = graph.attention %q, %k, %k {scale = 0.125 : f32, causal = true} : (tensor<1x2x8x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x8x8xf32>
  func.return
}
// CHECK: graph.attention: causal attention needs Sq <= Skv

// -----

func.func @f14(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x4x8xf32>, %m: tensor<1x1x3x5xi1>) {
  // expected-error @+1 {{graph.attention: mask 1x1x3x5 must be rank 4 and broadcast to the scores 1x2x3x4}}
  %o = graph.attention %q, %k, %k, %m {scale = 0.125 : f32} : (tensor<1x2x3x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x3x5xi1>) -> tensor<1x2x3x8xf32>
  func.return
}
// CHECK: graph.attention: mask 1x1x3x5 must be rank 4 and broadcast to the scores 1x2x3x4

// -----

func.func @f15(%q: tensor<1x2x3x8xf32>, %k: tensor<1x2x4x8xf32>, %m: tensor<1x1x3x4xf16>) {
  // expected-error @+1 {{graph.attention: mask element type must be f32 (added to the scores) or i1 (true keeps a score), got f16}}
  %o = graph.attention %q, %k, %k, %m {scale = 0.125 : f32} : (tensor<1x2x3x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x1x3x4xf16>) -> tensor<1x2x3x8xf32>
  func.return
}
// CHECK: graph.attention: mask element type must be f32
