#!/bin/bash
# side.sh NAME COMMIT [pytest files...]: worktree at COMMIT, hashes into OUTDIR/NAME.tsv
set -u
name=$1 commit=$2; shift 2
out=/work/main/benchmarks/cuda_hashes_issue21/$name.tsv
wt=/tmp/h21/$name/tinyopt
[ -d "$wt" ] || git -C /work/main worktree add --detach "$wt" "$commit" >/dev/null 2>&1 || { echo "worktree failed"; exit 1; }
cd "$wt"
[ -f benchmarks/cuda_hashes.py ] || cp /work/main/benchmarks/cuda_hashes.py benchmarks/
. /work/main/.venv/bin/activate
export PYTHONPATH=/tmp/h21/$name
got=$(python -c "import tinyopt; print(tinyopt.__file__)")
got2=$(tinyopt --help >/dev/null 2>&1; python -c "import tinyopt.cli as c; print(c.__file__)")
echo "$name $commit import: $got $got2"
case "$got" in "$wt/"*) ;; *) echo "WRONG IMPORT"; exit 1;; esac
start=$(date +%s); [ $# -gt 0 ] || rm -f "$out"
[ $# -gt 0 ] && nice -n 19 python benchmarks/cuda_hashes.py "$out" -p no:cacheprovider -o addopts="" -n 2 -q -W ignore "$@" > /tmp/h21/$name.pytest.log 2>&1
echo "pytest rc=$? $(tail -1 /tmp/h21/$name.pytest.log) $(( $(date +%s)-start ))s"
start=$(date +%s); [ $# -gt 0 ] || rm -f "$out"
TINYOPT_HASH_LOG=$out nice -n 19 /tmp/h21/examples_hash.sh
echo "examples $(( $(date +%s)-start ))s; lines $(wc -l < $out)"
