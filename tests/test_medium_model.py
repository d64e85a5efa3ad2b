"""train_gpt_medium.py model: ISRU softcap, the merged scalar tensor, skips, masks per layer, chunked eval head,
FLOPs per step."""

import math
import sys
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
import train_gpt_medium as medium  # noqa: E402

TINY = dict(model_dim=64, num_heads=2, head_dim=32, train_seq_len=512, val_seq_len=512)
SEQ = 512


def tiny_args(**overrides) -> medium.Hyperparameters:
    return medium.Hyperparameters(**{**TINY, **overrides})


def packed_tokens(seed: int, length: int = SEQ + 1, documents: int = 5) -> torch.Tensor:
    """Random tokens starting with EOT, with up to documents - 1 more document starts inside."""
    generator = torch.Generator().manual_seed(seed)
    tokens = torch.randint(0, 50000, (length,), generator=generator, dtype=torch.int32)
    tokens[0] = medium.EOT_TOKEN
    tokens[torch.randint(1, length, (documents - 1,), generator=generator)] = medium.EOT_TOKEN
    return tokens


@pytest.fixture(scope="module")
def model() -> medium.GPT:
    """The 16-block tiny model with its zero-initialised weights made random, so every path carries signal."""
    torch.manual_seed(0)
    gpt = medium.GPT(tiny_args())
    with torch.no_grad():
        for p in gpt.parameters():
            if p.ndim >= 2:
                p.copy_(torch.where(p == 0, torch.randn_like(p, dtype=torch.float32) * 0.02, p.float()))
    return gpt


def test_input_projections_start_uniform_at_the_records_scale_and_output_projections_at_zero():
    """std 0.5 / sqrt(fan_in) (bound sqrt(3) x that), fan_in = model_dim = 64; proj_w and the output rows zero."""
    torch.manual_seed(0)
    gpt = medium.GPT(tiny_args())
    bound = 0.5 * 3 ** 0.5 / 8
    blocks = [block for block in gpt.blocks if block.attn is not None]
    weights = [block.mlp.fc_w for block in gpt.blocks] + [block.attn.qkvo_w[:3] for block in blocks]
    for w in weights:
        assert w.dtype == torch.bfloat16
        assert bound * 0.99 < w.float().abs().max() <= bound * (1 + 2 ** -8)  # bf16 rounding
        assert w.float().std().item() == pytest.approx(bound / 3 ** 0.5, rel=0.05)
    assert all(not block.mlp.proj_w.any() for block in gpt.blocks)
    assert blocks and all(not block.attn.qkvo_w[3].any() for block in blocks)


