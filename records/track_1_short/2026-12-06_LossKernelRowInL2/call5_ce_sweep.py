"""Session 67: the eviction-hinted loss kernel (train_gpt.py as copied in) at more launches than the bench's."""
import functools
import sys
from pathlib import Path

import torch

sys.path.insert(0, "perf")
from bench_common import timed_us  # noqa: E402
from track_scripts import ROOT, load_script  # noqa: E402

tg = load_script(ROOT / "train_gpt.py")
tg.configure_triton_builds()
rows, vocab = 49152, 50304
gen = torch.Generator("cuda").manual_seed(0)
logits = (torch.randn(rows, vocab, device="cuda", generator=gen) * 3).bfloat16()
targets = torch.randint(0, vocab, (rows,), device="cuda", generator=gen, dtype=torch.int32)
grad = torch.empty(rows, vocab, device="cuda", dtype=torch.float8_e5m2)
for launch in [(8192, 16), (16384, 16), (16384, 32), (8192, 32), (4096, 16), (2048, 16), (8192, 16)]:
    run = functools.partial(tg.softcap_ce_rows, logits, targets, 1 / 448, grad, launch)
    print(launch, f"{timed_us(run, False) / 1000:.3f} ms", flush=True)
