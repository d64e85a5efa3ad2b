"""Torch's FlashAttention-2 varlen kernel (`torch.nn.attention.varlen.varlen_attn`) against FlexAttention on each
track's attention shape, forward + backward, over real proxy documents (run on a GPU).

python perf/varlen_bench.py [short|medium ...]  ->  per (track, window in blocks) the milliseconds of:
  flex blocks   the script's own mask (key block within the last `window` blocks of the query's block),
  flex tokens   FlexAttention with a token window (key within the last window x 128 tokens), the rule varlen has,
  varlen        varlen_attn, one sequence per document, window (window x 128 - 1, 0), the longest document as max,
  varlen bound  the same with max = all tokens (a bound that needs no host sync and no recompile per step),
then varlen's largest difference from "flex tokens" (the same rule, so only rounding should differ).
A window rule change is a method change: this bench only says whether the kernel is worth one.
"""
import sys
from pathlib import Path

import torch
from torch.nn.attention.flex_attention import create_block_mask
from torch.nn.attention.varlen import varlen_attn
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import printed_help  # noqa: E402
from flex_bench import SCALE, SHAPES, proxy_tokens, setup_error, time_attention  # noqa: E402


def document_starts(docs: torch.Tensor) -> torch.Tensor:
    """Cumulative sequence positions (int32, first 0, last the token count) of the runs of equal ids in `docs`."""
    change = torch.nonzero(docs[1:] != docs[:-1]).flatten() + 1
    edges = [torch.zeros(1, dtype=change.dtype, device=docs.device), change,
             torch.full((1,), docs.numel(), dtype=change.dtype, device=docs.device)]
    return torch.cat(edges).to(torch.int32)


def token_window_mask(docs: torch.Tensor, window_tokens: int):
    def rule(b, h, q_idx, kv_idx):
        return (docs[q_idx] == docs[kv_idx]) & (q_idx >= kv_idx) & (q_idx - kv_idx < window_tokens)
    # compiled: evaluated block by block; eagerly the rule would be materialised for all 48K x 48K (64K x 64K) pairs
    return create_block_mask(rule, None, None, docs.numel(), docs.numel(), device=docs.device, _compile=True)


def forward_backward_ms(attend, inputs, grad) -> tuple[float, torch.Tensor]:
    out = attend(*inputs)
    ms = do_bench(lambda: torch.autograd.grad(attend(*inputs), inputs, grad), warmup=5, rep=50)
    return ms, out


def run(tracks: list[str]):
    torch.manual_seed(0)
    for track, script, tokens, heads in (SHAPES[name] for name in tracks or SHAPES):
        docs = (proxy_tokens(tokens) == script.EOT_TOKEN).cumsum(0)
        starts = document_starts(docs)
        longest = int((starts[1:] - starts[:-1]).max())
        q, k, v = (torch.randn(tokens, heads, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                   for _ in range(3))
        grad = torch.randn_like(q)
        as_flex = [x.detach().transpose(0, 1)[None].requires_grad_() for x in (q, k, v)]
        print(f"{track}: {tokens} tokens, {starts.numel() - 1} documents, longest {longest}")
        for window in (3, 7, 14):  # in blocks: the end of training's short and long windows, and an early one
            times = {}
            blocks = script.block_masks(docs, [torch.tensor(window, device="cuda")], windowed_mask_mod=False)[0]
            masks = {"flex blocks": blocks, "flex tokens": token_window_mask(docs, window * 128)}
            outputs = {}
            for name, mask in masks.items():
                times[name], out, _, _ = time_attention(*as_flex, mask, {})  # flex_bench's default option set
                outputs[name] = out[0].transpose(0, 1)
            for name, bound in (("varlen", longest), ("varlen bound", tokens)):
                def attend(q, k, v, bound=bound):
                    return varlen_attn(q, k, v, starts, starts, bound, bound, scale=SCALE,
                                       window_size=(window * 128 - 1, 0))
                times[name], outputs[name] = forward_backward_ms(attend, (q, k, v), grad)
            difference = (outputs["varlen"].float() - outputs["flex tokens"].float()).abs().max().item()
            print(f"{track} window {window}: " + ", ".join(f"{name} {ms:.3f} ms" for name, ms in times.items())
                  + f"; varlen - flex tokens: {difference:.2e} at most")


def main(argv: list[str]) -> int:
    if printed_help(argv, __doc__):
        return 0
    if (answer := setup_error(argv, "perf/varlen_bench.py")) is not None:
        return answer
    run(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
