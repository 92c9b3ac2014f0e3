#!/bin/bash
# Appends per-kernel hashes (via the sitecustomize hook) and whole-stdout hashes of the CLI on
# every examples/*.mlir (and the llama_block captures) to $TINYOPT_HASH_LOG. Run in the worktree.
set -u
hook=$(mktemp -d)
python - "$hook" <<'PY'
import re, sys
src = open("benchmarks/cuda_hashes.py").read()
hook = re.search(r'HOOK = """(.*?)"""', src, re.S).group(1).replace("\\\\t", "\\t").replace("\\\\n", "\\n")
open(sys.argv[1] + "/sitecustomize.py", "w").write(hook)
PY
export PYTHONPATH="$hook:$PYTHONPATH" TINYOPT_TUNING_DB=off TINYOPT_BUILD_CACHE=off
unset PYTEST_CURRENT_TEST
one() {  # label, then the command producing CUDA on stdout
  local label=$1; shift
  local out; out=$("$@" 2>/tmp/h21/err.$$); local rc=$?
  printf '%s\t<stdout rc=%s>\t%s\n' "$label" "$rc" "$(printf '%s' "$out" | sha256sum | cut -c1-16)" >> "$TINYOPT_HASH_LOG"
}
for f in examples/*.mlir; do
  for p in fuse,tile,to-cuda decompose,fuse,tile,to-cuda; do
    one "$f -p $p" tinyopt "$f" -p "$p"
  done
done
one "examples/attention.mlir -p decompose,fuse,flash-attention,tile,to-cuda" tinyopt examples/attention.mlir -p decompose,fuse,flash-attention,tile,to-cuda
for m in block block_bf16; do
  tinyopt capture examples/llama_block.py:$m > /tmp/h21/llama_$m.mlir 2>/tmp/h21/err.$$
  printf 'capture examples/llama_block.py:%s\t<capture rc=%s>\t%s\n' $m $? "$(sha256sum < /tmp/h21/llama_$m.mlir | cut -c1-16)" >> "$TINYOPT_HASH_LOG"
  one "capture llama_block.py:$m | -p decompose,fuse,tile,to-cuda" tinyopt /tmp/h21/llama_$m.mlir -p decompose,fuse,tile,to-cuda
done
rm -rf "$hook" /tmp/h21/llama_block*.mlir /tmp/h21/err.$$