def brute_force_mask(docs: torch.Tensor, window_blocks: int) -> torch.Tensor:
    q, k = torch.arange(docs.numel())[:, None], torch.arange(docs.numel())[None, :]
    near = (q // medium.BLOCK_SIZE - k // medium.BLOCK_SIZE) < window_blocks
    return (docs[:, None] == docs[None, :]) & (q >= k) & near


# ISRU softcap


def test_softcap_stays_inside_15_and_is_odd_and_monotonic():
    z = torch.cat([torch.linspace(-1000, 1000, 20001), torch.randn(10_000) * 50])
    y = medium.softcap(z)
    assert (y.abs() < 15).all()
    assert torch.equal(medium.softcap(-z), -y)
    ordered = medium.softcap(torch.linspace(-50, 50, 10001))
    assert (ordered[1:] > ordered[:-1]).all()
    assert medium.softcap(torch.tensor(15.0)).item() == pytest.approx(15 / 2 ** 0.5, rel=1e-6)
    small = torch.linspace(-0.1, 0.1, 101)
    torch.testing.assert_close(medium.softcap(small), small, rtol=3e-5, atol=0)


def test_softcap_gradient_matches_autograd_and_the_analytic_derivative():
    z = (torch.randn(200, dtype=torch.float64) * 30).requires_grad_()
    assert torch.autograd.gradcheck(medium.softcap, (z,))
    (grad,) = torch.autograd.grad(medium.softcap(z).sum(), z)
    torch.testing.assert_close(grad, 15 * 225 / (z.detach() ** 2 + 225) ** 1.5)


# Scalars, skips, value embeddings


def test_skip_pairs_parse_and_drop_blocks_the_model_lacks():
    assert medium.skip_pairs(tiny_args()) == [(6, 9), (4, 10), (2, 11)]
    assert medium.skip_pairs(tiny_args(num_layers=10)) == [(6, 9)]
    assert medium.skip_pairs(tiny_args(num_layers=6)) == []
    assert medium.skip_pairs(tiny_args(skip_connections="")) == []
    assert medium.skip_pairs(tiny_args(skip_connections="6>9,")) == [(6, 9)]
    assert medium.skip_pairs(tiny_args(skip_connections="6>9, 4>10")) == [(6, 9), (4, 10)]  # a space after a comma
    for bad in ["9>6", "6-9", "6>9;4>10", "a>b", "3>3"]:
        with pytest.raises(medium.SetupError, match="skip_connections"):
            medium.skip_pairs(tiny_args(skip_connections=bad))


def test_scalar_tensor_layout_initial_values_and_padding(model):
    layers = 16
    assert model.scalars.numel() == 72  # 3 skips + 2 x 16 block + 2 x 16 attention = 67, padded to 72
    skip, block, attn = model.scalar_views()
    assert torch.equal(skip, torch.ones(3))
    assert torch.equal(block, torch.tensor([[1.0, 0.0]] * layers))
    assert torch.equal(attn, torch.tensor([[0.5, 0.5]] * layers))
    assert torch.equal(model.scalars[67:], torch.zeros(5))
    with torch.no_grad():
        saved = model.scalars.clone()
        model.scalars.copy_(torch.arange(72.0))
        skip, block, attn = model.scalar_views()
        assert skip.tolist() == [0, 1, 2]
        assert block[5].tolist() == [3 + 10, 4 + 10] and block[15].tolist() == [33, 34]
        assert attn[0].tolist() == [35, 36] and attn[15].tolist() == [65, 66]
        model.scalars.copy_(saved)


def test_each_scalar_gets_gradient_exactly_where_the_forward_uses_it(model):
    model.zero_grad()
    tokens = packed_tokens(1)
    model(tokens[:-1], tokens[1:], torch.tensor(2)).backward()
    used = model.scalars.grad != 0
    model.zero_grad()
    expected = torch.zeros(72, dtype=torch.bool)
    expected[:3] = True  # the three skip weights
    expected[3:35] = True  # (x, x0) lambdas of every block
    for layer in range(16):
        if layer != 7:  # block 7 has no attention
            expected[35 + 2 * layer] = True  # value weight
            expected[36 + 2 * layer] = medium.value_embed_layout(16)[layer] is not None
    assert used.tolist() == expected.tolist()


def test_skip_weights_join_block_outputs_to_their_target_inputs(model, monkeypatch):
    tokens = packed_tokens(2)
    index = {id(block): i for i, block in enumerate(model.blocks)}
    inputs, outputs = {}, {}
    original = medium.Block.forward

    def record(self, x, *rest):
        inputs[index[id(self)]] = x
        outputs[index[id(self)]] = original(self, x, *rest)
        return outputs[index[id(self)]]

    monkeypatch.setattr(medium.Block, "forward", record)
    with torch.no_grad():
        saved = model.scalars[:3].clone()
        model.scalars[:3] = torch.tensor([0.5, 2.0, -1.0])
        model(tokens[:-1], tokens[1:], torch.tensor(2))
        model.scalars[:3] = saved
    skip = torch.tensor([0.5, 2.0, -1.0])
    for target, (source, weight) in {9: (6, skip[0]), 10: (4, skip[1]), 11: (2, skip[2])}.items():
        assert torch.equal(inputs[target], outputs[target - 1] + weight * outputs[source])
    for plain in [1, 2, 3, 4, 5, 6, 7, 8, 12, 13, 14, 15]:
        assert torch.equal(inputs[plain], outputs[plain - 1])


def test_the_skips_carry_gradient_back_to_their_source_blocks(model, monkeypatch):
    """The gradient at block 6's output is the gradient at block 7's input plus skip weight 0 times the gradient at
    block 9's input (and so for blocks 4 and 2): the skips train the early blocks too. The skip tests check the
    forward only, so a model that detached the skipped outputs passed."""
    tokens = packed_tokens(2)
    index = {id(block): i for i, block in enumerate(model.blocks)}
    inputs, outputs = {}, {}
    original = medium.Block.forward

    def record(self, x, *rest):
        inputs[index[id(self)]] = x = x.view_as(x)  # a node of its own: its gradient is this block's path alone
        outputs[index[id(self)]] = original(self, x, *rest)
        for stream in (x, outputs[index[id(self)]]):
            stream.retain_grad()
        return outputs[index[id(self)]]

    monkeypatch.setattr(medium.Block, "forward", record)
    skip = torch.tensor([0.5, 2.0, -1.0])
    with torch.no_grad():
        saved = model.scalars[:3].clone()
        model.scalars[:3] = skip
    try:
        model(tokens[:-1], tokens[1:], torch.tensor(2)).backward()
    finally:
        model.zero_grad()
        with torch.no_grad():
            model.scalars[:3] = saved
    for (source, target), weight in zip([(6, 9), (4, 10), (2, 11)], skip):
        through_skip = weight * inputs[target].grad.float()
        assert through_skip.abs().max() > 0.1 * inputs[source + 1].grad.float().abs().max(), source
        torch.testing.assert_close(outputs[source].grad.float(), inputs[source + 1].grad.float() + through_skip,
                                   rtol=2e-2, atol=2e-2 * through_skip.abs().max().item())


def test_the_blocks_get_the_normed_embedding_and_the_head_the_normed_last_stream(model, monkeypatch):
    """x0 (and block 0's x) is rms_norm(embed(tokens)), the head's input rms_norm of the last block's output: rows of
    RMS 1. The embedding's N(0, 1) rows have an RMS near 1 already, and the other tests compare the model with itself,
    so either norm could go unseen."""
    tokens = packed_tokens(9)
    streams, heads = [], []
    block_forward, head_loss = medium.Block.forward, medium.GPT.head_loss
    monkeypatch.setattr(medium.Block, "forward", lambda self, x, x0, *rest: streams.append((x, x0)) or
                        block_forward(self, x, x0, *rest))
    monkeypatch.setattr(medium.GPT, "head_loss", lambda self, x, targets: heads.append(x) or
                        head_loss(self, x, targets))
    with torch.no_grad():
        model(tokens[:-1], tokens[1:], torch.tensor(2))
    assert len(streams) == 16 and len(heads) == 1 and all(x0 is streams[0][1] for _, x0 in streams)
    for normed in (streams[0][0], streams[0][1], heads[0]):
        torch.testing.assert_close(normed.float().square().mean(-1), torch.ones(normed.shape[:-1]), rtol=0, atol=2e-2)
    raw = model.embed(tokens[:-1]).float().square().mean(-1)
    assert (raw - 1).abs().max() > 0.1  # what the norm takes away


@pytest.mark.parametrize("epilogue", [False, True], ids=["torch", "epilogue"])
def test_both_mlp_paths_norm_their_input(epilogue):
    """The MLP of rms_norm(x): a power of two times x gives the same output (to bf16's rounding), on the plain path
    as on the epilogue's. A residual stream near RMS 1, as in the model tests, hid a plain path without the norm."""
    torch.manual_seed(0)
    mlp = medium.MLP(64, 256, epilogue)
    with torch.no_grad():
        mlp.proj_w.normal_(0, 0.02)
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(10)).bfloat16()
    with torch.no_grad():
        y, scaled = mlp(x), mlp(32 * x)
    plain = F.linear(F.relu(F.linear(F.rms_norm(x.float(), (64,)), mlp.fc_w.float())).square(), mlp.proj_w.float())
    for out in (y, scaled):
        torch.testing.assert_close(out.float(), plain, rtol=2e-2, atol=2e-2 * plain.abs().max().item())


