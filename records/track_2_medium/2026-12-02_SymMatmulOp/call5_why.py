"""Session 33: inductor's wrapper for the traced sym kernel (its triton_meta) against Triton's own eager build."""
import sys
import torch
from torch._inductor.utils import run_and_get_code
sys.path.insert(0, ".")
import train_gpt_medium as m

x = torch.randn(4, 1024, 1024, device="cuda", dtype=torch.bfloat16)
_, codes = run_and_get_code(torch.compile(lambda t: m.sym_matmul_triton(t), dynamic=False), x)
for code in codes:
    for line in code.splitlines():
        if any(key in line for key in ("triton_meta", "user_autotune", "configs=", "num_warps", "def sym_matmul", "filename")):
            print(line[:1500])
m.sym_matmul_triton(x)
for device_cache in m.sym_matmul_kernel.device_caches.values():
    for key, kernel in device_cache[0].items():
        print("eager key", str(key)[:800])
        print("eager", kernel.metadata.num_warps, kernel.metadata.num_stages, kernel.metadata.shared, kernel.n_regs)
import glob, os
from triton.runtime.cache import default_cache_dir
for path in glob.glob(os.path.join(os.environ.get("TRITON_CACHE_DIR", default_cache_dir()), "*", "sym_matmul_kernel*.json")):
    print(path, open(path).read()[:600])
