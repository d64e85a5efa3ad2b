"""FlexAttention forward + backward time of each track's attention shape under several kernel_options, with the
track's own document-causal sliding-window block masks over real proxy documents (run on a GPU).

python perf/flex_bench.py [short|medium ...] [--options=default,flash]  ->  one line per (track, window, options) with
milliseconds, then the fastest per row (both tracks and all option sets when none is named; each option set compiles,
~10-20 s). "flash" is torch's FlashAttention-4 backend (CuTe-DSL kernels; needs the flash-attn-4 package). The first
forward's and backward's seconds include their compiles: with empty caches (TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR
set to new folders) they are the cold compile times of the attention kernels, a candidate for the cold start's critical
path.
Each option set must give the same output as the default (checked) before its time counts.
"""
import glob
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch.nn.attention.flex_attention import flex_attention
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import train_gpt as short  # noqa: E402
import train_gpt_medium as medium  # noqa: E402

OPTIONS = {  # kernel_options of torch's FlexAttention templates; {} is the default choice
    "default": {},
    "rows safe": {"ROWS_GUARANTEED_SAFE": True},  # every query sees at least itself
    "fwd 128x128": {"BLOCK_M": 128, "BLOCK_N": 128},
    "fwd 64x64": {"BLOCK_M": 64, "BLOCK_N": 64},
    "bwd 64x128/128x64": {"BLOCK_M1": 64, "BLOCK_N1": 128, "BLOCK_M2": 128, "BLOCK_N2": 64},
    "bwd 32x128/128x32": {"BLOCK_M1": 32, "BLOCK_N1": 128, "BLOCK_M2": 128, "BLOCK_N2": 32},
    "warps 4 stages 3": {"num_warps": 4, "num_stages": 3},
    "tma": {"USE_TMA": True},  # Hopper's tensor memory accelerator for the loads (torch's default only on XPU)
    "tma bwd 64x128/128x64": {"USE_TMA": True, "BLOCK_M1": 64, "BLOCK_N1": 128, "BLOCK_M2": 128, "BLOCK_N2": 64},
    "flash": {"BACKEND": "FLASH"},
}
SCALE = 0.12  # the scripts' attention scale (with QK-norm)
SHAPES = {"short": ("track 1", short, 48 * 1024, 6), "medium": ("track 2", medium, 64 * 1024, 8)}  # tokens, heads


def proxy_tokens(count: int) -> torch.Tensor:
    path = sorted(glob.glob("data/proxy/proxy_val_*.bin"))[0]
    return torch.from_numpy(np.fromfile(path, dtype=np.uint16, offset=1024)[:count].astype(np.int64)).cuda()


def time_attention(q, k, v, mask, options) -> tuple[float, torch.Tensor, float, float]:
    """Milliseconds of forward + backward, the output, and the seconds of the first forward and the first backward
    (their compiles included: cold when the inductor and Triton caches are empty)."""
    attend = torch.compile(lambda q, k, v: flex_attention(q, k, v, block_mask=mask, scale=SCALE,
                                                          kernel_options=options), dynamic=False)
    start = time.perf_counter()
    out = attend(q, k, v)
    torch.cuda.synchronize()
    forward_s, start = time.perf_counter() - start, time.perf_counter()
    grad = torch.randn_like(out)
    torch.autograd.grad(out, (q, k, v), grad)
    torch.cuda.synchronize()
    backward_s = time.perf_counter() - start
    ms = do_bench(lambda: torch.autograd.grad(attend(q, k, v), (q, k, v), grad), warmup=5, rep=50)
    return ms, out, forward_s, backward_s


def main(tracks: list[str], option_names: list[str]):
    torch.manual_seed(0)
    for track, script, tokens, heads in (SHAPES[name] for name in tracks or SHAPES):
        docs = (proxy_tokens(tokens) == script.EOT_TOKEN).cumsum(0)
        q, k, v = (torch.randn(1, heads, tokens, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        for window in (3, 7, 14):  # in blocks: the end of training's short and long windows, and an early one
            mask = script.block_masks(docs, [torch.tensor(window, device="cuda")], windowed_mask_mod=False)[0]
            results, reference = {}, None
            for name in option_names:
                options = OPTIONS[name]
                try:
                    ms, out, forward_s, backward_s = time_attention(q, k, v, mask, options)
                except Exception as error:  # an option set the template refuses: say so and go on
                    reason = (str(error).strip().splitlines() or [""])[-1][:300]
                    print(f"{track} window {window}: {name}: not run ({type(error).__name__}: {reason})")
                    continue
                reference = out if reference is None else reference
                same = torch.allclose(out.float(), reference.float(), atol=2e-2, rtol=2e-2)
                print(f"{track} window {window}: {name}: {ms:.3f} ms{'' if same else ' (output differs: ignored)'}; "
                      f"first forward {forward_s:.1f} s, first backward {backward_s:.1f} s")
                if same:
                    results[name] = ms
            if not results:
                continue
            best = min(results, key=results.get)
            print(f"== {track} window {window}: fastest {best} {results[best]:.3f} ms vs default "
                  f"{results.get('default', float('nan')):.3f} ms")


if __name__ == "__main__":
    chosen = next((arg.split("=", 1)[1].split(",") for arg in sys.argv[1:] if arg.startswith("--options=")),
                  list(OPTIONS))
    unknown = set(chosen) - set(OPTIONS)
    if unknown:
        sys.exit(f"error: unknown option sets {sorted(unknown)}; choose from {', '.join(OPTIONS)}")
    main([arg for arg in sys.argv[1:] if not arg.startswith("--")], chosen)
