import subprocess, sys, os
from collections import Counter
os.chdir("/work/main/benchmarks/cuda_hashes_issue21")
commits = ["9298ec6","9531423","b3e608c","0a5a29b","2347ec1","d04b8c0","d82a39b","38fdea0","0021c9a","7f1de49","3c040a1"]
parents = {"3c040a1": "7f1de49.tsv"}
for c in commits:
    a = parents.get(c, f"{c}_parent.tsv"); b = f"{c}.tsv"
    if not (os.path.exists(a) and os.path.exists(b)): print(c, "missing"); continue
    r = subprocess.run([sys.executable, "/work/main/benchmarks/cuda_hashes.py", "--compare", a, b], capture_output=True, text=True).stdout.strip()
    lines = lambda f: sum(1 for l in open(f))
    so = lambda f: sorted(l for l in open(f) if "<stdout" in l or "<capture" in l)
    print(f"{c} vs {a}: lines {lines(a)}/{lines(b)}; stdout/capture lines identical: {so(a)==so(b)} ({len(so(b))}); {r}")
