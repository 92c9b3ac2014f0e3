"""Loop-level rewrites: online softmax, Welford, flash attention, the associativity checker."""
