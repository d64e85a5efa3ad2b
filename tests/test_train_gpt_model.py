"""train_gpt.py, section "Model": attention masks, FlexAttention vs the dense CPU path, a tiny forward pass,
parameter layout and initialisation."""

import math
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
import train_gpt  # noqa: E402
import train_gpt_medium  # noqa: E402
from train_gpt import BLOCK_SIZE, EOT_TOKEN, GPT, Hyperparameters  # noqa: E402

TINY = dict(model_dim=64, num_heads=2, head_dim=32, train_seq_len=256, val_seq_len=256, device="cpu")


def random_tokens(seed, length, doc_lengths, start_with_eot=True):
    """Tokens whose documents (each opened by EOT) have lengths drawn from doc_lengths."""
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 1000, (length,), generator=gen)
    position = 0 if start_with_eot else int(torch.randint(1, 300, (), generator=gen))
    while position < length:
        tokens[position] = EOT_TOKEN
        position += doc_lengths[int(torch.randint(len(doc_lengths), (), generator=gen))]
    return tokens


def brute_force_mask(tokens, window_blocks):
    """(q, k) allowed: same document, k <= q, and k's 128-block within the last window_blocks blocks of q's;
    every pair judged on its own."""
    docs = (tokens == EOT_TOKEN).cumsum(0)
    q = torch.arange(tokens.numel())[:, None]
    k = torch.arange(tokens.numel())[None, :]
    return (docs[q] == docs[k]) & (k <= q) & (q // BLOCK_SIZE - k // BLOCK_SIZE < window_blocks)


def per_block(allowed, reduce):
    """Reduce each 128x128 block of a token-level mask to one value."""
    blocks = allowed.size(0) // BLOCK_SIZE
    return reduce(allowed.view(blocks, BLOCK_SIZE, blocks, BLOCK_SIZE).transpose(1, 2).flatten(2), -1)


def expand_block_mask(mask, n):
    """What a FlexAttention kernel computes with a BlockMask -- full blocks all allowed, partial blocks by
    mask_mod, every other block skipped -- and the block-level partial and full matrices."""
    positions = torch.arange(n)
    by_mask_mod = mask.mask_mod(0, 0, positions[:, None], positions[None, :])
    blocks = n // BLOCK_SIZE
    partial = torch.zeros(blocks, blocks, dtype=torch.bool)
    full = torch.zeros(blocks, blocks, dtype=torch.bool)
    for q_block in range(blocks):
        partial[q_block, mask.kv_indices[0, 0, q_block, :mask.kv_num_blocks[0, 0, q_block]].long()] = True
        full[q_block, mask.full_kv_indices[0, 0, q_block, :mask.full_kv_num_blocks[0, 0, q_block]].long()] = True
    assert not (partial & full).any(), "a block is both partial and full"
    as_tokens = lambda b: b.repeat_interleave(BLOCK_SIZE, 0).repeat_interleave(BLOCK_SIZE, 1)  # noqa: E731
    return (as_tokens(partial) & by_mask_mod) | as_tokens(full), partial, full


CASES = [  # (seed, blocks, document lengths, windows in blocks)
    (0, 8, [5, 40, 127, 128, 129], [1, 2, 3, 8]),  # short documents, some exactly one block
    (1, 8, [300, 700, 1500], [1, 2, 4, 5, 20]),  # long documents spanning several blocks
    (2, 12, [1, 2, 130, 1000], [1, 3, 6, 12]),  # mixed, with one-token documents
]


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium])
@pytest.mark.parametrize("seed, blocks, doc_lengths, windows", CASES)
@pytest.mark.parametrize("start_with_eot", [True, False])
def test_block_and_dense_masks_equal_brute_force(script, seed, blocks, doc_lengths, windows, start_with_eot):
    """Both tracks: the masks allow exactly the rule's pairs, and the block lists visit exactly the blocks holding an
    allowed pair (track 2's own test checked the pairs, so extra partial blocks, a slower step, passed there)."""
    tokens = random_tokens(seed, blocks * BLOCK_SIZE, doc_lengths, start_with_eot)
    docs = (tokens == EOT_TOKEN).cumsum(0)
    for window in windows:
        expected = brute_force_mask(tokens, window)
        window_blocks = torch.tensor(window, dtype=torch.int32)
        assert torch.equal(script.dense_mask(docs, window_blocks), expected), window
        allowed, partial, full = expand_block_mask(script.block_masks(docs, [window_blocks])[0], tokens.numel())
        assert torch.equal(allowed, expected), window
        # the compiled model's mask_mod leaves the window to the block lists: the same mask through them
        compiled_mask = script.block_masks(docs, [window_blocks], windowed_mask_mod=False)[0]
        assert torch.equal(expand_block_mask(compiled_mask, tokens.numel())[0], expected), window
        # exactly the blocks with some allowed pair are visited, and mask_mod is skipped exactly where all are
        all_allowed, any_allowed = per_block(expected, torch.all), per_block(expected, torch.any)
        assert torch.equal(full, all_allowed), window
        assert torch.equal(partial, any_allowed & ~all_allowed), window


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium])
def test_dynamo_tracing_the_masks_is_what_drops_the_window_from_mask_mod(script):
    """No monkeypatch: the same call through dynamo (as in the compiled model) and eagerly; mask_mod evaluated on
    every pair allows more pairs without the window."""
    tokens = random_tokens(3, 8 * BLOCK_SIZE, [2000])
    docs = (tokens == EOT_TOKEN).cumsum(0)
    positions = torch.arange(tokens.numel())

    def allowed_pairs(docs):
        mask = script.block_masks(docs, [torch.tensor(2)])[0]
        return mask.mask_mod(0, 0, positions[:, None], positions[None, :]).sum()

    eager, traced = allowed_pairs(docs), torch.compile(allowed_pairs, backend="eager")(docs)
    assert eager == brute_force_mask(tokens, 2).sum()
    assert traced == ((docs[:, None] == docs[None, :]) & (positions[:, None] >= positions[None, :])).sum() > eager


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium])
@pytest.mark.parametrize("seed, blocks, doc_lengths, windows", CASES)
def test_block_masks_hold_what_flexattentions_own_constructor_derives(script, seed, blocks, doc_lengths, windows):
    """Both tracks build every window's key-side rows and query-side rows (which the backward reads) in one
    block_rows call: tensor for tensor, what BlockMask.from_kv_blocks derives from argsorted key-side rows."""
    from torch.nn.attention.flex_attention import BlockMask
    docs = (random_tokens(seed, blocks * BLOCK_SIZE, doc_lengths) == EOT_TOKEN).cumsum(0)
    window_list = [torch.tensor(window, dtype=torch.int32) for window in windows]
    for window_blocks, ours in zip(window_list, script.block_masks(docs, window_list), strict=True):
        any_pair, full = script.block_relations(docs, window_blocks)

        def argsorted(blocks):
            indices = torch.argsort(blocks.to(torch.int8), dim=-1, descending=True, stable=True)
            return blocks.sum(-1, dtype=torch.int32)[None, None], indices.to(torch.int32)[None, None]

        theirs = BlockMask.from_kv_blocks(*argsorted(any_pair & ~full), *argsorted(full), BLOCK_SIZE=BLOCK_SIZE,
                                          mask_mod=ours.mask_mod)
        for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks",
                     "q_indices", "full_q_num_blocks", "full_q_indices"):
            mine, torchs = getattr(ours, name), getattr(theirs, name)
            assert mine.dtype == torchs.dtype and torch.equal(mine, torchs), (int(window_blocks), name)
        assert ours.seq_lengths == theirs.seq_lengths and ours.BLOCK_SIZE == theirs.BLOCK_SIZE


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium])
def test_block_rows_put_each_rows_blocks_first_in_order_then_the_other_columns(script):
    blocks = torch.tensor([[[False, True, False, True], [False, False, False, False], [True, True, True, True]],
                           [[True, False, False, False], [False, False, True, True], [False, True, False, False]]])
    counts, indices = script.block_rows(blocks)
    assert counts.tolist() == [[2, 0, 4], [1, 2, 1]] and counts.dtype == indices.dtype == torch.int32
    assert indices.tolist() == [[[1, 3, 0, 2], [0, 1, 2, 3], [0, 1, 2, 3]],
                                [[0, 1, 2, 3], [2, 3, 0, 1], [1, 0, 2, 3]]]
    # an opaque op inside compiled code (its fake shapes, a stack of transposed views as input)
    torch.library.opcheck(script.block_rows, (torch.rand(3, 6, 5) < 0.5,))
    compiled = torch.compile(lambda b: script.block_rows(b.mT), fullgraph=True, dynamic=False)(blocks)
    assert all(torch.equal(a, b) for a, b in zip(compiled, script.block_rows(blocks.mT)))


