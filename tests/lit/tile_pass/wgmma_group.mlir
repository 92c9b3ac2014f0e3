// RUN: tinyopt %s -p 'fuse,tile{mma=wgmma bn=128 persistent=0}' | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{mma=wgmma bn=128 group=1 persistent=0}' | filecheck %s --check-prefix=ROWS

// With blocks launched per tile (persistent=0), the default group=16 launches the 16 x 17
// tiles of 128 x 128 in groups of 16 block rows (here one group of 272 tiles), down a
// group's rows first: the block with linear launch index l = 17 y + x computes tile row
// first + (l mod 272) mod height and tile column (l mod 272) / height, height = min(16 -
// first, 16) rows in its group. The 132 blocks in flight then cover all 16 rows of 8 or 9
// columns, sharing each B tile.
// CHECK:      %[[X:.*]] = tile.block_id x
// CHECK-NEXT: %[[Y:.*]] = tile.block_id y
// CHECK-NEXT: %[[COLUMNS:.*]] = arith.constant 17 : index
// CHECK-NEXT: %[[ROW_START:.*]] = arith.muli %[[Y]], %[[COLUMNS]] : index
// CHECK-NEXT: %[[LINEAR:.*]] = arith.addi %[[ROW_START]], %[[X]] : index
// CHECK-NEXT: %[[PER_GROUP:.*]] = arith.constant 272 : index
// CHECK-NEXT: %[[GROUP_INDEX:.*]] = arith.divui %[[LINEAR]], %[[PER_GROUP]] : index
// CHECK-NEXT: %[[SIXTEEN:.*]] = arith.constant 16 : index
// CHECK-NEXT: %[[FIRST:.*]] = arith.muli %[[GROUP_INDEX]], %[[SIXTEEN]] : index
// CHECK-NEXT: %[[LEFT:.*]] = arith.subi %[[SIXTEEN]], %[[FIRST]] : index
// CHECK-NEXT: %[[HEIGHT:.*]] = arith.minsi %[[LEFT]], %[[SIXTEEN]] : index
// CHECK-NEXT: %[[WITHIN:.*]] = arith.remui %[[LINEAR]], %[[PER_GROUP]] : index
// CHECK-NEXT: %[[COLUMN:.*]] = arith.divui %[[WITHIN]], %[[HEIGHT]] : index
// CHECK-NEXT: %[[ROW_IN_GROUP:.*]] = arith.remui %[[WITHIN]], %[[HEIGHT]] : index
// CHECK-NEXT: %[[ROW:.*]] = arith.addi %[[FIRST]], %[[ROW_IN_GROUP]] : index
// CHECK-NEXT: %[[BN:.*]] = arith.constant 128 : index
// CHECK-NEXT: arith.muli %[[COLUMN]], %[[BN]] : index
// CHECK-NEXT: arith.muli %[[ROW]], %[[BN]] : index

// group=1 is row-major: blockIdx.x is the tile column, blockIdx.y the tile row.
// ROWS:      %[[X:.*]] = tile.block_id x
// ROWS-NEXT: %[[Y:.*]] = tile.block_id y
// ROWS-NEXT: %[[BN:.*]] = arith.constant 128 : index
// ROWS-NEXT: arith.muli %[[X]], %[[BN]] : index
// ROWS-NEXT: arith.muli %[[Y]], %[[BN]] : index

func.func @mm(%a: tensor<2000x136xbf16>, %b: tensor<136x2104xbf16>) -> tensor<2000x2104xbf16> {
  %c = graph.matmul %a, %b : (tensor<2000x136xbf16>, tensor<136x2104xbf16>) -> tensor<2000x2104xbf16>
  func.return %c : tensor<2000x2104xbf16>
}
