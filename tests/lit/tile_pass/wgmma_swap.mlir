// RUN: tinyopt %s -p 'fuse,plan{swap=on}' | filecheck %s
// RUN: tinyopt %s -p fuse,plan | filecheck %s --check-prefix=AUTO
// RUN: tinyopt %s -p 'fuse,tile{swap=on},to-cuda' -t cuda | filecheck %s --check-prefix=CUDA
// RUN: not tinyopt %s -p 'fuse,tile{swap=on store=tma}' 2>&1 | filecheck %s --check-prefix=BAD
// RUN: tinyopt %s -p 'fuse,plan{swap=on}' | sed 's/store = "smem"/store = "tma"/' | not tinyopt - -p tile 2>&1 | filecheck %s --check-prefix=PLANNED

// swap=on runs the bf16 GEMM with its sides exchanged (wgmma_swap.py): a block's consumer rows
// are 128 of B's N and its wgmma N 208 of A's rows, 5 × 8 × 3 = 120 blocks in one wave (the
// plain plan's 128×256 leave 36 of 132 SMs idle). B `[K, N]` is N-major: its 64-column chunks
// are read M-major (the `_ta` wgmma, trans-a). swap=auto leaves it unswapped.
// CHECK:      loop.kernel @bmm_0({{.*}}plan = #tile.plan<wgmma, bm = 128, bn = 208, {{.*}}persistent = 0,{{.*}}swap = "on">
// AUTO:       loop.kernel @bmm_0({{.*}}plan = #tile.plan<wgmma, {{.*}}swap = "off">
// CUDA:       // kernel @bmm_0 grid (5, 8, 3) block (384, 1, 1)
// CUDA:       void tinyopt_wgmma_m64n208k16_bf16_k_ta(
// CUDA:       bmm_0(
// CUDA:       tinyopt_wgmma_m64n208k16_bf16_k_ta(v{{[0-9]+}}, tinyopt_wgmma_desc({{.*}}, 8192, 1024), tinyopt_wgmma_desc({{.*}}, 16, 1024));
// BAD:        swap=on runs f16/bf16 operands on blocks with a producer warpgroup that store direct or staged; not with store=tma
// A swapped plan written by hand is checked as the knobs are: no TMA stores.
// PLANNED:    tile: plan of kernel @bmm_0: mma=wgmma swaps the sides (swap) of one f16/bf16 GEMM whose blocks store direct or staged, each its own tiles
func.func @bmm(%a: tensor<3x1000x1000xbf16>, %b: tensor<3x1000x1000xbf16>) -> tensor<3x1000x1000xbf16> {
  %y = graph.matmul %a, %b : (tensor<3x1000x1000xbf16>, tensor<3x1000x1000xbf16>) -> tensor<3x1000x1000xbf16>
  func.return %y : tensor<3x1000x1000xbf16>
}
