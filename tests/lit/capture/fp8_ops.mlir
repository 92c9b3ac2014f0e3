// RUN: tinyopt capture %S/fp8_ops.py:model > %t.mlir
// RUN: filecheck %s < %t.mlir
// RUN: tinyopt %t.mlir -p 'fuse{debug=true}' 2>&1 | filecheck %s --check-prefix=FUSE

// How torch._scaled_mm and a cast to e4m3fn are captured (tests/lit/capture/fp8_ops.py;
// frontends/torch_fx.py).

// Per-tensor scales: the FP8 operands widened to f32 (exact), their product times each scale,
// rounded once to the output type.
// CHECK:      %[[A:.*]] = graph.cast %a : tensor<8x256xf8E4M3FN> -> tensor<8x256xf32>
// CHECK-NEXT: %[[B:.*]] = graph.cast %t : tensor<256x16xf8E4M3FN> -> tensor<256x16xf32>
// CHECK-NEXT: %[[P:.*]] = graph.matmul %[[A]], %[[B]]
// CHECK:      graph.mul %[[P]],
// CHECK:      %_scaled_mm = graph.cast %{{.*}} : tensor<8x16xf32> -> tensor<8x16xbf16>

// Block scales (A's [M, K/128] per 1x128, B's [K/128, N/128] per 128x128): each repeated over
// its block and multiplied into its operand before the product.
// CHECK:      graph.reshape %blocks_a : tensor<8x2xf32> -> tensor<8x1x2x1xf32>
// CHECK-NEXT: graph.broadcast %{{.*}} : tensor<8x1x2x1xf32> -> tensor<8x1x2x128xf32>
// CHECK-NEXT: %[[SA:.*]] = graph.reshape %{{.*}} : tensor<8x1x2x128xf32> -> tensor<8x256xf32>
// CHECK-NEXT: %[[DA:.*]] = graph.mul %{{.*}}, %[[SA]] : tensor<8x256xf32>
// CHECK:      graph.broadcast %{{.*}} : tensor<2x1x1x1xf32> -> tensor<2x128x1x128xf32>
// CHECK:      %[[SB:.*]] = graph.slice %{{.*}} {dim = 1 : i64, start = 0 : i64, step = 1 : i64} : tensor<256x128xf32> -> tensor<256x16xf32>
// CHECK-NEXT: %[[DB:.*]] = graph.mul %{{.*}}, %[[SB]] : tensor<256x16xf32>
// CHECK-NEXT: graph.matmul %[[DA]], %[[DB]]

// A cast to e4m3fn (saturating to ±448, as the hardware's cvt.satfinite).
// CHECK:      graph.cast %mul : tensor<8x16xf32> -> tensor<8x16xf8E4M3FN>

// Both GEMMs keep their scales inside (no operand gets a buffer).
// FUSE-NOT: gets a buffer
// FUSE:     fusing %{{[0-9]+}} (graph.matmul)
