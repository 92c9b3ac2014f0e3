// RUN: tinyopt %s -p 'fuse,tile{mma=wgmma ws=0 bm=64 bn=64 stages=2 store=smem},to-cuda' | filecheck %s

// The CUDA of store=smem: the staging tile is a third dynamic buffer after the ring (2 x 16 KiB
// + 16 KiB + 1024 of slack = 50176 bytes). Before staging, each thread issues its bias load
// into a register array: 8 values, one 16-byte load, once for all four rows it will handle
// (the bias does not depend on the row), guarded by the column bound alone. Then the
// accumulators are written as float2 at swizzled columns (16-byte chunk XOR 2(row % 4) +
// row % 2), the warpgroup meets at `bar.sync 1 + group, 128`, and each thread reads its 8
// columns as two float4 and, inside the row and column guard, adds the bias from the
// registers and stores 8 outputs as one 16-byte vector; the next row reads the same bias.

// CHECK:      // kernel @linear_0 grid (2, 2, 1) block (128, 1, 1) smem 50176
// CHECK:      float (*[[STAGE:v[0-9]+]])[64][64] = reinterpret_cast<float (*)[64][64]>(tinyopt_smem_base + 32768);
// CHECK:      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
// CHECK:      int [[BAR:v[0-9]+]] = [[GROUP:v[0-9]+]] + 1;
// CHECK:      __nv_bfloat16 [[BIAS:v[0-9]+]][8];
// CHECK:      bool [[ROW:v[0-9]+]] = (unsigned){{v[0-9]+}} < (unsigned)128;
// CHECK-NEXT: bool [[COLUMN:v[0-9]+]] = (unsigned){{v[0-9]+}} < (unsigned)128;
// CHECK-NEXT: bool [[INSIDE:v[0-9]+]] = [[ROW]] & [[COLUMN]];
// CHECK-NEXT: if ([[COLUMN]]) {
// CHECK-NEXT:     tinyopt_vec<__nv_bfloat16, 8> vec = *reinterpret_cast<const tinyopt_vec<__nv_bfloat16, 8>*>(&{{v[0-9]+}}[{{v[0-9]+}}]);
// CHECK:          [[BIAS]][7] = {{v[0-9]+}};
// CHECK:      int {{v[0-9]+}} = {{v[0-9]+}} ^ {{v[0-9]+}};
// CHECK:      *reinterpret_cast<tinyopt_vec<float, 2>*>(&[[STAGE]][[[GROUP]]][{{v[0-9]+}}][{{v[0-9]+}}]) = tinyopt_vec<float, 2>{{[{][{]}}{{v[0-9]+}}, {{v[0-9]+}}{{[}][}]}};
// CHECK-COUNT-15: *reinterpret_cast<tinyopt_vec<float, 2>*>(&[[STAGE]]
// CHECK-NEXT: asm volatile("bar.sync %0, 128;" :: "r"((unsigned)[[BAR]]) : "memory");
// CHECK:      tinyopt_vec<float, 4> vec_1 = *reinterpret_cast<const tinyopt_vec<float, 4>*>(&[[STAGE]][[[GROUP]]]
// CHECK:      tinyopt_vec<float, 4> vec_2 = *reinterpret_cast<const tinyopt_vec<float, 4>*>(&[[STAGE]][[[GROUP]]]
// CHECK:      if ([[INSIDE]]) {
// CHECK-NEXT:     __nv_bfloat16 {{v[0-9]+}} = [[BIAS]][0];
// CHECK:          *reinterpret_cast<tinyopt_vec<__nv_bfloat16, 8>*>(&{{.*}}[{{v[0-9]+}} * 128 + {{v[0-9]+}}]) = tinyopt_vec<__nv_bfloat16, 8>
// CHECK:      if ({{v[0-9]+}}) {
// CHECK-NEXT:     __nv_bfloat16 {{v[0-9]+}} = [[BIAS]][0];
// CHECK-NOT:  bar.sync

func.func @linear(%x: tensor<128x64xbf16>, %w: tensor<128x64xbf16>, %b: tensor<128xbf16>) -> tensor<128x128xbf16> {
  %y = graph.linear %x, %w, %b : (tensor<128x64xbf16>, tensor<128x64xbf16>, tensor<128xbf16>) -> tensor<128x128xbf16>
  func.return %y : tensor<128x128xbf16>
}
