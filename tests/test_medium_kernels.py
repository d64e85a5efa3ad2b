"""train_gpt_medium.py, section "Fused head": the Triton kernel that turns softcapped logits into their cross
entropy and overwrites them with its gradient, and the head op around it, run on CPU tensors in Triton's
interpreter (conftest.py) against F.cross_entropy(softcap(x @ w.T)) and its autograd, and the kernel's cubic 2^x
against torch.exp2. The symmetric matmul kernel, a copy of track 1's, is tested with it in test_train_gpt_kernels.py;
here, the second operand y that track 2's Gram Newton-Schulz adds to it."""

import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import train_gpt_medium as medium  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

ROWS, VOCAB, DIM = 6, 300, 64  # 300 is no multiple of any block: the last block is masked


@pytest.fixture(params=[2048, 128], ids=["one block", "three blocks"])
def interpreted(request, require_interpreted, monkeypatch):
    require_interpreted(medium.softcap_ce_kernel)
    monkeypatch.setattr(medium, "CE_BLOCK", request.param)  # several blocks: the sum and the rewrite loop


def generator(seed):
    return torch.Generator().manual_seed(seed)


def logits_case(dtype, seed=0):
    logits = (torch.randn(ROWS, VOCAB, generator=generator(seed)) * 20).to(dtype)  # spans the flat ends of the cap
    targets = torch.randint(0, VOCAB, (ROWS,), generator=generator(seed + 1))
    return logits, targets


@triton.jit
def exp2_on_fma_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, medium.exp2_on_fma(tl.load(x_ptr + offsets)))


def test_exp2_on_fma_is_within_its_cubics_error_over_the_kernels_range(require_interpreted):
    """Half of the row sum's exps: 2^x within 7.5e-5 relative (the cubic's error) over the first pass's arguments,
    capped_log2's (-21.7, 21.7), and past them. The loss test's sums of ~300 exps average the cubic's error away: its
    constant term moved to 1e-4 relative error passed it."""
    require_interpreted(exp2_on_fma_kernel)
    x = torch.linspace(-60, 60, 4096)
    out = torch.empty_like(x)
    exp2_on_fma_kernel[(1,)](x, out, BLOCK=x.numel())
    relative = (out.double() / torch.exp2(x.double()) - 1).abs()
    assert relative.max() < 7.6e-5 and relative.max() > 1e-6  # the cubic's, not exact by accident


def reference_loss_and_grad(logits, targets):
    z = logits.float().clone().requires_grad_(True)
    loss = F.cross_entropy(medium.softcap(z), targets, reduction="none")
    loss.sum().backward()
    return loss.detach(), z.grad


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_kernel_gives_each_rows_loss_and_leaves_the_gradient_in_place(interpreted, dtype):
    logits, targets = logits_case(dtype)
    expected_loss, expected_grad = reference_loss_and_grad(logits, targets)
    assert expected_grad.abs().max() > 0.1  # the comparison is not between near-zero gradients
    buffer = logits.clone()
    loss = medium.softcap_ce_in_place(buffer, targets)
    assert loss.dtype == torch.float32 and loss.shape == (ROWS,) and buffer.dtype == dtype
    torch.testing.assert_close(loss, expected_loss, rtol=1e-6, atol=1e-5)
    tolerance = dict(rtol=0, atol=1e-6) if dtype == torch.float32 else dict(rtol=2 ** -7, atol=1e-5)
    torch.testing.assert_close(buffer.float(), expected_grad, **tolerance)


def head_case(seed):
    x = F.rms_norm(torch.randn(ROWS * 4, DIM, generator=generator(seed)), (DIM,)).bfloat16()
    w = (torch.randn(VOCAB, DIM, generator=generator(seed + 1)) * 0.5).bfloat16()  # logits of several units
    targets = torch.randint(0, VOCAB, (ROWS * 4,), generator=generator(seed + 2))
    return x, w, targets


def test_head_op_matches_autograd_of_the_plain_head(interpreted):
    x, w, targets = head_case(10)
    xs = [x.clone().requires_grad_(True) for _ in range(2)]
    ws = [w.float().clone().requires_grad_(True) for _ in range(2)]
    fused = medium.head_ce(xs[0], ws[0].bfloat16(), targets)[0]
    plain = F.cross_entropy(medium.softcap(F.linear(xs[1], ws[1].bfloat16()).float()), targets, reduction="sum")
    (0.25 * fused).backward()  # the upstream gradient scales what the op computed in its forward
    (0.25 * plain).backward()
    torch.testing.assert_close(fused, plain, rtol=1e-5, atol=1e-4)
    assert xs[0].grad.dtype == torch.bfloat16 and ws[0].grad.dtype == torch.float32
    # both round the logits' gradient to bf16 (the plain path after the upstream scale, the op before it)
    for ours, theirs in [(xs[0].grad, xs[1].grad), (ws[0].grad, ws[1].grad)]:
        assert (ours.float() - theirs.float()).norm() / theirs.float().norm() < 1e-2
        assert theirs.float().norm() > 0.1


@pytest.mark.parametrize("test_util", ["test_schema", "test_autograd_registration", "test_faketensor",
                                       "test_aot_dispatch_dynamic"])
def test_opcheck(interpreted, test_util):
    x, w, targets = head_case(20)
    args = (x.requires_grad_(test_util != "test_schema"), w.requires_grad_(test_util != "test_schema"), targets)
    assert torch.library.opcheck(medium.head_ce, args, test_utils=test_util) == {test_util: "SUCCESS"}


# ----------------------------------------------------------------------------------------------
# sym_matmul's second operand: x y^T for a y that makes it symmetric (Gram Newton-Schulz's P R with P a polynomial in R)

def test_sym_matmul_fallback_takes_a_second_operand_and_mirrors_the_upper_triangle():
    x, s = torch.randn(2, 8, 4, generator=generator(20)), torch.randn(4, 4, generator=generator(21))
    torch.testing.assert_close(medium.sym_matmul(x, y=x @ (s + s.T)), x @ (s + s.T) @ x.mT)
    lopsided = x @ torch.randn(2, 8, 4, generator=generator(22)).mT  # not symmetric: as the kernel, the upper half
    assert torch.equal(medium.sym_matmul(x, y=torch.randn(2, 8, 4, generator=generator(22))),
                       lopsided.triu() + lopsided.triu(1).mT)


@pytest.mark.parametrize("m", [64, 200])  # one diagonal block; two, the second cut by the mask
def test_triton_sym_matmul_of_two_commuting_symmetric_matrices(require_interpreted, m):
    """P R as the kernel computes it, against fp64 and the fallback; y is read through its own strides (a y stored
    column by column must give x y^T, not x y)."""
    require_interpreted(medium.sym_matmul_kernel)
    x = torch.randn(2, m, 160, generator=generator(9))
    r = medium.sym_matmul_triton(x / x.norm(dim=(-2, -1), keepdim=True))
    p = medium.sym_matmul_triton(r, r, alpha=2.0315, beta=-4.7750, diagonal=3.4445)
    out = medium.sym_matmul_triton(p, y=r)
    torch.testing.assert_close(out.double(), p.double() @ r.double(), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out, medium.sym_matmul(p, y=r), rtol=1e-4, atol=1e-5)
    s = torch.randn(160, 160, generator=generator(10), dtype=torch.float64)
    s = s + s.T
    y = (x.double() @ s).float().mT.contiguous().mT  # x y^T = x s x^T, symmetric
    torch.testing.assert_close(medium.sym_matmul_triton(x, y=y).double(), x.double() @ s @ x.double().mT,
                               rtol=1e-4, atol=1e-3)
