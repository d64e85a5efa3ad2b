"""train_gpt_medium.py, section "MLP GEMMs with relu-square in their epilogues" (--mlp_epilogue): the Triton GEMM in
Triton's interpreter (conftest.py) against torch in float32, and its rounding in fp16 (the interpreter's TMA loads of
bf16 read garbage, so bf16 is the device's check: perf/medium_mlp_bench.py), the two ops' CPU paths,
NormedReluSquareMLP against autograd of the plain MLP of rms_norm(x) in float32, and what it keeps for the backward
(a = relu(h)^2, not h)."""

import dataclasses
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import train_gpt_medium as medium  # noqa: E402

# small tiles: 200 x 96 outputs are 7 x 2 tiles, partial at both edges; the epilogue whole, or as two 32 x 32 halves
LAUNCHES = [(32, 64, 32, 2, 4, 1, False, 1), (32, 64, 32, 2, 4, 1, True, 1), (32, 64, 32, 2, 4, 1, True, 2)]


@pytest.fixture
def interpreted(require_interpreted):
    require_interpreted(medium.relu_square_gemm_kernel)


def mlp_case(dtype, rows=200, dim=64, hidden=96, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x, grad_y = (torch.randn(rows, dim, generator=gen).to(dtype) for _ in range(2))
    fc_w = (torch.randn(hidden, dim, generator=gen) * dim ** -0.5).to(dtype)
    proj_w = (torch.randn(dim, hidden, generator=gen) * hidden ** -0.5).to(dtype)
    return x, grad_y, fc_w, proj_w


def row_scales(rows: int) -> torch.Tensor:
    return torch.rand(rows, generator=torch.Generator().manual_seed(1)) + 0.5


@pytest.mark.parametrize("launch", LAUNCHES)
def test_forward_kernel_writes_only_the_relu_square(interpreted, launch):
    x, _, fc_w, _ = mlp_case(torch.float32)
    r = row_scales(200)
    a = medium.relu_square_gemm(x, fc_w, r, launch=launch)
    h = r[:, None] * (x @ fc_w.T)
    torch.testing.assert_close(a, F.relu(h).square(), rtol=1e-5, atol=1e-5)  # every tile written, edges included
    assert (a[h < 0] == 0).all() and (h < 0).any()


@pytest.mark.parametrize("launch", LAUNCHES)
def test_backward_kernel_writes_the_gradient_at_h_from_a(interpreted, launch):
    x, grad_y, fc_w, proj_w = mlp_case(torch.float32)
    h, r = x @ fc_w.T, row_scales(200)
    grad_h = medium.relu_square_gemm(grad_y, proj_w, r, F.relu(h).square(), launch=launch)
    torch.testing.assert_close(grad_h, 2 * F.relu(h) * (grad_y @ proj_w) * r[:, None], rtol=1e-5, atol=1e-5)


def test_backward_kernel_rounds_the_product_to_the_output_dtype_before_the_epilogue(interpreted):
    """The product rounded to the output's dtype, as the plain path's GEMM output is, then times 2 sqrt(a) and r in
    float32 and rounded once. In fp16: bf16's rounds the same way (at 8 bits, not 11), but the interpreter cannot load
    bf16. Inputs on an integer grid make the GEMM exact in float32 in any order, so the kernel's result is known bit for
    bit; in the float32 tests above, a kernel that skipped the rounding, or took sqrt(a) in fp16, passed."""
    gen = torch.Generator().manual_seed(6)
    grad_y = (torch.randint(-32, 33, (200, 64), generator=gen) / 16).half()
    proj_w = torch.randint(-128, 129, (64, 96), generator=gen).half()
    a, r = (4 * torch.rand(200, 96, generator=gen)).half(), row_scales(200)
    product = (grad_y.float() @ proj_w.float()).half().float()
    assert (product != grad_y.float() @ proj_w.float()).float().mean() > 0.5  # most products lose bits to fp16
    expected = (2 * a.float().sqrt() * product * r[:, None]).half()
    assert torch.equal(medium.relu_square_gemm(grad_y, proj_w, r, a, launch=LAUNCHES[1]), expected)


def test_kernel_takes_inputs_in_any_layout(interpreted):
    """TMA descriptors need rows of unit stride, and the kernel reads row_scale as a contiguous vector: x and w laid out
    column by column (autograd's grad_y may be such a view) and a strided row_scale give, both ways, what contiguous
    ones give."""
    x, grad_y, fc_w, proj_w = mlp_case(torch.float32)
    r, a = row_scales(200), F.relu(x @ fc_w.T).square()

    def column_major(t):
        return t.T.contiguous().T

    strided_r = torch.stack([r, -r], dim=1)[:, 0]
    assert not column_major(x).is_contiguous() and strided_r.stride() == (2,)
    assert torch.equal(medium.relu_square_gemm(column_major(x), column_major(fc_w), strided_r, launch=LAUNCHES[1]),
                       medium.relu_square_gemm(x, fc_w, r, launch=LAUNCHES[1]))
    assert torch.equal(medium.relu_square_gemm(column_major(grad_y), column_major(proj_w), strided_r, a,
                                               launch=LAUNCHES[1]),
                       medium.relu_square_gemm(grad_y, proj_w, r, a, launch=LAUNCHES[1]))


def test_reciprocal_rms_is_the_scale_of_f_rms_norm_eps_included():
    """The epilogue path's row scale against the plain path's F.rms_norm, on bf16 rows from 1e-5 to 1e3 in RMS: the
    smallest ones are mostly eps (float32's), where another eps would scale them differently on the two paths."""
    x = (torch.randn(9, 64, generator=torch.Generator().manual_seed(4)) * torch.logspace(-5, 3, 9)[:, None]).bfloat16()
    torch.testing.assert_close(medium.reciprocal_rms(x)[:, None] * x.float(), F.rms_norm(x, (64,)).float(),
                               rtol=2 ** -7, atol=0)


def test_sqrt_of_bf16_a_is_relu_h_to_half_a_bf16_rounding():
    """The backward's relu(h) = sqrt(a), a = relu(h)^2 rounded to bf16 (unit roundoff 2^-8): relative error at most
    2^-9, where relu(h) rounded to bf16 itself is off by up to 2^-8."""
    x, _, fc_w, _ = mlp_case(torch.bfloat16)
    r = row_scales(200)
    h = r[:, None] * (x.float() @ fc_w.float().T)
    a = medium.mlp_up(x, fc_w, r)
    assert a.dtype == torch.bfloat16 and (a[h <= 0] == 0).all()
    relative = (a.float().sqrt() - F.relu(h)).abs() / F.relu(h).clamp_min(1e-30)
    assert relative.max().item() <= 2 ** -9 * (1 + 1e-6)
    assert (F.relu(h).bfloat16().float() - F.relu(h)).abs().div(F.relu(h).clamp_min(1e-30)).max().item() > 2 ** -9


def test_normed_relu_square_mlp_equals_autograd_of_the_plain_mlp():
    """CPU paths of the ops, bf16 as in training, x at the residual stream's scale, against autograd of the plain MLP
    in float32 on the same (bf16) values: ours rounds a, the GEMMs' outputs and the gradients to bf16 (and takes
    relu(h) as sqrt(a)), so all agree to bf16's precision."""
    x, grad_y, fc_w, proj_w = mlp_case(torch.bfloat16)
    x = x * 30
    ours = [t.clone().requires_grad_(True) for t in (x, fc_w, proj_w)]
    plain = [t.float().requires_grad_(True) for t in (x, fc_w, proj_w)]
    y = medium.NormedReluSquareMLP.apply(*ours)
    y_plain = F.linear(F.relu(F.linear(medium.rms_norm(plain[0]), plain[1])).square(), plain[2])
    torch.testing.assert_close(y.float(), y_plain, rtol=1e-2, atol=1e-2 * y_plain.abs().max().item())
    y.backward(grad_y)
    y_plain.backward(grad_y.float())
    for mine, theirs in zip(ours, plain):
        assert mine.grad.dtype == torch.bfloat16
        torch.testing.assert_close(mine.grad.float(), theirs.grad, rtol=1e-2,
                                   atol=1e-2 * theirs.grad.abs().max().item())


def test_normed_relu_square_mlp_keeps_a_not_h_for_the_backward():
    """The one hidden-width tensor kept for the backward is a = relu(h)^2 (h would be a second one, with negatives);
    the rest are x, its row scales and the weights."""
    x, _, fc_w, proj_w = mlp_case(torch.bfloat16)
    kept = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: kept.append(t) or t, lambda t: t):
        medium.NormedReluSquareMLP.apply(*(t.clone().requires_grad_(True) for t in (x, fc_w, proj_w)))
    assert sorted(tuple(t.shape) for t in kept) == [(64, 96), (96, 64), (200,), (200, 64), (200, 96)]
    a = next(t for t in kept if t.shape == (200, 96))
    torch.testing.assert_close(a, medium.mlp_up(x, fc_w, medium.reciprocal_rms(x)), rtol=0, atol=0)


