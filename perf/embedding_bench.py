"""Track 1's four bf16 embedding tables (the token embedding and three value embeddings, 50,304 x 768) at a proxy
micro-step's 49,152 token ids (read from the proxy's first training shard, so that frequent tokens repeat as in
training; without one, a note, and ids drawn with a long tail), forward and backward, three ways: eager (ATen's CUDA
backward: the ids sorted, each token's rows summed once in fp32); compiled (inductor's backward: an fp32 table zeroed,
an atomic add per token and entry, a cast to bf16: the model's way until session 68); and the script's add_rows_kernel
by launch (ADD_ROWS_LAUNCHES, the script's ADD_ROWS_LAUNCH first), which adds the rows' gradients into fp32 sums that a
step's micro-steps share (SummedLookup), in id order: each id's rows summed in registers, then added once (the ids
sorted once for the four tables, the sort timed with it; the kernel without the sort took 144 us a call in training on
an H100, session 68). Then the step's hand-over of those sums to the tables (GPT.take_table_grads: a bf16 cast and a
zeroing of 4 x 154.5 MB), which the model pays once a step.
Sessions 46-47 asked it first: compiled 0.865 ms, eager 1.964 ms (records/track_1_short/
2026-12-04_EmbeddingBackwardDropped).

python perf/embedding_bench.py [--tiny]  ->  one line a way: ms for the four tables' forward + backward, and its weight
gradients' largest error from the fp32 sums, relative to the largest entry (one bf16 rounding of the sums: 2^-8 at
most; add_rows_kernel's fp32 sums: only the atomic adds' order); then the hand-over's ms. --tiny: small shapes and
random ids on the CPU, timed by the clock, the kernels under Triton's interpreter (the test runs this). --help prints
this.
"""
import glob
import sys
import types
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import timed_us, tiny_bench_refusal  # noqa: E402
from track_scripts import ROOT, load_script  # noqa: E402

PROXY_SHARDS = str(ROOT / "data" / "proxy" / "proxy_train_*.bin")
ADD_ROWS_LAUNCHES = [(32, 256, 4), (64, 256, 8), (128, 128, 8), (64, 128, 4), (16, 256, 4), (128, 256, 8)]
# BLOCK_TOKENS, BLOCK_COLS, num_warps
TINY_ADD_ROWS_LAUNCHES = [(64, 64, 4)]  # the interpreter's scan takes ~2 s a call


def token_ids(tokens: int, vocab: int, tiny: bool, device: str) -> torch.Tensor:
    """A micro-step's ids: the proxy shard's first tokens, or (--tiny, or no shard) ids drawn with a long tail."""
    shards = sorted(glob.glob(PROXY_SHARDS))
    if shards and not tiny:
        return load_script(ROOT / "train_gpt.py").read_shard(shards[0], tokens).to(device, torch.int32)
    if not tiny:
        print(f"note: no proxy shard matches {PROXY_SHARDS}: ids drawn with a long tail instead of training's "
              "(bash -c 'source perf/proxy_common.sh; unpack_proxy_data' unpacks them)", file=sys.stderr)
    ranks = torch.arange(1, vocab + 1, dtype=torch.float64)
    return torch.multinomial(1 / ranks, tokens, replacement=True, generator=torch.Generator().manual_seed(0)).to(
        device, torch.int32)


def four_tables(ids: torch.Tensor, tables: list[torch.Tensor]) -> torch.Tensor:
    return torch.stack([F.embedding(ids, table) for table in tables])


def forward_backward(run, ids, tables, grad_out):
    return lambda: torch.autograd.grad(run(ids, tables), tables, grad_out)


def largest_error(grads, exact) -> float:
    """The largest difference of a table's gradient from its fp32 sums, relative to their largest entry."""
    return max(((ours.float() - theirs).abs().max() / theirs.abs().max()).item() for ours, theirs in zip(grads, exact))


def summed_rows(tg, ids, tables, grad_out, launch):
    """The script's way: the four lookups, the ids sorted once, and each table's rows' gradients added in id order
    into fp32 sums by add_rows_kernel."""
    sums = torch.zeros(len(tables), *tables[0].shape, device=ids.device)

    def run():
        with torch.no_grad():
            four_tables(ids, tables)
        sorted_ids, order = ids.sort()
        for table_sums, grad in zip(sums, grad_out):
            tg.add_rows_triton(table_sums, sorted_ids, order, grad, launch)
        return sums
    return run


def hand_over_ms(tg, tables, tiny: bool) -> float:
    """GPT.take_table_grads on the four tables' sums: their bf16 .grad, and the sums zeroed."""
    holder = types.SimpleNamespace(embedding_tables=lambda: [types.SimpleNamespace(weight=t) for t in tables],
                                   table_grad_sums=torch.ones(len(tables), *tables[0].shape, device=tables[0].device))
    return timed_us(lambda: tg.GPT.take_table_grads(holder), tiny) / 1000


def main(argv: list[str]) -> int:
    if (answer := tiny_bench_refusal(argv, __doc__, "perf/embedding_bench.py")) is not None:
        return answer
    tiny = "--tiny" in argv
    device = "cpu" if tiny else "cuda"
    tokens, vocab, dim = (512, 1000, 64) if tiny else (49152, 50304, 768)
    tg = load_script(ROOT / "train_gpt.py")
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
        error = largest_error(run(), exact)
        print(f"{name}: {timed_us(run, tiny) / 1000:.3f} ms for 4 tables, largest gradient error {error:.1e} of the "
              "largest entry")
    for launch in TINY_ADD_ROWS_LAUNCHES if tiny else ADD_ROWS_LAUNCHES:
        error = largest_error(summed_rows(tg, ids, tables, grad_out, launch)(), exact)  # once, from zeroed sums
        ms = timed_us(summed_rows(tg, ids, tables, grad_out, launch), tiny) / 1000
        mark = " (the script's)" if launch == tg.ADD_ROWS_LAUNCH else ""
        print(f"add_rows_kernel BLOCK_TOKENS={launch[0]} BLOCK_COLS={launch[1]} warps={launch[2]}{mark} (with the "
              f"ids' sort): {ms:.3f} ms for 4 tables, largest gradient error {error:.1e} of the largest entry")
    print(f"hand-over (GPT.take_table_grads) of 4 tables' sums: {hand_over_ms(tg, tables, tiny):.3f} ms a step")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
