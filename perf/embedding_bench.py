"""Track 1's four bf16 embedding tables (the token embedding and three value embeddings, 50,304 x 768) at a proxy
micro-step's 49,152 token ids (read from the proxy's first training shard, so that frequent tokens repeat as in
training), forward and backward: compiled, as the model runs them (inductor's backward: an fp32 table zeroed, an
atomic add per token and entry, a cast to bf16), against eager (ATen's CUDA backward: the ids sorted, each token's rows
summed once in fp32). Asked in session 46: each table's backward writes and reads ~0.4 GB a micro-step, ~1% of the
step by that count, and the profiles list only the longest kernels. Session 47's answer: compiled 0.865 ms, eager
1.964 ms (records/track_1_short/2026-12-04_EmbeddingBackwardDropped; branch perf/embedding-touched-rows adds a third
way, an op of the script's own kernels: 0.986 ms).

python perf/embedding_bench.py [--tiny]  ->  one line a way: ms for the four tables' forward + backward, and its weight
gradients' largest error from the fp32 sums, relative to the largest entry (one bf16 rounding of the sums: 2^-8 at
most). --tiny: small shapes and random ids on the CPU, timed by the clock (the test runs this). --help prints this.
"""
import glob
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import timed_us, tiny_bench_refusal  # noqa: E402
from track_scripts import ROOT, load_script  # noqa: E402

PROXY_SHARDS = str(ROOT / "data" / "proxy" / "proxy_train_*.bin")


def token_ids(tokens: int, vocab: int, tiny: bool, device: str) -> torch.Tensor:
    """A micro-step's ids: the proxy shard's first tokens, or (--tiny, or no shard) ids drawn with a long tail."""
    shards = sorted(glob.glob(PROXY_SHARDS))
    if shards and not tiny:
        return load_script(ROOT / "train_gpt.py").read_shard(shards[0], tokens).to(device, torch.int32)
    ranks = torch.arange(1, vocab + 1, dtype=torch.float64)
    return torch.multinomial(1 / ranks, tokens, replacement=True, generator=torch.Generator().manual_seed(0)).to(
        device, torch.int32)


def four_tables(ids: torch.Tensor, tables: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack([F.embedding(ids, table) for table in tables])


def forward_backward(run, ids, tables, grad_out):
    return lambda: torch.autograd.grad(run(ids, tables), tables, grad_out)


def main(argv: list[str]) -> int:
    if (answer := tiny_bench_refusal(argv, __doc__, "perf/embedding_bench.py")) is not None:
        return answer
    tiny = "--tiny" in argv
    device = "cpu" if tiny else "cuda"
    tokens, vocab, dim = (512, 1000, 64) if tiny else (49152, 50304, 768)
    gen = torch.Generator(device).manual_seed(1)
    ids = token_ids(tokens, vocab, tiny, device)
    tables = [(torch.randn(vocab, dim, device=device, generator=gen) * 0.1).bfloat16().requires_grad_()
              for _ in range(4)]
    grad_out = torch.randn(4, tokens, dim, device=device, generator=gen).bfloat16()
    print(f"{tokens} ids, {ids.unique().numel()} distinct, the most frequent {ids.bincount().max().item()} times")
    exact = [torch.zeros(vocab, dim, device=device).index_add_(0, ids, g.float()) for g in grad_out]
    for name, run in [("eager (ATen's sorted backward)", forward_backward(four_tables, ids, tables, grad_out)),
                      ("compiled (inductor's atomic backward)", forward_backward(torch.compile(four_tables), ids,
                                                                                 tables, grad_out))]:
        error = max(((ours.float() - theirs).abs().max() / theirs.abs().max()).item()
                    for ours, theirs in zip(run(), exact))
        print(f"{name}: {timed_us(run, tiny) / 1000:.3f} ms for 4 tables, largest gradient error {error:.1e} of the "
              "largest entry")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
