// RUN: tinyopt %s --split-input-file --verify-diagnostics | filecheck %s

// Every loop dialect verifier error: kernel arguments, index spaces of parallel and reduce,
// the reduce's state types, its combine arity and the yields ending its two regions.
// Shapes the custom syntax cannot spell are written in the generic form.

builtin.module {
  // expected-error @+1 {{loop.kernel @k: arguments must be memrefs (buffers) or i32/i64 (runtime scalars, passed by value), got f32}}
  loop.kernel @k(%x: memref<4xf32>, %s: f32) {
  }
}
// CHECK: loop.kernel @k: arguments must be memrefs (buffers) or i32/i64 (runtime scalars, passed by value), got f32

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    // expected-error @+1 {{loop.parallel has 1 dimensions but its body has 2 index arguments}}
    "loop.parallel"() <{bounds = array<i64: 4>}> ({
    ^bb0(%i: index, %j: index):
    }) : () -> ()
  }
}
// CHECK: loop.parallel has 1 dimensions but its body has 2 index arguments

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    // expected-error @+1 {{loop.parallel needs at least one dimension}}
    "loop.parallel"() <{bounds = array<i64>}> ({
    ^bb0:
    }) : () -> ()
  }
}
// CHECK: loop.parallel needs at least one dimension

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    // expected-error @+1 {{loop.parallel extents must be positive, got [4, 0]}}
    loop.parallel (%i, %j) in [4, 0] {
    }
  }
}
// CHECK: loop.parallel extents must be positive, got [4, 0]

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    %zero = arith.constant 0.0 : f32
    // expected-error @+1 {{loop.reduce extents must be positive, got [-2]}}
    %s = loop.reduce (%i) in [-2] init(%zero : f32) {
      loop.yield %zero : f32
    } combine(%a, %b) {
      loop.yield %a : f32
    }
  }
}
// CHECK: loop.reduce extents must be positive, got [-2]

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    // expected-error @+1 {{loop.parallel body arguments must all be of type index}}
    "loop.parallel"() <{bounds = array<i64: 4>}> ({
    ^bb0(%i: i32):
    }) : () -> ()
  }
}
// CHECK: loop.parallel body arguments must all be of type index

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    %zero = arith.constant 0.0 : f32
    // expected-error @+1 {{loop.reduce has 1 dimensions but its body has 2 index arguments}}
    %s = "loop.reduce"(%zero) <{bounds = array<i64: 4>}> ({
    ^bb0(%i: index, %j: index):
      "loop.yield"(%zero) : (f32) -> ()
    }, {
    ^bb0(%a: f32, %b: f32):
      "loop.yield"(%a) : (f32) -> ()
    }) : (f32) -> f32
  }
}
// CHECK: loop.reduce has 1 dimensions but its body has 2 index arguments

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    %zero = arith.constant 0.0 : f32
    // expected-error @+1 {{loop.reduce results must have the types of its init values [f32], got [f16]}}
    %s = "loop.reduce"(%zero) <{bounds = array<i64: 4>}> ({
    ^bb0(%i: index):
      "loop.yield"(%zero) : (f32) -> ()
    }, {
    ^bb0(%a: f32, %b: f32):
      "loop.yield"(%a) : (f32) -> ()
    }) : (f32) -> f16
  }
}
// CHECK: loop.reduce results must have the types of its init values [f32], got [f16]

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    %zero = arith.constant 0.0 : f32
    // expected-error @+1 {{loop.reduce combine region must take two states (2 arguments of types [f32, f32]), got [f32]}}
    %s = "loop.reduce"(%zero) <{bounds = array<i64: 4>}> ({
    ^bb0(%i: index):
      "loop.yield"(%zero) : (f32) -> ()
    }, {
    ^bb0(%a: f32):
      "loop.yield"(%a) : (f32) -> ()
    }) : (f32) -> f32
  }
}
// CHECK: loop.reduce combine region must take two states (2 arguments of types [f32, f32]), got [f32]

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    %ninf = arith.constant 0xFF800000 : f32
    %zero = arith.constant 0.0 : f32
    // A 2-value state: the combine region takes (m1, l1, m2, l2), not (m1, m2).
    // expected-error @+1 {{loop.reduce combine region must take two states (4 arguments of types [f32, f32, f32, f32]), got [f32, f32]}}
    %m, %l = "loop.reduce"(%ninf, %zero) <{bounds = array<i64: 4>}> ({
    ^bb0(%i: index):
      "loop.yield"(%zero, %zero) : (f32, f32) -> ()
    }, {
    ^bb0(%a: f32, %b: f32):
      "loop.yield"(%a, %b) : (f32, f32) -> ()
    }) : (f32, f32) -> (f32, f32)
  }
}
// CHECK: loop.reduce combine region must take two states (4 arguments of types [f32, f32, f32, f32]), got [f32, f32]

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    %zero = arith.constant 0.0 : f32
    %s = "loop.reduce"(%zero) <{bounds = array<i64: 4>}> ({
    ^bb0(%i: index):
      // Without a terminator, xDSL's generic check blames the last op of the region.
      // expected-error @+1 {{Operation memref.load terminates block in single-block region but is not a terminator}}
      %v = memref.load %x[%i] : memref<4xf32>
    }, {
    ^bb0(%a: f32, %b: f32):
      "loop.yield"(%a) : (f32) -> ()
    }) : (f32) -> f32
  }
}
// CHECK: Operation memref.load terminates block in single-block region but is not a terminator

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    %zero = arith.constant 0.0 : f32
    // A terminator of another dialect gets past the generic checks; loop.reduce names it.
    // expected-error @+1 {{loop.reduce body must end with loop.yield}}
    %s = "loop.reduce"(%zero) <{bounds = array<i64: 4>}> ({
    ^bb0(%i: index):
      "test.termop"() : () -> ()
    }, {
    ^bb0(%a: f32, %b: f32):
      "loop.yield"(%a) : (f32) -> ()
    }) : (f32) -> f32
  }
}
// CHECK: loop.reduce body must end with loop.yield

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    %zero = arith.constant 0.0 : f32
    // expected-error @+1 {{Operation loop.reduce contains empty block in single-block region that expects at least a terminator}}
    %s = "loop.reduce"(%zero) <{bounds = array<i64: 4>}> ({
    ^bb0(%i: index):
    }, {
    ^bb0(%a: f32, %b: f32):
      "loop.yield"(%a) : (f32) -> ()
    }) : (f32) -> f32
  }
}
// CHECK: Operation loop.reduce contains empty block in single-block region that expects at least a terminator

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    %zero = arith.constant 0.0 : f32
    %one = arith.constant 1.0 : f32
    // expected-error @+1 {{loop.reduce body must yield one state of types [f32], got [f32, f32]}}
    %s = loop.reduce (%i) in [4] init(%zero : f32) {
      %v = memref.load %x[%i] : memref<4xf32>
      loop.yield %v, %one : f32, f32
    } combine(%a, %b) {
      %c = arith.addf %a, %b : f32
      loop.yield %c : f32
    }
  }
}
// CHECK: loop.reduce body must yield one state of types [f32], got [f32, f32]

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    %zero = arith.constant 0.0 : f32
    %s = "loop.reduce"(%zero) <{bounds = array<i64: 4>}> ({
    ^bb0(%i: index):
      "loop.yield"(%zero) : (f32) -> ()
    }, {
    ^bb0(%a: f32, %b: f32):
      // expected-error @+1 {{Operation arith.addf terminates block in single-block region but is not a terminator}}
      %c = arith.addf %a, %b : f32
    }) : (f32) -> f32
  }
}
// CHECK: Operation arith.addf terminates block in single-block region but is not a terminator

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    %zero = arith.constant 0.0 : f32
    // expected-error @+1 {{loop.reduce combine must end with loop.yield}}
    %s = "loop.reduce"(%zero) <{bounds = array<i64: 4>}> ({
    ^bb0(%i: index):
      "loop.yield"(%zero) : (f32) -> ()
    }, {
    ^bb0(%a: f32, %b: f32):
      "test.termop"() : () -> ()
    }) : (f32) -> f32
  }
}
// CHECK: loop.reduce combine must end with loop.yield

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    %zero = arith.constant 0.0 : f32
    // expected-error @+1 {{loop.reduce combine must yield one state of types [f32], got [index]}}
    %s = loop.reduce (%i) in [4] init(%zero : f32) {
      %v = memref.load %x[%i] : memref<4xf32>
      loop.yield %v : f32
    } combine(%a, %b) {
      %c0 = arith.constant 0 : index
      loop.yield %c0 : index
    }
  }
}
// CHECK: loop.reduce combine must yield one state of types [f32], got [index]

// -----

builtin.module {
  loop.kernel @k(%x: memref<4xf32>) {
    loop.parallel (%i) in [4] {
      %v = memref.load %x[%i] : memref<4xf32>
      // expected-error @+1 {{'loop.yield' expects parent op 'loop.reduce'}}
      loop.yield %v : f32
    }
  }
}
// CHECK: 'loop.yield' expects parent op 'loop.reduce'
