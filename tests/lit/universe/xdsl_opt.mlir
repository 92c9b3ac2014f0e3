// RUN: xdsl-opt %s -p canonicalize,tile,cse | filecheck %s
// RUN: xdsl-opt %s -p tile,canonicalize,cse,to-cuda | filecheck %s --check-prefix=CUDA
// RUN: xdsl-opt %S/../../../examples/softmax.mlir -p decompose,fuse,canonicalize,cse | filecheck %s --check-prefix=SOFTMAX
// The plain xDSL driver sees tinyopt's dialects and passes through the `xdsl.universe` entry
// point, and mixes them freely with xDSL's own passes.

// CHECK:     builtin.module {
// CHECK:       tile.kernel @double_0 grid [{{.+}}] block [{{.+}}] (%{{.+}}: memref<64x128xf32>, %{{.+}}: memref<64x128xf32>) attributes {plan = #tile.plan<{{.*}}>} {
// CHECK:         tile.block_id
// CHECK:         tile.thread_id
// CHECK-NOT:   loop.parallel
// CHECK:       func.func @double(%{{.+}}: memref<64x128xf32>) -> memref<64x128xf32> {
// CHECK-NEXT:    %{{.+}} = memref.alloc() : memref<64x128xf32>
// CHECK-NEXT:    loop.launch @double_0(

// CUDA:      tile.cuda_kernel @double_0
// CUDA-SAME: source = "{{.*}}__global__{{.*}}double_0(
// CUDA:      loop.launch @double_0(

// SOFTMAX:      loop.kernel @softmax_0(
// SOFTMAX:        loop.reduce
// SOFTMAX:        combine
// SOFTMAX:          arith.maximumf
// SOFTMAX:        loop.reduce
// SOFTMAX:          math.exp
// SOFTMAX:      func.func @softmax(
// SOFTMAX:        loop.launch @softmax_0(
builtin.module {
  loop.kernel @double_0(%x: memref<64x128xf32>, %out: memref<64x128xf32>) {
    loop.parallel (%i, %j) in [64, 128] {
      %v = memref.load %x[%i, %j] : memref<64x128xf32>
      %d = arith.addf %v, %v : f32
      memref.store %d, %out[%i, %j] : memref<64x128xf32>
    }
  }
  func.func @double(%x: memref<64x128xf32>) -> memref<64x128xf32> {
    %o = memref.alloc() : memref<64x128xf32>
    loop.launch @double_0(%x, %o) : memref<64x128xf32>, memref<64x128xf32>
    func.return %o : memref<64x128xf32>
  }
}
