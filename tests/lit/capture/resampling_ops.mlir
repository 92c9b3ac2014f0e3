// RUN: tinyopt capture %S/resampling_ops.py:model > %t.mlir
// RUN: filecheck %s < %t.mlir

// How flips, edge paddings, pixel shuffles, interpolations and cumulative sums are captured
// (tests/lit/capture/resampling_ops.py; frontends/torch_fx.py, "padding and copies",
// "resampling", "reductions"). Row numbers are index expressions (graph.iota), never buffers.

// flip: a gather of x's rows (the dim moved to the front) by n - 1 - i.
// CHECK:      %[[I:.*]] = graph.iota {dim = 0 : i64} : tensor<8xf32>
// CHECK-NEXT: %[[REV:.*]] = graph.sub %{{.*}}, %[[I]] : tensor<8xf32>
// CHECK-NEXT: %[[IDS:.*]] = graph.cast %[[REV]] : tensor<8xf32> -> tensor<8xi64>
// CHECK-NEXT: %[[T:.*]] = graph.transpose %x {perm = array<i64: 2, 0, 1>}
// CHECK-NEXT: %[[G:.*]] = graph.gather %[[T]], %[[IDS]]
// CHECK-NEXT: %flip = graph.transpose %[[G]] {perm = array<i64: 1, 2, 0>}

// reflect (2, 1): rows 1..2 reversed before x, row 6 after it; replicate (0, 3): the last row
// broadcast to 3.
// CHECK:      graph.slice %x {dim = 2 : i64, start = 1 : i64, step = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x4x2xf32>
// CHECK:      %[[AFTER:.*]] = graph.slice %x {dim = 2 : i64, start = 6 : i64, step = 1 : i64} : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
// CHECK-NEXT: %pad = graph.concat %{{.*}}, %x, %[[AFTER]] {dim = 2 : i64}
// CHECK-NEXT: %[[EDGE:.*]] = graph.slice %x {dim = 2 : i64, start = 7 : i64, step = 1 : i64}
// CHECK-NEXT: %[[COPIES:.*]] = graph.broadcast %[[EDGE]] : tensor<2x4x1xf32> -> tensor<2x4x3xf32>
// CHECK-NEXT: %pad_1 = graph.concat %x, %[[COPIES]] {dim = 2 : i64}

// pixel_shuffle by 2: [N, C r r, H, W] split, transposed to [N, C, H, r, W, r], merged.
// CHECK:      graph.reshape %reshape : tensor<1x8x2x4xf32> -> tensor<1x2x2x2x2x4xf32>
// CHECK-NEXT: graph.transpose %{{.*}} {perm = array<i64: 0, 1, 4, 2, 5, 3>}
// CHECK-NEXT: %pixel_shuffle = graph.reshape %{{.*}} -> tensor<1x2x4x8xf32>

// nearest, 8 to 12: row min(floor(i * 8/12), 7), the scale rounded to f32 as torch does.
// CHECK:      graph.constant dense<0.666666687>
// CHECK:      %[[FLOOR:.*]] = graph.floor %{{.*}} : tensor<12xf32>
// CHECK:      graph.min %[[FLOOR]],
// CHECK:      %upsample_nearest1d = graph.transpose

// linear, 8 to 16: p = max((i + 0.5) * 0.5 - 0.5, 0); rows floor(p) and the next one,
// weighted 1 - w and w, w = p - floor(p).
// CHECK:      %[[P:.*]] = graph.max %{{.*}} : tensor<16xf32>
// CHECK-NEXT: %[[LOW:.*]] = graph.floor %[[P]] : tensor<16xf32>
// CHECK:      %[[W:.*]] = graph.sub %[[P]], %[[LOW]] : tensor<16xf32>
// CHECK:      %upsample_linear1d = graph.add

// cumsum: x broadcast along a new dim of i, terms with j <= i kept (two index expressions
// compared), summed over j.
// CHECK:      graph.broadcast %{{.*}} : tensor<2x4x1x8xf32> -> tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[ROW:.*]] = graph.iota {dim = 2 : i64} : tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[COL:.*]] = graph.iota {dim = 3 : i64} : tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[KEEP:.*]] = graph.compare %[[COL]], %[[ROW]] {predicate = "le"}
// CHECK:      graph.select %[[KEEP]],
// CHECK-NEXT: %cumsum = graph.reduce_sum %{{.*}} {dims = array<i64: 3>} : tensor<2x4x8x8xf32> -> tensor<2x4x8xf32>
