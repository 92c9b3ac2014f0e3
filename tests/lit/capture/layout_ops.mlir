// RUN: tinyopt capture %S/layout_ops.py:model > %t.mlir
// RUN: filecheck %s < %t.mlir
// RUN: tinyopt %t.mlir -p fuse,tile,to-cuda | filecheck %s --check-prefix=CUDA

// How padding, rolls, repeats, pooling (ceil_mode, adaptive to a non-divisor), Tensor.unfold,
// batch and group norm, any/all, narrow, movedim, linspace and eye are captured
// (tests/lit/capture/layout_ops.py; frontends/torch_fx.py, "padding and copies", "pooling").

// pad: blocks of the value around x, concatenated along the padded dim.
// CHECK:      graph.constant dense<-1.000000e+00>
// CHECK:      %pad = graph.concat %{{.*}}, %x, %{{.*}} {dim = 2 : i64} : (tensor<2x4x1xf32>, tensor<2x4x8xf32>, tensor<2x4x2xf32>) -> tensor<2x4x11xf32>

// roll by 3: the last 3 elements, then the first 5.
// CHECK:      %[[TAIL:.*]] = graph.slice %x {dim = 2 : i64, start = 5 : i64, step = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x4x3xf32>
// CHECK-NEXT: %[[HEAD:.*]] = graph.slice %x {dim = 2 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x4x5xf32>
// CHECK-NEXT: %roll = graph.concat %[[TAIL]], %[[HEAD]] {dim = 2 : i64}

// repeat: copies concatenated; repeat_interleave: a dim of 1 broadcast to 2, then merged.
// CHECK-NEXT: %repeat = graph.concat %x, %x {dim = 1 : i64}
// CHECK-NEXT: %[[SPREAD:.*]] = graph.reshape %x : tensor<2x4x8xf32> -> tensor<2x4x1x8xf32>
// CHECK-NEXT: %[[COPIES:.*]] = graph.broadcast %[[SPREAD]] : tensor<2x4x1x8xf32> -> tensor<2x4x2x8xf32>
// CHECK-NEXT: %repeat_interleave = graph.reshape %[[COPIES]] : tensor<2x4x2x8xf32> -> tensor<2x8x8xf32>

// max_pool1d(x, 2): the window's two strided slices, folded by max; avg_pool1d by add, then a
// division by the window's size.
// CHECK:      %[[EVEN:.*]] = graph.slice %x {dim = 2 : i64, start = 0 : i64, step = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: %[[ODD:.*]] = graph.slice %x {dim = 2 : i64, start = 1 : i64, step = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: %max_pool1d = graph.max %[[EVEN]], %[[ODD]]
// CHECK:      graph.constant dense<2.000000e+00>
// CHECK:      %avg_pool1d = graph.div

// Tensor.unfold: offset j of every window is a strided slice from j, the 3 stacked last.
// CHECK:      %[[W0:.*]] = graph.slice %x {dim = 2 : i64, start = 0 : i64, step = 2 : i64} : tensor<2x4x8xf32> -> tensor<2x4x3xf32>
// CHECK:      graph.slice %x {dim = 2 : i64, start = 2 : i64, step = 2 : i64}
// CHECK:      %unfold = graph.concat {{.*}} {dim = 3 : i64} : ({{.*}}) -> tensor<2x4x3x3xf32>

// batch norm in eval mode: the running statistics per channel (dim 1), rsqrt(var + eps).
// CHECK:      graph.reshape %b_norm_running_mean : tensor<4xf32> -> tensor<1x4x1xf32>
// CHECK:      graph.constant dense<1.000000e-05>
// CHECK:      %[[INV:.*]] = graph.rsqrt
// CHECK:      %batch_norm = graph.add

// any over a dim: the largest of x != 0, compared with 0.
// CHECK:      %[[MAX:.*]] = graph.reduce_max %{{.*}} {dims = array<i64: 2>}
// CHECK:      %any = graph.compare %[[MAX]], %{{.*}} {predicate = "ne"} : tensor<2x4xf32> -> tensor<2x4xi1>

// group norm: x as [N, groups, the rest]; its mean and biased variance over the rest; then
// the per-channel weight and bias on x's shape.
// CHECK:      %[[G:.*]] = graph.reshape %x : tensor<2x4x8xf32> -> tensor<2x2x16xf32>
// CHECK-NEXT: graph.reduce_mean %[[G]] {dims = array<i64: 2>, keepdim = true}
// CHECK:      %[[C:.*]] = graph.sub %[[G]],
// CHECK-NEXT: %[[SQ:.*]] = graph.mul %[[C]], %[[C]]
// CHECK-NEXT: graph.reduce_mean %[[SQ]] {dims = array<i64: 2>, keepdim = true}
// CHECK:      graph.rsqrt
// CHECK:      graph.reshape %{{.*}} : tensor<2x2x16xf32> -> tensor<2x4x8xf32>
// CHECK:      %group_norm = graph.add

// avg_pool1d(x, 3, 2, ceil_mode=True): one more block of zeros past the end for the last
// window, and each window divided by the part of it inside x: min(8 - 2·o, 3).
// CHECK:      %[[PADDED:.*]] = graph.concat %x, %{{.*}} {dim = 2 : i64} : (tensor<2x4x8xf32>, tensor<2x4x1xf32>) -> tensor<2x4x9xf32>
// CHECK:      %[[O:.*]] = graph.iota {dim = 2 : i64} : tensor<2x4x4xf32>
// CHECK:      %[[SPAN:.*]] = graph.min
// CHECK-NEXT: %avg_pool1d_1 = graph.div %{{.*}}, %[[SPAN]]

// adaptive_avg_pool1d(x, 3) of 8: the means of x[0:3], x[2:6] and x[5:8], concatenated.
// CHECK:      graph.slice %x {dim = 2 : i64, start = 0 : i64, step = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x4x3xf32>
// CHECK:      graph.slice %x {dim = 2 : i64, start = 2 : i64, step = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x4x4xf32>
// CHECK:      graph.slice %x {dim = 2 : i64, start = 5 : i64, step = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x4x3xf32>
// CHECK:      %adaptive_avg_pool1d = graph.concat

// narrow is a slice; movedim(0, -1) a transpose; linspace(0, 1, 8) torch's two-sided formula
// on an iota; torch.eye(4, 8) the rows' index compared with the columns' (index expressions,
// no buffers).
// CHECK:      %narrow = graph.slice %x {dim = 2 : i64, start = 2 : i64, step = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x4x3xf32>
// CHECK:      %movedim = graph.transpose %x {perm = array<i64: 1, 2, 0>} : tensor<2x4x8xf32> -> tensor<4x8x2xf32>
// CHECK:      %[[I:.*]] = graph.iota {dim = 0 : i64} : tensor<8xf32>
// CHECK:      %linspace = graph.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<8xi1>, tensor<8xf32>
// CHECK:      %[[ROW:.*]] = graph.iota {dim = 0 : i64} : tensor<4x8xf32>
// CHECK-NEXT: %[[COL:.*]] = graph.iota {dim = 1 : i64} : tensor<4x8xf32>
// CHECK-NEXT: %[[DIAG:.*]] = graph.compare %[[ROW]], %[[COL]] {predicate = "eq"}
// CHECK-NEXT: %eye = graph.cast %[[DIAG]] : tensor<4x8xi1> -> tensor<4x8xf32>

// The kernels print (the pads and slices are index maps of the kernels that read x).
// CUDA:      // kernel @forward_0
// CUDA:      rsqrtf(
