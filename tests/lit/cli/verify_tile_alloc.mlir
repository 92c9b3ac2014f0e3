// RUN: not tinyopt %s 2>&1 | filecheck %s
// A verifier failure names the file and the op's own sentence, and shows the failing op.

// CHECK-NOT: Traceback
// CHECK: verify_tile_alloc.mlir: error: tile.alloc: memory space must be 3 (shared) or 5 (registers), got memref<4xf32>
// CHECK: "tile.alloc"() : () -> memref<4xf32>
// CHECK-NEXT: ^^^^
// CHECK-NOT: Traceback
builtin.module {
  func.func @f() {
    %a = tile.alloc : memref<4xf32>
    func.return
  }
}
