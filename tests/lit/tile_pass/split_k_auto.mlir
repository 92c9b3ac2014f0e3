// RUN: tinyopt %s -p fuse,plan | filecheck %s
// RUN: tinyopt %s -p 'fuse,plan{splitk_mode=twopass}' | filecheck %s --check-prefix=TWOPASS
// RUN: tinyopt %s -p 'fuse,plan{splitk=1}' | filecheck %s --check-prefix=OFF
// RUN: tinyopt %s -p 'fuse,plan{align=on}' | filecheck %s --check-prefix=STAGED

// splitk=0 (auto, split_k_plan.py): an f16/bf16 GEMM on the mma.sync rule whose 64x64 tiles
// are fewer than the 132 SMs (the wgmma rule's: below) is cut into the power-of-two count of K chunks whose estimate is
// cheapest (and 0.8 of the unsplit one or less), keeping at least 3 K steps of 32 per chunk and
// fewer 128x128 tiles than SMs in the partial kernel.

// 120x81, K = 1955: 4 tiles; chunks of 96 keys or more allow 16: a partial kernel over
// (16, 120, 81) and a fold. splitk=1 keeps one kernel.
// CHECK:      loop.kernel @long_k_0_splitk
// CHECK-SAME: plan = #tile.plan<mma_sync
// CHECK:      loop.parallel (%{{.*}}, %{{.*}}, %{{.*}}) in [16, 120, 81]
// CHECK:      loop.kernel @long_k_0_reduce
// OFF:        loop.kernel @long_k_0(
// OFF-NOT:    splitk
// Only kernels the mma.sync rule takes are split: with align=on the operands are staged for
// wgmma instead.
// STAGED:     loop.kernel @long_k_0_pad_a
// STAGED:     loop.kernel @long_k_0_pad_b
// STAGED:     loop.kernel @long_k_0(
// STAGED-SAME: plan = #tile.plan<wgmma
func.func @long_k(%x: tensor<120x1955xbf16>, %w: tensor<81x1955xbf16>) -> tensor<120x81xbf16> {
  %y = graph.linear %x, %w : (tensor<120x1955xbf16>, tensor<81x1955xbf16>) -> tensor<120x81xbf16>
  func.return %y : tensor<120x81xbf16>
}

// K = 200 (7 steps): a split of 2 would save 3 steps, less than the fold costs: one kernel.
// CHECK:      loop.kernel @short_k_0(
// CHECK-NOT:  @short_k_0_splitk
func.func @short_k(%x: tensor<120x200xbf16>, %w: tensor<81x200xbf16>) -> tensor<120x81xbf16> {
  %y = graph.linear %x, %w : (tensor<120x200xbf16>, tensor<81x200xbf16>) -> tensor<120x81xbf16>
  func.return %y : tensor<120x81xbf16>
}

// 1024x1024: 256 tiles, more than a wave: not split, whatever K.
// CHECK:      loop.kernel @full_grid_0(
// CHECK-SAME: plan = #tile.plan<wgmma
func.func @full_grid(%x: tensor<1024x8192xbf16>, %w: tensor<1024x8192xbf16>) -> tensor<1024x1024xbf16> {
  %y = graph.linear %x, %w : (tensor<1024x8192xbf16>, tensor<1024x8192xbf16>) -> tensor<1024x1024xbf16>
  func.return %y : tensor<1024x1024xbf16>
}

// 384x128, K = 16384: its rows are aligned, so the wgmma rule takes it: 12 blocks of 64x64.
// The wgmma split (split_k_plan.auto_wgmma_splits) keeps whole 64-element K steps in chunks:
// 8 chunks of 2048 (32 steps of 0.22 us, estimated, against 256 unsplit). Its 12 clusters of
// 8 blocks fit one wave (15 do), so the split runs over clusters, one kernel and no fold
// (split_k_plan.cluster_split_estimate); splitk_mode=twopass runs the partial kernel on wgmma
// reading K at (its batch index % 8) * 2048, then the fold.
// CHECK:      loop.kernel @aligned_0(
// CHECK-SAME: plan = #tile.plan<wgmma, bm = 64, bn = 64, {{.*}}cluster = 8,
// CHECK-NOT:  @aligned_0_reduce
// TWOPASS:      loop.kernel @aligned_0_splitk(
// TWOPASS-SAME: plan = #tile.plan<wgmma
// TWOPASS:      loop.parallel (%{{.*}}, %{{.*}}, %{{.*}}) in [8, 384, 128]
// TWOPASS:      loop.kernel @aligned_0_reduce
func.func @aligned(%x: tensor<384x16384xbf16>, %w: tensor<128x16384xbf16>) -> tensor<384x128xbf16> {
  %y = graph.linear %x, %w : (tensor<384x16384xbf16>, tensor<128x16384xbf16>) -> tensor<384x128xbf16>
  func.return %y : tensor<384x128xbf16>
}

// M = 64 on the wgmma rule (4 blocks of 64x64) is the wgmma rule's to split: over clusters
// of 8 (two passes: 16 chunks of 256). M = 8 belongs to the skinny rules, which split K
// themselves (not the planner), and f32 to the CUDA-core rule's stream-K: neither is split here.
// CHECK:      loop.kernel @rows_64_0(
// CHECK-SAME: plan = #tile.plan<wgmma, {{.*}}cluster = 8,
// TWOPASS:      loop.kernel @rows_64_0_splitk(
// TWOPASS-SAME: plan = #tile.plan<wgmma
// TWOPASS:      loop.parallel (%{{.*}}, %{{.*}}, %{{.*}}) in [16, 64, 256]
func.func @rows_64(%x: tensor<64x4096xbf16>, %w: tensor<256x4096xbf16>) -> tensor<64x256xbf16> {
  %y = graph.linear %x, %w : (tensor<64x4096xbf16>, tensor<256x4096xbf16>) -> tensor<64x256xbf16>
  func.return %y : tensor<64x256xbf16>
}
// CHECK:      loop.kernel @skinny_0(
// CHECK-NOT:  @skinny_0_splitk
func.func @skinny(%x: tensor<8x4096xbf16>, %w: tensor<256x4096xbf16>) -> tensor<8x256xbf16> {
  %y = graph.linear %x, %w : (tensor<8x4096xbf16>, tensor<256x4096xbf16>) -> tensor<8x256xbf16>
  func.return %y : tensor<8x256xbf16>
}
// CHECK:      loop.kernel @f32_0(
// CHECK-NOT:  @f32_0_splitk
func.func @f32(%x: tensor<120x1955xf32>, %w: tensor<81x1955xf32>) -> tensor<120x81xf32> {
  %y = graph.linear %x, %w : (tensor<120x1955xf32>, tensor<81x1955xf32>) -> tensor<120x81xf32>
  func.return %y : tensor<120x81xf32>
}