def test_a_model_with_mlp_epilogue_gives_the_plain_models_loss_and_gradients():
    args = medium.Hyperparameters(model_dim=64, num_heads=2, head_dim=32, train_seq_len=256, val_seq_len=256)
    tokens = torch.randint(0, 1000, (257,), generator=torch.Generator().manual_seed(3))
    tokens[::50] = medium.EOT_TOKEN
    losses, grads = [], []
    for epilogue in (False, True):
        torch.manual_seed(0)
        model = medium.GPT(dataclasses.replace(args, mlp_epilogue=epilogue))
        with torch.no_grad():
            for block in model.blocks:
                block.mlp.proj_w.normal_(0, 0.02)  # zero at init: the MLPs would pass nothing
        loss = model(tokens[:-1], tokens[1:], torch.tensor(2))
        loss.backward()
        assert isinstance(model.blocks[0].mlp, medium.MLP) and model.blocks[0].mlp.epilogue == epilogue
        losses.append(loss.item())
        grads.append(model.blocks[0].mlp.fc_w.grad.float())
    assert losses[1] == pytest.approx(losses[0], rel=1e-3)
    torch.testing.assert_close(grads[1], grads[0], rtol=5e-2, atol=5e-2 * grads[0].abs().max().item())


@pytest.mark.parametrize("test_util", ["test_schema", "test_autograd_registration", "test_faketensor",
                                       "test_aot_dispatch_dynamic"])
@pytest.mark.parametrize("op", ["mlp_up", "mlp_grad_h"])
def test_opcheck(op, test_util):
    x, grad_y, fc_w, proj_w = mlp_case(torch.bfloat16, rows=16, dim=8, hidden=24)
    args = (x, fc_w, row_scales(16)) if op == "mlp_up" else (grad_y, proj_w, F.relu(x @ fc_w.T).square(),
                                                              row_scales(16))
    assert torch.library.opcheck(getattr(medium, op), args, test_utils=test_util) == {test_util: "SUCCESS"}
