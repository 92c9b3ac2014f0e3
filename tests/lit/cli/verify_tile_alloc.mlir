// RUN: not tinyopt %s 2>&1 | filecheck %s
// A verifier failure names the file, line and column of the failing op and the op's own
// sentence, then shows its source line with a caret (no dump of the IR).

// CHECK-NOT: Traceback
// CHECK: verify_tile_alloc.mlir:{{[0-9]+}}:5: error: tile.alloc: memory space must be 3 (shared) or 5 (registers), got memref<4xf32>
// CHECK-NEXT: %a = tile.alloc : memref<4xf32>
// CHECK-NEXT: ^^
// CHECK-NOT: {{Traceback|builtin.module|"tile.alloc"}}
builtin.module {
  func.func @f() {
    %a = tile.alloc : memref<4xf32>
    func.return
  }
}
