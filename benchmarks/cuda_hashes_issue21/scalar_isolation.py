"""At 9298ec6: a torch program's Python-number scalars captured as a one-element constant
broadcast (the frontend change that landed in 54838b0) against the full-shape splat the frontend
wrote before, both lowered by this commit's passes: is the CUDA byte-identical?"""
import hashlib, sys
import torch
import torch.nn.functional as F
from tinyopt.frontends import torch_fx
from tinyopt.dialects import graph
from tinyopt.compiler import lower

class MLP(torch.nn.Module):
    def __init__(s, d=64, h=256):
        super().__init__(); s.a = torch.nn.Linear(d, h); s.b = torch.nn.Linear(h, d)
    def forward(s, x):
        return s.b(F.gelu(s.a(x), approximate="tanh"))
class Scalars(torch.nn.Module):
    def forward(s, x, y):
        return (x * 0.5 + 1.0).add(y, alpha=2.0) - 3.0 * torch.tanh(1.0 - x) / 7.0
cases = []
for dt in (torch.float32, torch.bfloat16):
    torch.manual_seed(0)
    cases.append((f"mlp_gelu_tanh_{dt}", MLP().to(dt), (torch.randn(2, 16, 64, dtype=dt),)))
    cases.append((f"scalars_{dt}", Scalars(), (torch.randn(8, 96, dtype=dt), torch.randn(8, 96, dtype=dt))))
new = torch_fx._Translator.scalar
def old(self, value, like):  # the frontend before 54838b0: a splat of the activation's shape
    return self.emit(graph.ConstantOp.splat(value, like))
bad = 0
for name, mod, inputs in cases:
    outs = []
    for impl in (old, new):
        torch_fx._Translator.scalar = impl
        text = str(torch_fx.capture(mod, *inputs).module)
        for p in ("decompose,fuse,tile,to-cuda", "fuse,tile,to-cuda"):
            _, m = lower(text, p)
            outs.append(hashlib.sha256(str(m).encode()).hexdigest()[:16])
    same = outs[:2] == outs[2:]
    bad += not same
    print(name, "old splat", outs[:2], "one-element", outs[2:], "identical" if same else "DIFFERENT")
sys.exit(bad)
