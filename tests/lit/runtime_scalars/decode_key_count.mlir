// Decode attention over the first %L keys of a 4096-key cache: fuse inlines the valid-key window
// (index arithmetic on L) into the attention kernel, which takes L by value; planning proves the
// keys past L masked and cuts the split kernel's chunks from L at run time (the op marked
// tinyopt.key_count), and the CUDA key loop stops at that count, not at the capacity.
// RUN: tinyopt %s -p decompose,fuse | filecheck %s --check-prefix=FUSE
// RUN: tinyopt %s -p decompose,fuse,flash-attention,plan | filecheck %s --check-prefix=PLAN
// RUN: tinyopt %s -p decompose,fuse,flash-attention,tile,to-cuda | filecheck %s --check-prefix=CUDA

func.func @f(%q: tensor<1x32x1x128xbf16>, %k: tensor<1x8x4096x128xbf16>, %v: tensor<1x8x4096x128xbf16>, %L: tensor<i64>) -> tensor<1x32x1x128xbf16> {
  %o = graph.attention %q, %k, %v valid(%L : tensor<i64>) {scale = 0.088 : f32, causal = true} : (tensor<1x32x1x128xbf16>, tensor<1x8x4096x128xbf16>, tensor<1x8x4096x128xbf16>) -> tensor<1x32x1x128xbf16>
  func.return %o : tensor<1x32x1x128xbf16>
}

// FUSE-NOT:  memref<8192xf32>
// FUSE:      loop.kernel @f_{{[0-9]+}}({{.*}}: i64, {{.*}})
// FUSE:        arith.addi %{{.*}}, %{{.*}} : index
// FUSE:        arith.cmpf ole

// PLAN:      loop.kernel @f_{{[0-9]+}}_decode({{.*}}) attributes {tinyopt.decode_partial = [[SPLITS:[0-9]+]] : i64
// PLAN:        %[[COUNT:.*]] = arith.minsi {{.*}} {tinyopt.key_count} : index
// PLAN:        loop.reduce
// PLAN:          arith.cmpi ult, %{{.*}}, %[[COUNT]] : index
// PLAN:      loop.kernel @f_{{[0-9]+}}_merge

// CUDA:      f_{{[0-9]+}}_decode(
// CUDA:        for (int [[J:v[0-9]+]] = 0; [[J]] < [[COUNT:v[0-9]+]]; [[J]] += 128)