def test_the_epilogue_mlp_runs_the_fused_gemms_on_the_tokens_as_rows(monkeypatch):
    """--mlp_epilogue (the default) takes the MLP through normed_relu_square_mlp, tokens flattened to rows; without it
    the torch ops. Both paths give the same output, so an MLP that ignored the flag (the GPU losing its fused GEMMs)
    passed."""
    calls = []
    monkeypatch.setattr(medium, "normed_relu_square_mlp", lambda x, fc_w, proj_w: calls.append((x, fc_w, proj_w)) or
                        torch.ones_like(x))
    x = torch.randn(2, 16, 64, generator=torch.Generator().manual_seed(11)).bfloat16()
    mlp = medium.MLP(64, 256, epilogue=True)
    with torch.no_grad():
        assert torch.equal(mlp(x), torch.ones_like(x))
        assert not medium.MLP(64, 256, epilogue=False)(x).any()  # zero proj_w, and no call
    assert len(calls) == 1 and torch.equal(calls[0][0], x.view(32, 64))
    assert calls[0][1] is mlp.fc_w and calls[0][2] is mlp.proj_w


def test_each_block_gets_the_value_embedding_of_its_tables_layout(model, monkeypatch):
    """Block i mixes in value_embeds[value_embed_layout[i]] of the tokens (None between): the layout test checks the
    list, not what the forward does with it, and every table learns from the gradients, so a forward that handed
    every block table 0 passed."""
    tokens = packed_tokens(10)
    given, forward = [], medium.Block.forward
    monkeypatch.setattr(medium.Block, "forward", lambda self, x, x0, value_embed, *rest: given.append(value_embed) or
                        forward(self, x, x0, value_embed, *rest))
    with torch.no_grad():
        model(tokens[:-1], tokens[1:], torch.tensor(2))
        tables = [table(tokens[:-1])[None] for table in model.value_embeds]
    assert len(given) == 16
    for i, (value_embed, table) in enumerate(zip(given, medium.value_embed_layout(16))):
        assert value_embed is None if table is None else torch.equal(value_embed, tables[table]), i


