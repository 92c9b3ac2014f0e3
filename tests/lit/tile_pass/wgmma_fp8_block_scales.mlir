// RUN: tinyopt %s -p 'fuse{debug=true}' 2>&1 | filecheck %s --check-prefix=FUSE
// RUN: tinyopt %s -p 'fuse,tile{pscales=step},to-cuda' | filecheck %s
// RUN: tinyopt %s -p fuse,tile | filecheck %s --check-prefix=AUTO

// An FP8 GEMM with block scales (torch's _scaled_mm with BlockWise1x128 activations and
// BlockWise128x128 weights): A's scale [M, K/128] and B's [K/128, N/128], each repeated over
// its block, multiply the widened operands. fuse keeps both scales inside the GEMM (B's is read
// through a division of the column index, which a plain operand may not be, but an FP8
// operand's 128x128 block scale may): one kernel.
// FUSE: fuse: @block_scaled_mm_0 computes %o (graph.cast), fusing %y (graph.matmul)
// FUSE-NOT: gets a buffer
// FUSE: loop.reduce
// FUSE: memref.load %1[%{{[0-9]+}}, %{{[0-9]+}}] : memref<256x3xf32>
// FUSE: memref.load %3[%{{[0-9]+}}, %{{[0-9]+}}] : memref<3x2xf32>

// The wgmma rule promotes each 128-element K step: the step's four k32 products go to
// registers of their own; with `pscales=step` the thread's two rows' scales of A and the
// block's scale of B are read two steps ahead (the first two steps' before the loop, then each step's once the step
// before it is issued), carried through a loop over pairs of steps (3 steps: one pair, then
// the last); once a step's products are done, they are added to the accumulators times the
// step's A row scale times B's, and the next step is issued.
// `pscales=auto` reads them a pair of steps at a time (wgmma.py `_scale_reads`).
// AUTO:       promote = "on"
// AUTO-SAME:  pscales = "pair"
// CHECK:      float [[TOP0:v[0-9]+]] = v1[{{.*}}];
// CHECK-NEXT: float [[BOTTOM0:v[0-9]+]] = v1[{{.*}}];
// CHECK:      float [[COLUMN0:v[0-9]+]] = v3[{{.*}}];
// CHECK-NEXT: float [[TOP1:v[0-9]+]] = v1[{{.*}}];
// CHECK-NEXT: float [[BOTTOM1:v[0-9]+]] = v1[{{.*}}];
// CHECK-NEXT: float [[COLUMN1:v[0-9]+]] = v3[{{.*}}];
// CHECK:      tinyopt_wgmma_m64n64k32_e4m3_k_set([[PRODUCTS:v[0-9]+]],
// CHECK:      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
// CHECK-NEXT: int [[PAIRS:v[0-9]+]] = (int)((unsigned)2 / (unsigned)2);
// CHECK-NEXT: float [[TOP:v[0-9]+]] = [[TOP0]];
// CHECK-NEXT: float [[BOTTOM:v[0-9]+]] = [[BOTTOM0]];
// CHECK-NEXT: float [[COLUMN:v[0-9]+]] = [[COLUMN0]];
// CHECK-NEXT: float [[TOP_NEXT:v[0-9]+]] = [[TOP1]];
// CHECK-NEXT: float [[BOTTOM_NEXT:v[0-9]+]] = [[BOTTOM1]];
// CHECK-NEXT: float [[COLUMN_NEXT:v[0-9]+]] = [[COLUMN1]];
// CHECK-NEXT: for (int [[PAIR:v[0-9]+]] = 0; [[PAIR]] < [[PAIRS]];
// CHECK-NEXT: int [[STEP:v[0-9]+]] = [[PAIR]] * 2;
// CHECK-NEXT: asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
// CHECK-NEXT: float [[TOP_FACTOR:v[0-9]+]] = [[TOP]] * [[COLUMN]];
// CHECK-NEXT: float [[BOTTOM_FACTOR:v[0-9]+]] = [[BOTTOM]] * [[COLUMN]];
// CHECK-NEXT: int
// CHECK-NEXT: tinyopt_mbarrier_arrive(
// CHECK-NEXT: float [[PRODUCT:v[0-9]+]] = [[PRODUCTS]][0];
// CHECK-NEXT: float [[SCALED:v[0-9]+]] = [[PRODUCT]] * [[TOP_FACTOR]];
// CHECK:      = [[PRODUCTS]][2];
// CHECK-NEXT: float {{v[0-9]+}} = {{v[0-9]+}} * [[BOTTOM_FACTOR]];
// CHECK:      tinyopt_wgmma_m64n64k32_e4m3_k_set([[PRODUCTS]],
// CHECK:      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
// CHECK-NEXT: int [[LATER:v[0-9]+]] = [[STEP]] + 2;
// CHECK-NEXT: int [[AHEAD:v[0-9]+]] = min([[LATER]], 2);
// CHECK-NEXT: float [[TOP_AHEAD:v[0-9]+]] = v1[{{v[0-9]+}} * 3 + [[AHEAD]]];
// CHECK-NEXT: float [[BOTTOM_AHEAD:v[0-9]+]] = v1[{{v[0-9]+}} * 3 + [[AHEAD]]];
// CHECK-NEXT: float [[COLUMN_AHEAD:v[0-9]+]] = v3[[[AHEAD]] * 2 + {{v[0-9]+}}];
// CHECK-NEXT: asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
// CHECK-NEXT: float {{v[0-9]+}} = [[TOP_NEXT]] * [[COLUMN_NEXT]];
// CHECK:      [[TOP]] = [[TOP_AHEAD]];
// CHECK-NEXT: [[BOTTOM]] = [[BOTTOM_AHEAD]];
// CHECK-NEXT: [[COLUMN]] = [[COLUMN_AHEAD]];

