// RUN: tinyopt %s -p 'fuse,plan{splitk_mode=cluster}' | filecheck %s
// RUN: not tinyopt %s -p 'fuse,plan{splitk=4 splitk_mode=cluster}' 2>&1 | filecheck %s --check-prefix=EXPLICIT

// splitk_mode=cluster with splitk=0: a split the planner gives a kernel the wgmma rule does not
// take folds as under splitk_mode=auto. 120x81, K = 1955: rows of 3910 bytes, not whole 16-byte
// TMA rows, so mma.sync takes it, split in 16 and folded by a second kernel.
// CHECK:      loop.kernel @unaligned_0_splitk({{.*}}plan = #tile.plan<mma_sync
// CHECK:      loop.kernel @unaligned_0_reduce
// An explicit split asks for clusters, which mma.sync does not run: refused by name.
// EXPLICIT:   error: tile: splitk_mode=cluster splits K over a cluster of blocks of the wgmma GEMM (f16/bf16, mma=auto or wgmma), and kernel @unaligned_0 is not planned so: mma=wgmma needs the rows of A and B to be multiples of 16 bytes (TMA), got K=1955, N=81
func.func @unaligned(%x: tensor<120x1955xbf16>, %w: tensor<81x1955xbf16>) -> tensor<120x81xbf16> {
  %y = graph.linear %x, %w : (tensor<120x1955xbf16>, tensor<81x1955xbf16>) -> tensor<120x81xbf16>
  func.return %y : tensor<120x81xbf16>
}
