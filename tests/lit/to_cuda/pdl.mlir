// RUN: tinyopt %s -p 'decompose,fuse,tile,to-cuda{pdl=1}' | filecheck %s
// RUN: tinyopt %s -p 'decompose,fuse,tile,to-cuda' | filecheck %s
// RUN: tinyopt %s -p 'decompose,fuse,tile,to-cuda{pdl=0}' | filecheck %s --check-prefix=OFF
// RUN: tinyopt %s -p 'decompose,fuse,tile,to-cuda{pdl=1}' -t mlir | filecheck %s --check-prefix=IR
// RUN: not tinyopt %s -p 'decompose,fuse,tile,to-cuda{pdl=2}' 2>&1 | filecheck %s --check-prefix=BAD

// With pdl=1 (the default) every kernel opens with griddepcontrol.wait (compiled for sm_90 and
// newer only), before anything else of its body
// (here before the dynamic shared memory of the wgmma GEMM is laid out), then
// griddepcontrol.launch_dependents; the kernel is marked `pdl` for the runtime. Without it,
// neither is printed.

// CHECK:      // kernel @linear_softmax_0 grid ({{.*}}) block ({{.*}}) smem {{[0-9]+}} pdl
// CHECK:      extern "C" __global__ void {{.*}} linear_softmax_0(
// CHECK-NEXT:     // programmatic dependent launch: wait
// CHECK-NEXT:     //
// CHECK-NEXT:     //
// CHECK-NEXT:     #if __CUDA_ARCH__ >= 900
// CHECK-NEXT:     asm volatile("griddepcontrol.wait;" ::: "memory");
// CHECK-NEXT:     asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
// CHECK-NEXT:     #endif
// CHECK-NEXT:     extern __shared__ __align__(1024) unsigned char tinyopt_smem[];
// CHECK:      // kernel @linear_softmax_1 grid ({{.*}}) block ({{.*}}) smem 0 pdl
// CHECK:      extern "C" __global__ void {{.*}} linear_softmax_1(
// CHECK-NEXT:     // programmatic dependent launch: wait
// CHECK-NEXT:     //
// CHECK-NEXT:     //
// CHECK-NEXT:     #if __CUDA_ARCH__ >= 900
// CHECK-NEXT:     asm volatile("griddepcontrol.wait;" ::: "memory");
// CHECK-NEXT:     asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
// CHECK-NEXT:     #endif
// CHECK-NEXT:     int v2 = (int)blockIdx.x;

// OFF:     // kernel @linear_softmax_0 grid ({{.*}}) block ({{.*}}) smem {{[0-9]+$}}
// OFF-NOT: griddepcontrol
// OFF:     // kernel @linear_softmax_1 grid ({{.*}}) block ({{.*}}) smem 0{{$}}
// OFF-NOT: griddepcontrol

// IR: tile.cuda_kernel @linear_softmax_0 {{.*}}, pdl}
// IR: tile.cuda_kernel @linear_softmax_1 {{.*}}, pdl}

// BAD: error: to-cuda: pdl must be 0 or 1, got 2

func.func @linear_softmax(%x: tensor<128x64xbf16>, %w: tensor<128x64xbf16>) -> tensor<128x128xbf16> {
  %y = graph.linear %x, %w : (tensor<128x64xbf16>, tensor<128x64xbf16>) -> tensor<128x128xbf16>
  %s = graph.softmax %y {dim = 1 : i64} : tensor<128x128xbf16>
  func.return %s : tensor<128x128xbf16>
}
