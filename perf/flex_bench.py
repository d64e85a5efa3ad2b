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
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import no_gpu_error, option_list, printed_help, unknown_track_error  # noqa: E402

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


PROXY_VAL = "data/proxy/proxy_val_*.bin"  # the first shard's first tokens are the benches' documents


def proxy_tokens(count: int) -> torch.Tensor:
    path = sorted(glob.glob(PROXY_VAL))[0]
    return torch.from_numpy(np.fromfile(path, dtype=np.uint16, offset=1024)[:count].astype(np.int64)).cuda()


def proxy_data_error(tokens: int) -> int | None:
    """2 after one line when the first proxy validation shard is missing, not a valid shard or shorter than the
    tokens a bench takes; None when it holds them."""
    paths = sorted(glob.glob(PROXY_VAL))
    try:
        held = short.read_shard_header(paths[0]) if paths else 0
    except short.DataError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if held >= tokens:
        return None
    where = f"{paths[0]} holds {held}" if paths else f"no file matches {PROXY_VAL}"
    print(f"error: the bench takes the first {tokens} tokens of a proxy validation shard, but {where}; copy the "
          "proxy shards into data/proxy/ (on the device, perf/proxy_common.sh's unpack_proxy_data does)",
          file=sys.stderr)
    return 2


def setup_error(tracks: list[str], tool: str) -> int | None:
    """flex_bench's and varlen_bench's checks before any work: track names, a GPU, the proxy documents."""
    if (answer := unknown_track_error(tracks, SHAPES)) is not None:
        return answer
    if (answer := no_gpu_error(tool)) is not None:
        return answer
    return proxy_data_error(max(SHAPES[name][2] for name in tracks or SHAPES))


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


def run(tracks: list[str], option_names: list[str]):
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


def main(argv: list[str]) -> int:
    if printed_help(argv, __doc__):
        return 0
    chosen = option_list(argv, "options") or list(OPTIONS)
    if unknown := [name for name in chosen if name not in OPTIONS]:
        print(f"error: unknown option set {unknown[0]!r} in --options; choose from {', '.join(OPTIONS)}",
              file=sys.stderr)
        return 2
    tracks = [arg for arg in argv if not arg.startswith("--options=")]
    if (answer := setup_error(tracks, "perf/flex_bench.py")) is not None:
        return answer
    run(tracks, chosen)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