def test_block_relations_any_and_all():
    # 5 blocks; documents start at tokens 0, 200 and 600: doc 2 covers all of blocks 2 and 3
    tokens = torch.zeros(5 * BLOCK_SIZE, dtype=torch.long)
    tokens[[0, 200, 600]] = EOT_TOKEN
    docs = (tokens == EOT_TOKEN).cumsum(0)
    any_pair, all_pairs = train_gpt.block_relations(docs, torch.tensor(3))
    T, F_ = True, False
    assert any_pair.tolist() == [[T, F_, F_, F_, F_],
                                 [T, T, F_, F_, F_],
                                 [F_, T, T, F_, F_],  # block 0 holds only doc 1, block 2 only doc 2
                                 [F_, T, T, T, F_],  # a window of 3 blocks leaves block 0 out
                                 [F_, F_, T, T, T]]
    expected_all = torch.zeros(5, 5, dtype=torch.bool)
    expected_all[3, 2] = True  # the only earlier block wholly in the one document of the query block
    assert torch.equal(all_pairs, expected_all)


def test_attention_masks_short_window_is_half_the_long_one():
    tokens = random_tokens(3, 6 * BLOCK_SIZE, [2000])
    masks = train_gpt.attention_masks(tokens, torch.tensor(4))
    docs = (tokens == EOT_TOKEN).cumsum(0)
    assert torch.equal(masks["L"], train_gpt.dense_mask(docs, torch.tensor(4)))
    assert torch.equal(masks["S"], train_gpt.dense_mask(docs, torch.tensor(2)))
    one = train_gpt.attention_masks(tokens, torch.tensor(1))
    assert torch.equal(one["S"], one["L"])  # half of one block is still one block
    three = train_gpt.attention_masks(tokens, torch.tensor(3))
    assert torch.equal(three["S"], train_gpt.dense_mask(docs, torch.tensor(1)))  # half of 3 blocks rounds down


