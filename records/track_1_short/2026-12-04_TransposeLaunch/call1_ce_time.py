"""Session 46: softcap_ce_kernel of main and of this tree at the proxy's 49152 x 50304 bf16 logits, in turn."""
import math
import sys
from pathlib import Path

import torch
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from track_scripts import load_script  # noqa: E402

scripts = {"main": load_script("perf/base/main.py"), "branch": load_script("train_gpt.py")}
logits = torch.randn(49152, 50304, device="cuda", dtype=torch.bfloat16) * 3
targets = torch.randint(0, 50304, (49152,), device="cuda", dtype=torch.int32)
loss = torch.empty(49152, device="cuda")
grads = {name: torch.empty_like(logits, dtype=torch.float8_e5m2) for name in scripts}
for rnd in range(3):
    for name, tg in scripts.items():
        ms = do_bench(lambda: tg.softcap_ce_kernel[(49152,)](
            logits, targets, loss, grads[name], 50304, 448.0, -math.log2(1 / 448), 57344.0, BLOCK=tg.CE_BLOCK,
            ON_GPU=True, num_warps=8))
        print(f"round {rnd} {name}: softcap_ce_kernel {ms:.3f} ms")
same = (grads["main"].view(torch.uint8) == grads["branch"].view(torch.uint8)).float().mean().item()
print(f"float8 gradient bytes equal between the two: {same:.6f}")