def test_value_embedding_layout_and_attention_free_block():
    assert medium.value_embed_layout(16) == [0, 1, 2] + [None] * 10 + [0, 1, 2]
    gpt = medium.GPT(tiny_args())
    assert [i for i, b in enumerate(gpt.blocks) if b.attn is None] == [7]
    assert gpt.blocks[0].attn.qkvo_w.shape == (4, 64, 64)
    assert not gpt.blocks[0].attn.qkvo_w[3].any() and gpt.blocks[0].attn.qkvo_w[:3].any()
    muon_dtypes = {p.dtype for b in gpt.blocks for p in b.parameters()}
    assert muon_dtypes == {torch.bfloat16}
    assert gpt.embed.weight.dtype == gpt.value_embeds[0].weight.dtype == torch.bfloat16
    assert gpt.lm_head_w.dtype == gpt.scalars.dtype == torch.float32


def test_the_attention_free_block_is_the_one_no_attention_layer_names():
    """--no_attention_layer picks the block without attention (-1: none); the tests above ran its default, 7, so a
    model that always left out block 7 passed."""
    for layer, expected in [(3, [3]), (-1, []), (15, [15])]:
        with torch.device("meta"):
            gpt = medium.GPT(tiny_args(no_attention_layer=layer))
        assert [i for i, b in enumerate(gpt.blocks) if b.attn is None] == expected, layer


def test_the_vocabulary_is_padded_up_to_a_multiple_of_128():
    """50257 tokens make 50304 rows; a multiple of 128 stays as it is (the default's padding hid a formula that
    added a block of 128 rows there)."""
    assert [medium.padded_vocab(v) for v in (50257, 50304, 1, 128, 129)] == [50304, 50304, 128, 128, 256]


# Masks