@pytest.mark.parametrize("seed, doc_lengths, window", [(4, [2000], 1), (5, [2000], 2), (6, [90, 300, 600], 3),
                                                        (7, [90, 300, 600], 8)])
def test_flex_attention_with_block_mask_equals_dense_path(seed, doc_lengths, window):
    """Forward only: FlexAttention has no CPU backward (the CPU training path uses the dense mask)."""
    n = 8 * BLOCK_SIZE
    tokens = random_tokens(seed, n, doc_lengths)
    docs = (tokens == EOT_TOKEN).cumsum(0)
    gen = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, n, 2, 32, generator=gen) for _ in range(3))
    window_blocks = torch.tensor(window, dtype=torch.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "flex_attention called without torch.compile()"
        flex = train_gpt.attend(q, k, v, train_gpt.block_masks(docs, [window_blocks])[0], 0.12)
    dense = train_gpt.attend(q, k, v, train_gpt.dense_mask(docs, window_blocks), 0.12)
    assert flex.shape == dense.shape == (1, n, 2, 32)
    torch.testing.assert_close(flex, dense, rtol=1e-5, atol=1e-5)
    full_document = train_gpt.attend(q, k, v, train_gpt.dense_mask(docs, torch.tensor(8)), 0.12)
    if window < 8 and doc_lengths == [2000]:
        assert (full_document - dense).abs().max() > 1e-2  # the window did cut something


def tiny_model(**overrides):
    torch.manual_seed(0)
    return GPT(Hyperparameters(**{**TINY, **overrides}))


def tiny_model_past_init():
    """tiny_model with the zero-initialised head and output projections drawn, so that every block's output and the
    loss depend on every weight."""
    model = tiny_model()
    with torch.no_grad():
        model.lm_head_w.normal_(0, 0.02)
        for block in model.blocks:
            block.mlp.proj_w.normal_(0, 0.02)
            if block.attn is not None:
                block.attn.qkvo_w[3].normal_(0, 0.02)
    return model


def test_each_layer_gets_its_long_or_short_window_and_the_records_logit_scale(monkeypatch):
    """The pattern LSSSLSSLSSSL (block 7 has no attention) picks each attention layer's mask, and every layer scales
    its logits by 0.12. The mask tests above check the masks, not which layer gets which: a model that gave every
    layer the long mask, or 1/sqrt(head_dim) as the scale, passed."""
    model = tiny_model()
    tokens = random_tokens(3, 257, [2000])  # one document: the window cuts it
    masks, scales = [], []
    monkeypatch.setattr(train_gpt, "attend", lambda q, k, v, mask, scale: (masks.append(mask), scales.append(scale),
                                                                            q)[2])
    with torch.no_grad():
        model(tokens[:-1].int(), tokens[1:].int(), torch.tensor(2, dtype=torch.int32))
    docs = (tokens[:-1] == EOT_TOKEN).cumsum(0)
    long, short = brute_force_mask(tokens[:-1], 2), brute_force_mask(tokens[:-1], 1)
    assert not torch.equal(long, short)
    pattern = [kind for i, kind in enumerate("LSSSLSSLSSSL") if i != 7]
    assert len(masks) == 11 and docs.max() == 1
    assert [("L" if torch.equal(m, long) else "S" if torch.equal(m, short) else "?") for m in masks] == pattern
    assert scales == [0.12] * 11


def test_tiny_forward_at_init_is_uniform_over_the_vocabulary():
    model = tiny_model()
    tokens = random_tokens(8, 257, [50, 120])
    window = torch.tensor(2, dtype=torch.int32)
    loss = model(tokens[:-1].int(), tokens[1:].int(), window)
    # lm_head is zero, so every logit is the softcap's 15: the loss is log(padded vocab) per token
    assert loss.dtype == torch.float32
    assert loss.item() == pytest.approx(256 * math.log(50304), rel=1e-5)  # training sums over tokens
    model.eval()
    with torch.no_grad():
        assert model(tokens[:-1].int(), tokens[1:].int(), window).item() == pytest.approx(math.log(50304), rel=1e-5)


def test_a_steps_weight_casts_give_the_loss_and_gradients_of_casting_in_each_forward():
    """GPT.weight_casts, made once a step and passed to each micro-step's forward, is the same float8 data the FP8
    MLPs and QKV projections made themselves before: loss and every gradient equal bit for bit. Casts of weights
    that have since moved (either kind) give another loss, so the forward does read the casts it is given."""
    model = tiny_model_past_init()  # each block's output reads both casts
    tokens = random_tokens(10, 257, [50, 120])
    window = torch.tensor(2, dtype=torch.int32)
    casts = model.weight_casts()
    block_casts, head_casts = casts
    assert head_casts is None  # the CPU's head (fp8_mm) casts its own; the GPU's takes head_weight_casts
    assert all(len(mlp) == 7 and mlp[0].dtype == torch.float8_e4m3fn for mlp, _ in block_casts)
    assert [qkv is None for _, qkv in block_casts] == [block.attn is None for block in model.blocks]
    assert all(len(qkv) == 4 and qkv[0].dtype == torch.float8_e4m3fn for _, qkv in block_casts if qkv is not None)
    results = []
    for given in (None, casts):
        loss = model(tokens[:-1].int(), tokens[1:].int(), window, given)
        loss.backward()
        model.take_table_grads()
        results.append((loss.detach(), {name: p.grad.clone() for name, p in model.named_parameters()}))
        model.zero_grad(set_to_none=True)
    assert torch.equal(results[0][0], results[1][0])
    assert all(torch.equal(results[0][1][name], results[1][1][name]) for name in results[0][1])
    for moved in ("mlp", "attn"):
        with torch.no_grad():
            for block in model.blocks:
                if moved == "mlp":
                    block.mlp.fc_w.mul_(1.5)
                elif block.attn is not None:
                    block.attn.qkvo_w[:3].mul_(1.5)
        fresh, stale = (model(tokens[:-1].int(), tokens[1:].int(), window, given).item() for given in (None, casts))
        assert fresh != stale, moved
        casts = model.weight_casts()


def test_tiny_forward_and_backward_are_finite_and_reach_every_parameter():
    model = tiny_model_past_init()
    tokens = random_tokens(9, 257, [50, 120])
    loss = model(tokens[:-1].int(), tokens[1:].int(), torch.tensor(2, dtype=torch.int32))
    assert torch.isfinite(loss) and loss.item() != pytest.approx(256 * math.log(50304), rel=1e-4)
    loss.backward()
    model.take_table_grads()  # the embedding tables' gradients, summed by the lookups
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
        assert p.grad.abs().sum() > 0, name


def test_backward_at_init_with_the_fp8_qkv_projection_is_finite():
    """At init the head and the output projections are zero, so every token's gradient into the blocks is zero:
    --fp8_qkv's rowwise e4m3 cast of qkv's gradient takes all-zero rows, whose scale of 0 made them NaN (0 / 0), and
    the NaN reached x's and the weights' gradients through the GEMMs. tiny_model_past_init's draws hide this."""
    model = tiny_model(fp8_qkv=True)
    assert model.training and any(block.attn is not None and block.attn.fp8_qkv for block in model.blocks)
    tokens = random_tokens(11, 257, [50, 120])
    loss = model(tokens[:-1].int(), tokens[1:].int(), torch.tensor(2, dtype=torch.int32))
    assert torch.isfinite(loss)
    loss.backward()
    model.take_table_grads()
    assert model.lm_head_w.grad.abs().sum() > 0  # the head learns from the first step
    for name, p in model.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


def test_output_projections_and_head_start_at_zero():
    model = tiny_model()
    assert torch.equal(model.lm_head_w, torch.zeros_like(model.lm_head_w))
    bound = 0.5 * 3 ** 0.5 / 8  # the record's init: std 0.5 / sqrt(fan_in), here fan_in = model_dim = 64
    for i, block in enumerate(model.blocks):
        assert torch.equal(block.mlp.proj_w, torch.zeros_like(block.mlp.proj_w))
        assert bound * 0.99 < block.mlp.fc_w.abs().max() <= bound
        assert block.mlp.fc_w.std().item() == pytest.approx(bound / 3 ** 0.5, rel=0.05)  # uniform's std
        if i == 7:
            assert block.attn is None
            continue
        qkvo = block.attn.qkvo_w
        assert qkvo.shape == (4, 64, 64)
        assert torch.equal(qkvo[3], torch.zeros_like(qkvo[3]))
        assert bound * 0.99 < qkvo[:3].abs().max() <= bound
        assert qkvo[:3].std().item() == pytest.approx(bound / 3 ** 0.5, rel=0.05)
        assert torch.equal(block.attn.gate_w, torch.zeros(2, 1))  # gate on the first model_dim // 64 dims


def expected_parameter_count(vocab, dim, heads, head_dim, layers, attention_layers):
    embeddings = 4 * vocab * dim  # token embedding + 3 value embeddings
    attention = attention_layers * (4 * heads * head_dim * dim + heads * (dim // 64))
    mlp = layers * 2 * dim * 4 * dim
    scalars = -(-(layers // 2 + 4 * layers) // 8) * 8
    return embeddings + attention + mlp + vocab * dim + scalars


def test_flops_per_step_counts_six_per_matmul_parameter_and_token_plus_attention_over_the_mean_window():
    """A 4-step schedule has windows of 1728 x step / 4 tokens rounded up to blocks: 1, 4, 7, 11, a mean of
    128 x 23 / 4 = 736 keys per query in L layers and 368 in S layers."""
    args = Hyperparameters(num_iterations=4)
    assert [train_gpt.window_blocks_at(step, args) for step in range(4)] == [1, 4, 7, 11]
    with torch.device("meta"):
        model = GPT(args)
    # QKVO and the 6 heads' gates (12 inputs) of 11 attention blocks, 12 MLPs, the head
    params = 11 * (4 * 768 * 768 + 6 * 12) + 12 * 2 * 768 * 3072 + 50304 * 768
    assert train_gpt.matmul_params(model) == params == 121_209_624
    keys = 3 * 736 + 8 * 368  # L blocks 0, 4, 11 (7 has no attention), eight S blocks
    tokens = 49152
    attention = 12 * 768 * keys * tokens  # QK^T and PV, forward and backward, 6 heads of 128
    assert train_gpt.flops_per_step(model, args, tokens) == 6 * params * tokens + attention


def test_parameter_count_of_the_record_model():
    with torch.device("meta"):
        model = GPT(Hyperparameters())
    total = sum(p.numel() for p in model.parameters())
    assert total == expected_parameter_count(50304, 768, 6, 128, 12, 11)
    assert train_gpt.matmul_params(model) == total - 4 * 50304 * 768 - model.scalars.numel()
    assert model.lm_head_w.shape == model.embed.weight.shape == (50304, 768)
    assert len(model.blocks) == 12 and [b.attn is None for b in model.blocks].index(True) == 7
    assert model.value_embed_layout == [0, 1, 2, None, None, None, None, None, None, 0, 1, 2]


def test_padded_vocab():
    assert train_gpt.padded_vocab(50257) == 50304
    assert train_gpt.padded_vocab(50304) == 50304
    assert train_gpt.padded_vocab(1) == 128


@pytest.mark.parametrize("layers", range(6, 15))
def test_scalars_are_padded_to_a_multiple_of_8(layers):
    with torch.device("meta"):
        model = GPT(Hyperparameters(**{**TINY, "num_layers": layers, "window_pattern": "L" * layers,
                                        "backout_layer": -1}))
    assert model.scalars.numel() % 8 == 0
    assert model.scalars.numel() - (layers // 2 + 4 * layers) < 8


def test_scalar_views_and_their_initial_values():
    model = tiny_model()
    skip, block, attn = model.scalar_views()
    assert torch.equal(skip, torch.ones(6))
    assert torch.equal(block, torch.tensor([[1.0, 0.0]] * 12))
    assert torch.equal(attn, torch.tensor([[0.5, 0.5]] * 12))
    assert model.scalars.numel() == 56  # 6 + 24 + 24, the backout lambda (0.5), padded with 1 zero
    assert torch.equal(model.scalars[54:], torch.tensor([0.5, 0.0]))
    with torch.no_grad():
        model.scalars[0] = 3.0
    assert model.scalar_views()[0][0] == 3.0  # views, not copies: the optimizer's updates reach the model


def test_rotary_rotates_half_the_dims_and_keeps_norms():
    tables = train_gpt.Rotary(32, 64).tables(64)
    x = torch.randn(1, 64, 2, 32)
    y = train_gpt.rotated(x, *tables)
    torch.testing.assert_close(y.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(y[:, 0], x[:, 0])  # position 0 is not rotated
    # the zero-frequency quarter of the pairs stays put at every position
    torch.testing.assert_close(y[..., 8:16], x[..., 8:16])
    torch.testing.assert_close(y[..., 24:32], x[..., 24:32])
    assert (y[:, 1:, :, :8] - x[:, 1:, :, :8]).abs().max() > 1e-2
    # relative positions: q.k after rotary depends only on the distance
    q, k = torch.randn(32), torch.randn(32)
    qs = train_gpt.rotated(q.expand(1, 64, 1, 32).contiguous(), *tables)[0, :, 0]
    ks = train_gpt.rotated(k.expand(1, 64, 1, 32).contiguous(), *tables)[0, :, 0]
    torch.testing.assert_close(qs[10] @ ks[7], qs[40] @ ks[37], rtol=1e-4, atol=1e-4)


def test_rotary_turns_the_first_half_of_the_pairs_at_the_records_frequencies_and_leaves_the_rest():
    """head_dim 32: 8 frequencies from 1 down to 1/1024 (geometric) on the first 8 of 16 pairs, the other 8 pairs
    position-free (cos 1, sin 0). The test above holds for any frequencies, and the kernels' tests share these tables
    with their torch reference, so a base of 1/512 passed."""
    cos, sin = train_gpt.Rotary(32, 64).tables(40)
    assert cos.shape == sin.shape == (40, 16)
    angles = torch.arange(40.0)[:, None] * (1 / 1024) ** (torch.arange(8.0) / 7)
    torch.testing.assert_close(cos[:, :8], angles.cos())
    torch.testing.assert_close(sin[:, :8], angles.sin())
    assert torch.equal(cos[:, 8:], torch.ones(40, 8)) and torch.equal(sin[:, 8:], torch.zeros(40, 8))


def test_softcap_bounds_the_logits():
    capped = train_gpt.softcap(torch.randn(16, 50304).bfloat16() * 1000)
    assert capped.dtype == torch.float32
    assert capped.min() >= 0 and capped.max() <= 30 and capped.max() > 29.9 and capped.min() < 0.1
    torch.testing.assert_close(train_gpt.softcap(torch.zeros(3)), torch.full((3,), 15.0))


@pytest.mark.parametrize("chunk", [32 * 1024, 16, 5], ids=["one chunk", "even chunks", "a short last chunk"])
def test_eval_head_loss_is_the_mean_cross_entropy_of_the_softcapped_bf16_logits(chunk, monkeypatch):
    """Validation's logits are made a chunk of tokens at a time (262,144 tokens' would be 26 GB): the same mean."""
    monkeypatch.setattr(train_gpt, "EVAL_HEAD_TOKENS", chunk)
    model = tiny_model()
    with torch.no_grad():
        model.lm_head_w.normal_(0, 10.0)
    model.eval()
    x = F.rms_norm(torch.randn(32, 64), (64,)).bfloat16()
    targets = torch.randint(0, 50257, (32,), dtype=torch.int32)
    logits = (x @ model.lm_head_w.bfloat16().T).float()
    expected = F.cross_entropy(30 * torch.sigmoid(logits / 7.5), targets.long())
    torch.testing.assert_close(model.head_loss(x, targets), expected)


def test_attention_layers_share_one_rotary_table():
    """One cos/sin table for all layers (each is max_len x head_dim/2 fp32: 134 MB at the default lengths)."""
    args = train_gpt.Hyperparameters(model_dim=64, num_heads=2, head_dim=32, train_seq_len=128, val_seq_len=256)
    with torch.device("meta"):
        model = train_gpt.GPT(args)
    tables = {id(block.attn.rotary) for block in model.blocks if block.attn is not None}
    assert len(tables) == 1 and len(list(model.blocks.buffers())) == 2
    assert model.blocks[0].attn.rotary.cos.shape == (256, 16)


def test_embedding_tables_are_bf16_as_in_the_record():
    args = train_gpt.Hyperparameters(model_dim=64, num_heads=2, head_dim=32, train_seq_len=128, val_seq_len=128)
    model = train_gpt.GPT(args)
    assert {t.weight.dtype for t in [model.embed, *model.value_embeds]} == {torch.bfloat16}
    assert model.lm_head_w.dtype == torch.float32


def test_training_head_loss_is_the_summed_cross_entropy_of_the_softcapped_fp8_logits_of_the_normed_stream():
    """The CPU's training head (fp8_mm, then the softcap and a summed cross entropy), from the stream rms_norm'd
    inside: a stream 32 times larger gives the same loss. The eval test hands head_loss a normed stream, and the
    model's other tests compare it with itself, so a training loss without the softcap, or a head that skipped the
    norm, passed."""
    model = tiny_model()
    with torch.no_grad():
        model.lm_head_w.normal_(0, 10.0)
    assert model.training
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(3)).bfloat16()
    targets = torch.randint(0, 50257, (32,), dtype=torch.int32)
    logits = train_gpt.fp8_mm(F.rms_norm(x, (64,)), model.lm_head_w, *model.fp8_scales)[0]
    expected = F.cross_entropy(30 * torch.sigmoid(logits.float() / 7.5), targets.long(), reduction="sum")
    assert logits.float().abs().max() > 30  # the softcap bends these logits
    with torch.no_grad():
        torch.testing.assert_close(model.head_loss(x, targets), expected)
        torch.testing.assert_close(model.head_loss(32 * x, targets), expected)
        model.eval()
        torch.testing.assert_close(model.head_loss(32 * x, targets), model.head_loss(x, targets))


def smear_backout_model(**overrides):
    args = train_gpt.Hyperparameters(model_dim=64, num_heads=2, head_dim=32, train_seq_len=256, val_seq_len=256,
                                     **overrides)
    torch.manual_seed(0)
    return train_gpt.GPT(args)


def loss_of(model, tokens):
    return model(tokens[:-1], tokens[1:], torch.tensor(2))


def test_smear_and_backout_start_as_the_plain_model_and_then_learn():
    """Smear starts with lambda 0 (no change) and backout with lambda 0.5; both lambdas get gradients."""
    tokens = torch.randint(0, 50257, (257,), generator=torch.Generator().manual_seed(1))
    tokens[::50] = 50256
    plain, smear = smear_backout_model(), smear_backout_model(smear=True)
    with torch.no_grad():
        smear.load_state_dict({k: v for k, v in plain.state_dict().items() if k != "scalars"}, strict=False)
        smear.scalars[:plain.scalars.numel() - 2].copy_(plain.scalars[:-2])
        plain.lm_head_w.normal_()
        smear.lm_head_w.copy_(plain.lm_head_w)
    assert smear.scalars.numel() % 8 == 0 and smear.scalars[smear.smear_at] == 0  # 54 + 1 + gate of 1, padded
    torch.testing.assert_close(loss_of(smear, tokens), loss_of(plain, tokens))
    loss_of(smear, tokens).backward()
    assert smear.scalars.grad[smear.smear_at] != 0  # lambda learns; the gate follows once lambda moves

    backout = smear_backout_model(backout_layer=3)
    assert backout.scalars[backout.backout_at] == 0.5
    with torch.no_grad():
        backout.lm_head_w.normal_()
    before = loss_of(backout, tokens)
    with torch.no_grad():
        backout.scalars[backout.backout_at] = 0.0
    after_zero = loss_of(backout, tokens)
    assert before != after_zero  # the subtraction reaches the logits
    after_zero.backward()
    assert backout.scalars.grad[backout.backout_at] != 0


def test_smear_mixes_exactly_the_previous_token():
    model = smear_backout_model(smear=True)
    embedded = torch.randn(5, 64)
    with torch.no_grad():
        model.scalars[model.smear_at] = 0.3  # gate weights 0: sigmoid(0) = 0.5, so each token adds 0.15 x previous
    out = model.smeared(embedded)
    torch.testing.assert_close(out[0], embedded[0])
    torch.testing.assert_close(out[1:], embedded[1:] + 0.15 * embedded[:-1])


def signal_model(**overrides):
    """tiny_model with its zero-initialised matrices (output projections, gates, head) made random: every block then
    changes the stream, so streams from different blocks differ."""
    model = tiny_model(**overrides)
    with torch.no_grad():
        for p in model.parameters():
            if p.ndim >= 2:
                p.copy_(torch.where(p == 0, torch.randn_like(p, dtype=torch.float32) * 0.02, p.float()))
    return model


def recorded_streams(model, tokens):
    """Each block's input and output stream, and the stream handed to the head, in one forward."""
    inputs, outputs, head = {}, {}, []

    def recorder(i):
        def hook(module, args, output):
            inputs[i], outputs[i] = args[0], output
        return hook

    hooks = [block.register_forward_hook(recorder(i)) for i, block in enumerate(model.blocks)]
    head_loss = model.head_loss
    model.head_loss = lambda x, targets, head_casts: (head.append(x), head_loss(x, targets, head_casts))[1]
    try:
        with torch.no_grad():
            model(tokens[:-1].int(), tokens[1:].int(), torch.tensor(2, dtype=torch.int32))
    finally:
        del model.head_loss
        for hook in hooks:
            hook.remove()
    return inputs, outputs, head[0]


def test_skip_weights_join_encoder_outputs_to_decoder_inputs_last_in_first_out():
    """U-net: block 6 (the first of the second half) gets block 5's output, block 7 block 4's, ..., block 11 block
    0's, each times its own skip weight; the first half's inputs are the previous outputs alone."""
    model = signal_model()
    skip = torch.tensor([0.5, 2.0, -1.0, 1.5, -0.5, 0.25])
    with torch.no_grad():
        model.scalars[:6] = skip
    inputs, outputs, _ = recorded_streams(model, random_tokens(10, 257, [50, 120]))
    assert len({outputs[i].sum().item() for i in range(12)}) == 12  # every block writes something of its own
    for target, source in zip(range(6, 12), [5, 4, 3, 2, 1, 0]):
        assert torch.equal(inputs[target], outputs[target - 1] + skip[target - 6] * outputs[source]), target
    for plain in range(1, 6):
        assert torch.equal(inputs[plain], outputs[plain - 1]), plain


def test_backout_subtracts_lambda_times_the_stream_after_backout_layer_blocks_before_the_head():
    """With backout_layer 8 the head reads the last block's output minus lambda times the stream after 8 blocks (block
    7's output: before block 8 adds its skip), lambda read from the model's scalars."""
    model = signal_model()
    assert model.backout_layer == 8
    with torch.no_grad():
        model.scalars[model.backout_at] = 0.3  # not the initial 0.5
    inputs, outputs, head_input = recorded_streams(model, random_tokens(11, 257, [50, 120]))
    assert not torch.equal(inputs[8], outputs[7])  # block 8 takes a skip, so "after 8 blocks" is block 7's output
    lam = model.scalars[model.backout_at]
    assert lam.item() == pytest.approx(0.3)
    assert torch.equal(head_input, outputs[11] - lam * outputs[7])


def test_the_tables_gradients_are_summed_in_fp32_over_micro_steps_and_handed_over_once(monkeypatch):
    """In training the lookups add each micro-step's gradient into table_grad_sums (fp32), not into the tables' bf16
    .grad; take_table_grads gives each table the bf16 rounding of the whole sum and zeroes the sums. The sums are the
    plain lookups' gradients (each micro-step's rounded to bf16 by autograd, then added in fp32) within bf16's
    rounding."""
    model = tiny_model_past_init()
    batches = [random_tokens(seed, 257, [50, 120]) for seed in (20, 21, 22)]
    window = torch.tensor(2, dtype=torch.int32)
    for tokens in batches:
        model(tokens[:-1].int(), tokens[1:].int(), window).backward()
        assert all(table.weight.grad is None for table in model.embedding_tables())
    sums = model.table_grad_sums.clone()
    model.take_table_grads()
    assert torch.equal(model.table_grad_sums, torch.zeros_like(model.table_grad_sums))
    for table, table_sums in zip(model.embedding_tables(), sums):
        assert torch.equal(table.weight.grad, table_sums.bfloat16())
    monkeypatch.setattr(train_gpt, "summed_lookup", lambda ids, table, *sums_and_order: F.embedding(ids, table))
    plain = torch.zeros_like(sums)
    for tokens in batches:
        model.zero_grad(set_to_none=True)
        model(tokens[:-1].int(), tokens[1:].int(), window).backward()
        plain += torch.stack([table.weight.grad.float() for table in model.embedding_tables()])
    assert all(t.abs().sum() > 0 for t in plain)  # every table's gradient reaches the sums, the value tables' too
    assert torch.allclose(sums, plain, rtol=2 ** -6, atol=2 ** -6 * plain.abs().max().item())


def attention_inputs_case(seed):
    """An eval-mode attention's inputs: a stream of RMS 3 (bf16), a value embedding, two lambdas and a dense mask of
    two documents with a window of 2 blocks over 256 tokens."""
    gen = torch.Generator().manual_seed(seed)
    x = (3 * torch.randn(1, 256, 64, generator=gen)).bfloat16()
    ve = torch.randn(1, 256, 64, generator=gen).bfloat16()
    docs = (random_tokens(seed, 256, [90, 300]) == EOT_TOKEN).cumsum(0)
    return x, ve, torch.tensor([0.7, -0.4]), train_gpt.dense_mask(docs, torch.tensor(2))


def test_attention_is_the_gated_heads_of_normed_rotated_q_and_k_through_the_output_projection():
    """Rebuilt from its parts in fp32 (the bf16 path of eval): rows 0-2 of qkvo_w make q, k and v, q and k
    RMS-normed and rotated, v mixed with the value embedding, attention at scale 0.12, each head times
    sigmoid(gate_w @ x[:gate_dim]), then row 3 of qkvo_w. The model tests start the gate and row 3 at zero and
    compare the model with itself, so a gate read from the last dims, doubled or left out, QKV taken from rows 1-3
    and the output weight transposed all passed."""
    torch.manual_seed(0)
    attention = train_gpt.CausalSelfAttention(Hyperparameters(**TINY), train_gpt.Rotary(32, 256))
    with torch.no_grad():
        attention.qkvo_w[3].normal_(std=0.1)
        attention.gate_w.normal_(std=1.0)
    attention.eval()
    x, ve, lambdas, mask = attention_inputs_case(12)
    with torch.no_grad():
        out = attention(x, ve, lambdas, mask)
    w, gate_w = attention.qkvo_w.detach().float(), attention.gate_w.detach().float()
    q, k, v = (x.float() @ w[:3].flatten(0, 1).T).view(1, 256, 6, 32).chunk(3, dim=-2)
    cos, sin = train_gpt.Rotary(32, 256).tables(256)
    q, k = (train_gpt.rotated(F.rms_norm(t, (32,)), cos, sin) for t in (q, k))
    v = 0.7 * v - 0.4 * ve.float().view(1, 256, 2, 32)
    y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask,
                                       scale=0.12).transpose(1, 2)
    gate = torch.sigmoid(x.float()[..., :1] @ gate_w.T)  # gate_dim = 64 // 64 = 1: the first dim of each token
    assert gate.min() < 0.2 and gate.max() > 0.8
    expected = (y * gate[..., None]).flatten(2) @ w[3]
    assert out.shape == expected.shape and out.dtype == torch.bfloat16
    assert (out.float() - expected).norm() / expected.norm() < 0.02  # bf16's rounding of the stream's path


def test_a_block_mixes_its_streams_then_adds_attention_and_the_mlp_each_of_the_normed_stream():
    """lambdas[0] x + lambdas[1] x0, plus attention of its rms_norm, plus the MLP of the result's rms_norm: bit for bit
    what the block's parts give. The model's lambdas start at (1, 0), the stream near RMS 1 and the other tests
    compare the model with itself, so swapped lambdas, a lost residual or an un-normed input passed."""
    torch.manual_seed(0)
    block = train_gpt.Block(Hyperparameters(**TINY), True, train_gpt.Rotary(32, 256))
    with torch.no_grad():
        block.attn.qkvo_w[3].normal_(std=0.1)
        block.attn.gate_w.normal_(std=1.0)
        block.mlp.proj_w.normal_(std=0.1)
    block.eval()
    x, ve, attn_lambdas, mask = attention_inputs_case(13)
    x0 = F.rms_norm(torch.randn(1, 256, 64, generator=torch.Generator().manual_seed(14)), (64,)).bfloat16()
    block_lambdas = torch.tensor([0.5, 2.0])
    with torch.no_grad():
        out = block(x, x0, ve, block_lambdas, attn_lambdas, mask)
        mixed = block_lambdas[0] * x + block_lambdas[1] * x0
        mixed = mixed + block.attn(F.rms_norm(mixed, (64,)), ve, attn_lambdas, mask)
        expected = mixed + block.mlp(F.rms_norm(mixed, (64,)))
    assert torch.equal(out, expected)
    assert (expected - mixed).abs().max() > 0.1 and (mixed - x).abs().max() > 0.1  # both parts add something


def test_the_model_hands_each_block_its_scalars_value_embedding_and_the_normed_embedding(monkeypatch):
    """Block i gets block_lambdas[i] and attn_lambdas[i] of scalar_views (all scalars made distinct), the value
    embedding of value_embed_layout[i] (None between) and x0 = rms_norm(embedding). The scalars start equal across
    layers (1, 0 and 0.5, 0.5), so lambdas handed to the wrong place passed."""
    model = tiny_model()
    model.eval()
    with torch.no_grad():
        model.scalars.copy_(torch.arange(model.scalars.numel()) / 10)
        for table in model.embedding_tables():
            table.weight.mul_(3)  # rows of RMS 3: the norm of x0 matters
    calls, forward = [], train_gpt.Block.forward
    monkeypatch.setattr(train_gpt.Block, "forward", lambda self, x, x0, ve, block_lambdas, attn_lambdas, *rest: (
        calls.append((x0, ve, block_lambdas, attn_lambdas)), forward(self, x, x0, ve, block_lambdas, attn_lambdas,
                                                                        *rest))[1])
    tokens = random_tokens(15, 257, [50, 120])
    with torch.no_grad():
        model(tokens[:-1].int(), tokens[1:].int(), torch.tensor(2, dtype=torch.int32))
    _, block, attn = model.scalar_views()
    x0 = F.rms_norm(model.embed(tokens[:-1].int())[None], (64,))
    assert len(calls) == 12
    for i, (got_x0, got_ve, got_block, got_attn) in enumerate(calls):
        assert torch.equal(got_x0, x0), i
        assert torch.equal(got_block, block[i]) and torch.equal(got_attn, attn[i]), i
        table = model.value_embed_layout[i]
        if table is None:
            assert got_ve is None, i
        else:
            assert torch.equal(got_ve, model.value_embeds[table](tokens[:-1].int())[None]), i
