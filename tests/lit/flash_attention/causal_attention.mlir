// RUN: tinyopt %s -p decompose,fuse | filecheck %s --check-prefix=BEFORE
// RUN: tinyopt %s -p decompose,fuse,flash-attention | filecheck %s --check-prefix=AFTER

// Causal attention on [B=2, H=2, S=8, D=4] after fuse: three kernels. Scores (a dot product,
// the scale and decompose's causal mask, an index map) into a [B·H, S, S] buffer; the safe
// softmax of each row (max, sum of exp, output) into another; P·V into the [B, H, S, D]
// result, through a [B·H, S, D] collapsed view of it (fuse folds the reshape into the store).

// BEFORE:      loop.kernel @attention_0(
// BEFORE:        memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<4x8x8xf32>
// BEFORE:      loop.kernel @attention_1(
// BEFORE:        loop.reduce
// BEFORE:          arith.maximumf
// BEFORE:        loop.reduce
// BEFORE:          math.exp
// BEFORE:      loop.kernel @attention_2(
// BEFORE:        memref.store %{{.*}}, %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}] : memref<4x8x4xf32>
// BEFORE-NOT:  loop.kernel
// BEFORE:      func.func @attention(
// BEFORE-COUNT-2: loop.launch
// BEFORE:        %[[VIEW:.*]] = memref.collapse_shape %{{.*}} {{\[\[}}0 : i64, 1 : i64], [2 : i64], [3 : i64]] : memref<2x2x8x4xf32> into memref<4x8x4xf32>
// BEFORE-NEXT:   loop.launch @attention_2(%{{.*}}, %{{.*}}, %[[VIEW]])

// After flash-attention: one kernel, parallel over (b·h, i, d), holding one reduction over
// the keys j whose state is (m, l, acc), identity (-inf, 0, 0). Key j contributes
// (s_ij, 1, v_jd); s_ij keeps the dot product nested in the body, the scale, and the causal
// mask as the comparison j > i. The combine rescales l and acc to the larger maximum (floored
// at the lowest finite f32). The output acc / max(l, 1) is stored into the [B·H, S, D] view
// of the [B, H, S, D] result: both S×S buffers are gone.

// AFTER:       loop.kernel @attention_2(%[[Q:.*]]: memref<2x2x8x4xf32>, %[[K:.*]]: memref<2x2x8x4xf32>, %[[V:.*]]: memref<2x2x8x4xf32>, %[[OUT:.*]]: memref<4x8x4xf32>) {
// AFTER-NEXT:    loop.parallel (%[[P:.*]], %[[I:.*]], %[[D:.*]]) in [4, 8, 4] {
// AFTER:           %[[NINF:.*]] = arith.constant 0xff800000 : f32
// AFTER-NEXT:      %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// AFTER-NEXT:      %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// AFTER-NEXT:      %[[M:.*]], %[[L:.*]], %[[ACC:.*]] = loop.reduce (%[[J:.*]]) in [8] init(%[[NINF]], %[[ZERO]], %[[ZERO]] : f32, f32, f32) attributes {tinyopt.flash_attention} {
// AFTER:             %[[DOT:.*]] = loop.reduce (%{{.*}}) in [4] init(%[[ZERO]] : f32) attributes {tinyopt.contraction} {
// AFTER:               memref.load %[[Q]][%{{.*}}, %{{.*}}, %[[I]], %{{.*}}]
// AFTER:               memref.load %[[K]][%{{.*}}, %{{.*}}, %[[J]], %{{.*}}]
// AFTER:             %[[SCALED:.*]] = arith.mulf %[[DOT]], %{{.*}} : f32
// AFTER-NEXT:        %[[ABOVE:.*]] = arith.cmpi ugt, %[[J]], %[[I]] : index
// AFTER-NEXT:        %[[C:.*]] = arith.constant -3.40282347e+38 : f32
// AFTER-NEXT:        %[[MASK:.*]] = arith.select %[[ABOVE]], %[[C]], %[[ZERO]] : f32
// AFTER-NEXT:        %[[S:.*]] = arith.addf %[[SCALED]], %[[MASK]] : f32
// AFTER-NEXT:        %[[VJD:.*]] = memref.load %[[V]][%{{.*}}, %{{.*}}, %[[J]], %[[D]]] : memref<2x2x8x4xf32>
// AFTER-NEXT:        loop.yield %[[S]], %[[ONE]], %[[VJD]] : f32, f32, f32
// AFTER-NEXT:      } combine(%[[M1:.*]], %[[L1:.*]], %[[A1:.*]], %[[M2:.*]], %[[L2:.*]], %[[A2:.*]]) {
// AFTER-NEXT:        %[[MM:.*]] = arith.maximumf %[[M1]], %[[M2]] : f32
// AFTER-NEXT:        %[[LOWEST:.*]] = arith.constant -3.40282347e+38 : f32
// AFTER-NEXT:        %[[FLOOR:.*]] = arith.maximumf %[[MM]], %[[LOWEST]] : f32
// AFTER-NEXT:        %[[D1:.*]] = arith.subf %[[M1]], %[[FLOOR]] : f32
// AFTER-NEXT:        %[[E1:.*]] = math.exp %[[D1]] : f32
// AFTER-NEXT:        %[[D2:.*]] = arith.subf %[[M2]], %[[FLOOR]] : f32
// AFTER-NEXT:        %[[E2:.*]] = math.exp %[[D2]] : f32
// AFTER-NEXT:        %[[W1:.*]] = arith.mulf %[[L1]], %[[E1]] : f32
// AFTER-NEXT:        %[[W2:.*]] = arith.mulf %[[L2]], %[[E2]] : f32
// AFTER-NEXT:        %[[LSUM:.*]] = arith.addf %[[W1]], %[[W2]] : f32
// AFTER-NEXT:        %[[X1:.*]] = arith.mulf %[[A1]], %[[E1]] : f32
// AFTER-NEXT:        %[[X2:.*]] = arith.mulf %[[A2]], %[[E2]] : f32
// AFTER-NEXT:        %[[ASUM:.*]] = arith.addf %[[X1]], %[[X2]] : f32
// AFTER-NEXT:        loop.yield %[[MM]], %[[LSUM]], %[[ASUM]] : f32, f32, f32
// AFTER-NEXT:      }
// AFTER-NEXT:      %[[DEN:.*]] = arith.maximumf %[[L]], %[[ONE]] : f32
// AFTER-NEXT:      %[[Y:.*]] = arith.divf %[[ACC]], %[[DEN]] : f32
// AFTER-NEXT:      memref.store %[[Y]], %[[OUT]][%[[P]], %[[I]], %[[D]]] : memref<4x8x4xf32>
// AFTER-NOT:   loop.kernel
// AFTER:       func.func @attention(
// AFTER-NEXT:    %[[R:.*]] = memref.alloc() : memref<2x2x8x4xf32>
// AFTER-NEXT:    %[[RV:.*]] = memref.collapse_shape %[[R]]
// AFTER-NEXT:    loop.launch @attention_2(%{{.*}}, %{{.*}}, %{{.*}}, %[[RV]])
// AFTER-NEXT:    func.return %[[R]]

func.func @attention(%q: tensor<2x2x8x4xf32>, %k: tensor<2x2x8x4xf32>, %v: tensor<2x2x8x4xf32>) -> tensor<2x2x8x4xf32> {
  %y = graph.attention %q, %k, %v {scale = 0.5 : f32, causal = true} : (tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>, tensor<2x2x8x4xf32>) -> tensor<2x2x8x4xf32>
  func.return %y : tensor<2x2x8x4xf32>
}
