// RUN: tinyopt --help | filecheck %s
// --help ends with tinyopt's passes, each with the first line of its docstring.

// CHECK: usage: tinyopt
// CHECK: tinyopt passes:
// CHECK-NEXT: decompose {{ +[A-Z].+}}
// CHECK-NEXT: fuse {{ +[A-Z].+}}
// CHECK-NEXT: apply-tuned {{ +[A-Z].+}}
// CHECK-NEXT: plan {{ +[A-Z].+}}
// CHECK-NEXT: tile {{ +[A-Z].+}}
// CHECK-NEXT: to-cuda {{ +[A-Z].+}}
// CHECK-NOT: unavailable
