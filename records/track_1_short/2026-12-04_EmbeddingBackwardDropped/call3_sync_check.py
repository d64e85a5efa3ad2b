"""Session 47: does branch perf/embedding-touched-rows' embedding_grads (or its compiled table_lookups) synchronise
the host? torch.cuda.set_sync_debug_mode("error") raises at a synchronising call."""
import sys
import traceback

import torch

sys.path.insert(0, "perf")
from track_scripts import load_script  # noqa: E402

tg = load_script("perf/base/branch_tg.py")
tg.trace_autograd_functions_as_one_call()
ids = torch.randint(0, 50304, (49152,), device="cuda", dtype=torch.int32)
grads = [torch.randn(49152, 768, device="cuda", dtype=torch.bfloat16) for _ in range(4)]
tables = [torch.randn(50304, 768, device="cuda", dtype=torch.bfloat16).requires_grad_() for _ in range(4)]
compiled = torch.compile(lambda ids, tables: torch.stack(tg.table_lookups(ids, *tables)))
steps = {"touched[ids] = 1": lambda: torch.zeros(50304, dtype=torch.uint8, device="cuda").__setitem__(ids, 1),
         "embedding_grads_triton": lambda: tg.embedding_grads_triton(grads, ids, 50304),
         "compiled table_lookups forward + backward": lambda: torch.autograd.grad(compiled(ids, tables), tables,
                                                                                 torch.stack(grads)),
         "aten embedding_dense_backward": lambda: torch.ops.aten.embedding_dense_backward(grads[0], ids, 50304, -1,
                                                                                          False)}
for name, step in steps.items():
    step()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        step()
        print(f"{name}: no host synchronisation")
    except RuntimeError:
        print(f"{name}: SYNCHRONISES:\n" + "".join(traceback.format_exc().splitlines(True)[-6:]))
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
