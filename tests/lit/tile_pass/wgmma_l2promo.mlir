// RUN: tinyopt %s -p fuse,tile | filecheck %s
// RUN: tinyopt %s -p 'fuse,tile{l2promo=256}' | filecheck %s --check-prefix=P256
// RUN: tinyopt %s -p 'fuse,plan,tile' -t mlir | filecheck %s --check-prefix=PLAN
// RUN: not tinyopt %s -p 'fuse,tile{l2promo=32}' 2>&1 | filecheck %s --check-prefix=BAD

// The wgmma GEMM's tensor maps carry the L2 promotion `l2promo` gives (wgmma_plan.py,
// `l2_promotion`): none by default (the entry is left out), 256 bytes on both operands with
// l2promo=256. K = 3000 puts B's rows 16 bytes off 32-byte sectors.
// CHECK:      tile.kernel @off_sectors_0
// CHECK-SAME: tensor_maps = [{arg = 0 : i64, box = array<i64: {{[0-9]+}}, 64>, swizzle = 128 : i64}, {arg = 1 : i64, box = array<i64: {{[0-9]+}}, 64>, swizzle = 128 : i64}]
// P256:       tile.kernel @off_sectors_0
// P256-SAME:  tensor_maps = [{arg = 0 : i64, box = array<i64: {{[0-9]+}}, 64>, swizzle = 128 : i64, l2_promotion = 256 : i64}, {arg = 1 : i64, box = array<i64: {{[0-9]+}}, 64>, swizzle = 128 : i64, l2_promotion = 256 : i64}]
// PLAN:       plan = #tile.plan<wgmma, {{.*}} l2promo = 0, poverlap = "off", pturns = "off", pscales = "step", swap = "off">
// BAD:        tile: l2promo must be auto, 0 (none), 64, 128 or 256, got 32
func.func @off_sectors(%x: tensor<1000x3000xbf16>, %w: tensor<2048x3000xbf16>) -> tensor<1000x2048xbf16> {
  %y = graph.linear %x, %w : (tensor<1000x3000xbf16>, tensor<2048x3000xbf16>) -> tensor<1000x2048xbf16>
  func.return %y : tensor<1000x2048xbf16>
}
