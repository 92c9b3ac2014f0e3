// RUN: tinyopt %s --split-input-file --verify-diagnostics | filecheck %s

// loop.launch names a kernel of the module and passes it buffers of its types.
loop.kernel @k(%a: memref<4xf32>) {
}
func.func @f0(%y: memref<8xf32>) {
  // expected-error @+1 {{loop.launch: @k takes (memref<4xf32>), got (memref<8xf32>)}}
  loop.launch @k(%y) : memref<8xf32>
  func.return
}
// CHECK: loop.launch: @k takes (memref<4xf32>), got (memref<8xf32>)

// -----

func.func @f1(%x: memref<4xf32>) {
  // expected-error @+1 {{loop.launch: @nope is no kernel of this module}}
  loop.launch @nope(%x) : memref<4xf32>
  func.return
}
// CHECK: loop.launch: @nope is no kernel of this module