func.func @block_scaled_mm(%a: tensor<256x384xf8E4M3FN>, %sa: tensor<256x3xf32>, %b: tensor<256x384xf8E4M3FN>, %sb: tensor<3x2xf32>) -> tensor<256x256xbf16> {
  %a32 = graph.cast %a : tensor<256x384xf8E4M3FN> -> tensor<256x384xf32>
  %sak4 = graph.reshape %sa : tensor<256x3xf32> -> tensor<256x1x3x1xf32>
  %sakb = graph.broadcast %sak4 : tensor<256x1x3x1xf32> -> tensor<256x1x3x128xf32>
  %sakf = graph.reshape %sakb : tensor<256x1x3x128xf32> -> tensor<256x384xf32>
  %sakr = graph.slice %sakf {dim = 0 : i64, start = 0 : i64, step = 1 : i64} : tensor<256x384xf32> -> tensor<256x384xf32>
  %sak = graph.slice %sakr {dim = 1 : i64, start = 0 : i64, step = 1 : i64} : tensor<256x384xf32> -> tensor<256x384xf32>
  %ad = graph.mul %a32, %sak : tensor<256x384xf32>
  %b32 = graph.cast %b : tensor<256x384xf8E4M3FN> -> tensor<256x384xf32>
  %sbt = graph.transpose %sb {perm = array<i64: 1, 0>} : tensor<3x2xf32> -> tensor<2x3xf32>
  %sbk4 = graph.reshape %sbt : tensor<2x3xf32> -> tensor<2x1x3x1xf32>
  %sbkb = graph.broadcast %sbk4 : tensor<2x1x3x1xf32> -> tensor<2x128x3x128xf32>
  %sbkf = graph.reshape %sbkb : tensor<2x128x3x128xf32> -> tensor<256x384xf32>
  %sbkr = graph.slice %sbkf {dim = 0 : i64, start = 0 : i64, step = 1 : i64} : tensor<256x384xf32> -> tensor<256x384xf32>
  %sbk = graph.slice %sbkr {dim = 1 : i64, start = 0 : i64, step = 1 : i64} : tensor<256x384xf32> -> tensor<256x384xf32>
  %bd = graph.mul %b32, %sbk : tensor<256x384xf32>
  %bt = graph.transpose %bd {perm = array<i64: 1, 0>} : tensor<256x384xf32> -> tensor<384x256xf32>
  %y = graph.matmul %ad, %bt : (tensor<256x384xf32>, tensor<384x256xf32>) -> tensor<256x256xf32>
  %o = graph.cast %y : tensor<256x256xf32> -> tensor<256x256xbf16>
  func.return %o : tensor<256x256xbf16>
}