@pytest.mark.parametrize("windowed_mask_mod", [True, False])  # False: the compiled model's, the window in the lists
@pytest.mark.parametrize("window", [1, 2, 3, 8])
def test_block_mask_and_dense_mask_match_brute_force(window, windowed_mask_mod):
    tokens = packed_tokens(window, 1024)[:1024]
    docs = (tokens == medium.EOT_TOKEN).cumsum(0)
    expected = brute_force_mask(docs, window)
    assert torch.equal(medium.dense_mask(docs, torch.tensor(window)), expected)

    mask = medium.block_masks(docs, [torch.tensor(window)], windowed_mask_mod)[0]
    q, k = torch.arange(1024)[:, None], torch.arange(1024)[None, :]
    per_element = mask.mask_mod(0, 0, q, k)
    if windowed_mask_mod:
        assert torch.equal(per_element, expected)  # the rule alone, as uncompiled flex_attention applies it
    built = torch.zeros(1024, 1024, dtype=torch.bool)
    size = medium.BLOCK_SIZE
    for q_block in range(1024 // size):
        rows = slice(q_block * size, (q_block + 1) * size)
        partial = mask.kv_indices[0, 0, q_block, :mask.kv_num_blocks[0, 0, q_block]].tolist()
        full = mask.full_kv_indices[0, 0, q_block, :mask.full_kv_num_blocks[0, 0, q_block]].tolist()
        assert not set(partial) & set(full)
        for k_block in partial:
            cols = slice(k_block * size, (k_block + 1) * size)
            built[rows, cols] = per_element[rows, cols]
        for k_block in full:
            built[rows, k_block * size:(k_block + 1) * size] = True
    assert torch.equal(built, expected)


@pytest.mark.parametrize("window", [1, 2, 3])
def test_flex_attention_with_block_mask_equals_dense_path(window):
    """Forward only (FlexAttention has no CPU backward): what --compile=false runs on a GPU against the CPU path."""
    n = 8 * medium.BLOCK_SIZE
    tokens = packed_tokens(window, n, documents=2)[:n]
    docs = (tokens == medium.EOT_TOKEN).cumsum(0)
    gen = torch.Generator().manual_seed(window)
    q, k, v = (torch.randn(1, n, 2, 32, generator=gen) for _ in range(3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "flex_attention called without torch.compile()"
        flex = medium.attend(q, k, v, medium.block_masks(docs, [torch.tensor(window)])[0], 0.12)
    dense = medium.attend(q, k, v, medium.dense_mask(docs, torch.tensor(window)), 0.12)
    torch.testing.assert_close(flex, dense, rtol=1e-5, atol=1e-5)
    whole_documents = medium.attend(q, k, v, medium.dense_mask(docs, torch.tensor(8)), 0.12)
    assert (whole_documents - dense).abs().max() > 1e-2  # the window did cut something


def test_each_layer_gets_its_long_or_short_window(model, monkeypatch):
    """And the record's logit scale, 0.12 (no test pinned it)."""
    tokens = packed_tokens(3, documents=2)  # long documents, so that the window matters
    masks, scales = [], []
    monkeypatch.setattr(medium, "attend", lambda q, k, v, mask, scale: (masks.append(mask), scales.append(scale), q)[2])
    with torch.no_grad():
        model(tokens[:-1], tokens[1:], torch.tensor(4))
    docs = (tokens[:-1] == medium.EOT_TOKEN).cumsum(0)
    long, short = brute_force_mask(docs, 4), brute_force_mask(docs, 2)
    pattern = [kind for i, kind in enumerate("LSSSLSSSSSSLSSSL") if i != 7]
    assert len(masks) == 15
    assert [("L" if torch.equal(m, long) else "S" if torch.equal(m, short) else "?") for m in masks] == pattern
    assert not torch.equal(long, short)
    assert scales == [0.12] * 15


def test_a_custom_window_pattern_gives_block_i_the_mask_of_its_ith_letter(monkeypatch):
    """--window_pattern is read from block 0 on. The record's pattern is a palindrome, so a model that read it from
    the last letter passed the test above."""
    pattern = "LLLLSSSSSSSSSSSS"
    torch.manual_seed(0)
    gpt = medium.GPT(tiny_args(window_pattern=pattern))
    tokens = packed_tokens(3, documents=2)
    masks = []
    monkeypatch.setattr(medium, "attend", lambda q, k, v, mask, scale: (masks.append(mask), q)[1])
    with torch.no_grad():
        gpt(tokens[:-1], tokens[1:], torch.tensor(4))
    docs = (tokens[:-1] == medium.EOT_TOKEN).cumsum(0)
    long, short = brute_force_mask(docs, 4), brute_force_mask(docs, 2)
    kinds = [("L" if torch.equal(m, long) else "S" if torch.equal(m, short) else "?") for m in masks]
    assert kinds == [kind for i, kind in enumerate(pattern) if i != 7]


@pytest.mark.parametrize("window, short", [(1, 1), (3, 1), (4, 2)])
def test_the_short_window_is_half_the_long_one_and_at_least_one_block(window, short):
    """At step 0 the window is one block: half of it, rounded down, would be none, and every query of an S layer
    would attend to nothing (NaN on the CPU's path) for the first steps. The tests above ran windows of 2 blocks or
    more."""
    tokens = packed_tokens(7, documents=2)[:SEQ]
    docs = (tokens == medium.EOT_TOKEN).cumsum(0)
    masks = medium.attention_masks(tokens, torch.tensor(window))
    assert torch.equal(masks["L"], brute_force_mask(docs, window))
    assert torch.equal(masks["S"], brute_force_mask(docs, short))
    assert masks["S"].any(-1).all()  # every query sees at least itself


def test_a_block_mixes_its_input_with_the_embedding_stream_by_its_two_lambdas():
    """lambdas[0] x + lambdas[1] x0 before attention and the MLP (here none, and an MLP whose zero proj_w adds
    nothing). The model's lambdas start at (1, 0), so its tests could not tell x0 from x in the second term."""
    block = medium.Block(tiny_args(), has_attention=False, rotary=None)
    generator = torch.Generator().manual_seed(8)
    x, x0 = (torch.randn(1, 16, 64, generator=generator).bfloat16() for _ in range(2))
    out = block(x, x0, None, torch.tensor([0.5, 2.0]), None, None)
    assert torch.equal(out, 0.5 * x + 2.0 * x0)


def block_case(seed):
    """A block's inputs: a stream of RMS 3 and x0 (bf16), a value embedding, attention lambdas and a dense mask of
    several documents with a window of 2 blocks."""
    generator = torch.Generator().manual_seed(seed)
    x, x0, ve = ((scale * torch.randn(1, SEQ, 64, generator=generator)).bfloat16() for scale in (3, 1, 1))
    docs = (packed_tokens(seed)[:SEQ] == medium.EOT_TOKEN).cumsum(0)
    return x, x0, ve, torch.tensor([0.7, -0.4]), medium.dense_mask(docs, torch.tensor(2))


def test_attention_is_the_heads_of_normed_rotated_q_and_k_and_normed_v_through_the_output_projection():
    """Rebuilt from its parts in fp32: rows 0-2 of qkvo_w make q, k and v of the un-normed stream, q and k RMS-normed
    and rotated, v RMS-normed and mixed with the value embedding, attention at scale 0.12, then y @ row 3. The model
    tests compare the model with itself, so QKV taken from rows 1-3 (the output weight doubling as the values')
    passed."""
    torch.manual_seed(0)
    attention = medium.CausalSelfAttention(tiny_args(), medium.Rotary(32, SEQ))
    with torch.no_grad():
        attention.qkvo_w[3].normal_(std=0.1)
    x, _, ve, lambdas, mask = block_case(11)
    with torch.no_grad():
        out = attention(x, ve, lambdas, mask)
    w = attention.qkvo_w.detach().float()
    q, k, v = (x.float() @ w[:3].flatten(0, 1).T).view(1, SEQ, 6, 32).chunk(3, dim=-2)
    cos, sin = medium.Rotary(32, SEQ).tables(SEQ)
    q, k = (medium.rotated(F.rms_norm(t, (32,)), cos, sin) for t in (q, k))
    v = 0.7 * F.rms_norm(v, (32,)) - 0.4 * ve.float().view(1, SEQ, 2, 32)
    y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), attn_mask=mask,
                                       scale=0.12).transpose(1, 2)
    expected = y.flatten(2) @ w[3]
    assert out.shape == expected.shape and out.dtype == torch.bfloat16
    assert (out.float() - expected).norm() / expected.norm() < 0.02  # bf16's rounding


@pytest.mark.parametrize("epilogue", [False, True], ids=["torch", "epilogue"])
def test_a_block_adds_attention_of_its_mixed_stream_then_the_mlp(epilogue):
    """mixed = lambdas[0] x + lambdas[1] x0, plus attention of mixed (un-normed: record 7), plus the MLP of the sum
    (which norms it), bit for bit what the block's parts give. The lambda test above has no attention, and the model
    tests compare the model with itself, so a block that dropped attention's residual passed."""
    torch.manual_seed(0)
    block = medium.Block(tiny_args(mlp_epilogue=epilogue), has_attention=True, rotary=medium.Rotary(32, SEQ))
    with torch.no_grad():
        block.attn.qkvo_w[3].normal_(std=0.1)
        block.mlp.proj_w.normal_(std=0.1)
    x, x0, ve, attn_lambdas, mask = block_case(12)
    block_lambdas = torch.tensor([0.5, 2.0])
    with torch.no_grad():
        out = block(x, x0, ve, block_lambdas, attn_lambdas, mask)
        mixed = block_lambdas[0] * x + block_lambdas[1] * x0
        after_attention = mixed + block.attn(mixed, ve, attn_lambdas, mask)
        expected = after_attention + block.mlp(after_attention)
    assert torch.equal(out, expected)
    assert (after_attention - mixed).abs().max() > 0.1 and (expected - after_attention).abs().max() > 0.1


def test_rotary_turns_the_first_half_of_the_pairs_at_the_records_frequencies_and_leaves_the_rest():
    """head_dim 32: 8 frequencies from 1 down to 1/1024 (geometric) on the first 8 of 16 pairs, the other 8 pairs
    position-free (cos 1, sin 0). The kernels' tests share these tables with their torch reference, so they did not
    pin them."""
    cos, sin = medium.Rotary(32, 64).tables(40)
    assert cos.shape == sin.shape == (40, 16)
    angles = torch.arange(40.0)[:, None] * (1 / 1024) ** (torch.arange(8.0) / 7)
    torch.testing.assert_close(cos[:, :8], angles.cos())
    torch.testing.assert_close(sin[:, :8], angles.sin())
    assert torch.equal(cos[:, 8:], torch.ones(40, 8)) and torch.equal(sin[:, 8:], torch.zeros(40, 8))


# Loss


def test_zero_head_gives_uniform_loss(model):
    tokens = packed_tokens(4)
    with torch.no_grad():
        head = model.lm_head_w.clone()
        model.lm_head_w.zero_()
        train_sum = model(tokens[:-1], tokens[1:], torch.tensor(2))
        model.eval()
        eval_mean = model(tokens[:-1], tokens[1:], torch.tensor(2))
        model.train()
        model.lm_head_w.copy_(head)
    assert eval_mean.item() == pytest.approx(math.log(50304), rel=1e-5)
    assert train_sum.item() == pytest.approx(SEQ * math.log(50304), rel=1e-5)


def test_chunked_eval_head_equals_the_training_loss(model):
    tokens = packed_tokens(5)
    with torch.no_grad():
        train_sum = model(tokens[:-1], tokens[1:], torch.tensor(3))
        model.eval()
        eval_mean = model(tokens[:-1], tokens[1:], torch.tensor(3))
        model.train()
    assert train_sum.item() / SEQ == pytest.approx(eval_mean.item(), rel=1e-5)
    assert abs(eval_mean.item() - math.log(50304)) > 0.01  # the random head really is used


def test_eval_takes_the_head_in_four_chunks_of_tokens(model, monkeypatch):
    """Validation's head runs on HEAD_CHUNKS = 4 quarters of the tokens in turn, so that no logits tensor of the whole
    sequence exists (record 7). The chunks' summed losses equal one sum, so a head taken in one piece passed."""
    tokens = packed_tokens(6)
    calls, head_loss = [], medium.GPT.head_loss
    monkeypatch.setattr(medium.GPT, "head_loss", lambda self, x, targets: calls.append((x, targets)) or
                        head_loss(self, x, targets))
    model.eval()
    try:
        with torch.no_grad():
            model(tokens[:-1], tokens[1:], torch.tensor(2))
    finally:
        model.train()
    assert medium.HEAD_CHUNKS == 4 and len(calls) == 4
    assert [targets.tolist() for _, targets in calls] == [part.tolist() for part in tokens[1:].chunk(4)]
    assert all(x.shape == (SEQ // 4, 64) for x, _ in calls)


def test_the_head_loss_is_the_summed_cross_entropy_of_the_softcapped_bf16_logits():
    """In training and in eval (the CPU's head): logits of the bf16 head, softcapped, then a summed cross entropy.
    The loss tests start from a zero head, whose logits the softcap leaves alone, and compare the model with itself,
    so a head without the softcap passed."""
    torch.manual_seed(0)
    gpt = medium.GPT(tiny_args())
    with torch.no_grad():
        gpt.lm_head_w.normal_(0, 10.0)
    generator = torch.Generator().manual_seed(12)
    x = F.rms_norm(torch.randn(32, 64, generator=generator), (64,)).bfloat16()
    targets = torch.randint(0, 50257, (32,), generator=generator, dtype=torch.int32)
    logits = F.linear(x, gpt.lm_head_w.bfloat16()).float()
    assert logits.abs().max() > 30  # the softcap bends these
    expected = F.cross_entropy(medium.softcap(logits), targets.long(), reduction="sum")
    with torch.no_grad():
        torch.testing.assert_close(gpt.head_loss(x, targets), expected)
        gpt.eval()
        torch.testing.assert_close(gpt.head_loss(x, targets), expected)


def test_attention_layers_share_one_rotary_table():
    with torch.device("meta"):
        model = medium.GPT(tiny_args())
    tables = {id(block.attn.rotary) for block in model.blocks if block.attn is not None}
    assert len(tables) == 1 and len(list(model.buffers())) == 2


def test_the_rotary_table_covers_the_longer_of_the_training_and_validation_sequences():
    """Validation sequences may be longer than training's (or shorter): the table needs rows for both. The tests ran
    equal lengths, so a table of train_seq_len rows passed."""
    for train, val in [(256, 512), (512, 256)]:
        with torch.device("meta"):
            gpt = medium.GPT(tiny_args(train_seq_len=train, val_seq_len=val))
        assert gpt.blocks[0].attn.rotary.cos.shape == (512, 16), (train, val)


# FLOPs


def test_flops_per_step_counts_six_per_matmul_parameter_and_token_plus_attention_over_the_mean_window():
    """A 4-step schedule has windows of 1728 x step / 4 tokens rounded up to blocks: 1, 4, 7, 11 (0, 432, 864 and
    1296 tokens), a mean of 128 x 23 / 4 = 736 keys per query in L layers, capped at the 512-token sequence, and
    368 in S layers."""
    args = tiny_args(num_iterations=4)
    assert [medium.window_blocks_at(step, args) for step in range(4)] == [1, 4, 7, 11]
    with torch.device("meta"):
        gpt = medium.GPT(args)
    params = 50304 * 64 + 15 * 4 * 64 * 64 + 16 * 2 * 256 * 64  # head, QKVO of the 15 attention blocks, 16 MLPs
    assert medium.matmul_params(gpt) == params == 3_989_504
    keys = 4 * 512 + 11 * 368  # L blocks 0, 4, 11, 15; S blocks but 7, which has no attention
    tokens = 4096
    matmuls = 6 * params * tokens  # 98,046,050,304
    attention = 12 * 64 * keys * tokens  # QK^T and PV, forward and backward, 64 wide: 19,176,357,888
    assert medium.flops_per_step(gpt, args, tokens) == matmuls + attention == 117_222_408_192
