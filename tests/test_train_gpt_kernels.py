"""train_gpt.py, the custom ops and kernels (sections "FP8 matmuls" through "Symmetric matmul kernel") and the
Newton-Schulz orthogonalisation: each against a plain float reference on CPU. The symmetric matmul kernel and the
head's choice of its fused op are checked for train_gpt_medium.py's copies too."""

import math
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from functorch.compile import aot_function, make_boxed_func
from torch._subclasses.fake_tensor import FakeTensorMode

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
import train_gpt  # noqa: E402
import train_gpt_medium  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402

DIM, VOCAB, TOKENS = 128, 384, 96
SCALES = (DIM ** 0.5 / 448, 2 ** -9, 1 / 448)  # x_s, w_s, grad_s exactly as GPT.fp8_scales computes them


def test_model_uses_these_scales():
    args = train_gpt.Hyperparameters(model_dim=DIM, num_heads=2, head_dim=64, train_seq_len=128, val_seq_len=128,
                                     vocab_size=50257)
    with torch.device("meta"):
        model = train_gpt.GPT(args)
    assert model.fp8_scales == SCALES


def head_inputs(seed=0):
    """rms-normed bf16 activations (|x| <= sqrt(DIM), as in the model) and a small fp32 head weight."""
    gen = torch.Generator().manual_seed(seed)
    x = F.rms_norm(torch.randn(TOKENS, DIM, generator=gen), (DIM,)).bfloat16()
    w = torch.randn(VOCAB, DIM, generator=gen) * 0.02
    return x, w


def through_e4m3(t, scale):
    """t rounded to the float8 e4m3 grid of the given scale, as fp32 values. The division happens in t's
    dtype (bf16 activations and gradients are divided in bf16, then rounded again), as in the op."""
    return (t / scale).to(torch.float8_e4m3fn).float() * scale


def through_e5m2(t, scale):
    return (t / scale).to(torch.float8_e5m2).float() * scale


def test_fp8_forward_matches_the_float8_rounded_reference():
    x, w = head_inputs()
    x_s, w_s, grad_s = SCALES
    out, x_f8, w_f8 = train_gpt.fp8_mm(x, w, x_s, w_s, grad_s)
    assert out.dtype == torch.bfloat16 and out.shape == (TOKENS, VOCAB)
    assert x_f8.dtype == w_f8.dtype == torch.float8_e4m3fn
    assert torch.equal(x_f8.float() * x_s, through_e4m3(x, x_s))
    assert torch.equal(w_f8.float() * w_s, through_e4m3(w, w_s))
    reference = (through_e4m3(x, x_s) @ through_e4m3(w, w_s).T).bfloat16()
    torch.testing.assert_close(out, reference, rtol=1e-2, atol=1e-3)
    assert (out.float() - reference.float()).abs().max() <= reference.float().abs().max() * 2 ** -7


def test_fp8_forward_is_close_to_the_fp32_matmul():
    x, w = head_inputs(1)
    out = train_gpt.fp8_mm(x, w, *SCALES)[0].float()
    exact = x.float() @ w.T
    relative = (out - exact).norm() / exact.norm()
    assert 1e-4 < relative < 0.08  # e4m3 keeps 3 mantissa bits: visibly rounded, but the same product


def test_fp8_backward_matches_the_e5m2_gradient_reference():
    x, w = head_inputs(2)
    x_s, w_s, grad_s = SCALES
    x.requires_grad_(True)
    w.requires_grad_(True)
    out = train_gpt.fp8_mm(x, w, x_s, w_s, grad_s)[0]
    grad = (torch.randn(TOKENS, VOCAB, generator=torch.Generator().manual_seed(3)) * 0.05).bfloat16()
    out.backward(grad)
    assert x.grad.dtype == torch.bfloat16 and w.grad.dtype == torch.float32
    g = through_e5m2(grad, grad_s)
    expected_x = (g @ through_e4m3(w.detach(), w_s)).bfloat16()
    expected_w = g.T @ through_e4m3(x.detach(), x_s)  # fp32 accumulation, no bf16 rounding
    torch.testing.assert_close(x.grad, expected_x, rtol=1e-2, atol=1e-4)
    torch.testing.assert_close(w.grad, expected_w, rtol=1e-5, atol=1e-6)
    # and the gradient is the true one up to the float8 roundings
    exact_w = grad.float().T @ x.detach().float()
    assert (w.grad - exact_w).norm() / exact_w.norm() < 0.1


def test_fp8_casts_saturate_instead_of_overflowing_to_nan_or_inf():
    """A head weight past 448 * w_s and a gradient past 57344 * grad_s clip to the largest float8 value,
    as compiled casts do (torch < 2.12's eager cast gave NaN, which stopped proxy runs at step ~250)."""
    x, w = head_inputs(5)
    x_s, w_s, grad_s = SCALES
    w[0, :4] = torch.tensor([1.0, -1.0, 3.0, 0.5])  # |w| / w_s = 512, 512, 1536 are out of e4m3 range
    w.requires_grad_(True)
    out, _, w_f8 = train_gpt.fp8_mm(x, w, x_s, w_s, grad_s)
    assert w_f8[0, :4].float().tolist() == [448.0, -448.0, 448.0, 256.0]
    assert torch.isfinite(out).all()
    grad = torch.zeros(TOKENS, VOCAB, dtype=torch.bfloat16)
    grad[0, 0] = 200.0  # / grad_s = 89600 > 57344
    out.backward(grad)
    assert torch.isfinite(w.grad).all()
    assert w.grad[0].abs().max().item() == pytest.approx(57344 * grad_s * x[0].float().abs().max().item(), rel=0.07)


def test_fp8_op_is_registered_with_autograd():
    assert hasattr(torch.ops.nanogpt, "fp8_mm") and hasattr(torch.ops.nanogpt, "fp8_mm_backward")
    x, w = head_inputs(4)
    w.requires_grad_(True)
    out = torch.ops.nanogpt.fp8_mm(x, w, *SCALES)[0]
    assert out.requires_grad and out.grad_fn is not None
    out.float().sum().backward()
    assert w.grad is not None and torch.isfinite(w.grad).all() and w.grad.abs().sum() > 0


FP8_NO_COMPARE = "CPU has no elementwise kernels for float8 tensors, which this opcheck part compares or sums"


@pytest.mark.parametrize("op, requires_grad, test_util", [
    ("fp8_mm", False, "test_schema"),
    ("fp8_mm", False, "test_autograd_registration"),
    ("fp8_mm", False, "test_faketensor"),
    ("fp8_mm", False, "test_aot_dispatch_dynamic"),
    ("fp8_mm", True, "test_autograd_registration"),
    ("fp8_mm", True, "test_faketensor"),
    pytest.param("fp8_mm", True, "test_schema", marks=pytest.mark.skip(reason=FP8_NO_COMPARE)),
    pytest.param("fp8_mm", True, "test_aot_dispatch_dynamic", marks=pytest.mark.skip(reason=FP8_NO_COMPARE)),
    ("fp8_mm_backward", False, "test_autograd_registration"),
    ("fp8_mm_backward", False, "test_faketensor"),
    ("fp8_mm_backward", False, "test_aot_dispatch_dynamic"),
    pytest.param("fp8_mm_backward", False, "test_schema", marks=pytest.mark.skip(reason=FP8_NO_COMPARE)),
])
def test_opcheck(op, requires_grad, test_util):
    x, w = head_inputs(5)
    if op == "fp8_mm":
        args = (x.requires_grad_(requires_grad), w.requires_grad_(requires_grad), *SCALES)
    else:
        _, x_f8, w_f8 = train_gpt.fp8_mm(x, w, *SCALES)
        grad_f8 = train_gpt.to_float8(torch.randn(TOKENS, VOCAB).bfloat16(), SCALES[2], torch.float8_e5m2)
        args = (grad_f8, grad_f8.T.contiguous(), x_f8.T.contiguous(), w_f8.T.contiguous(), *SCALES)
    result = torch.library.opcheck(getattr(train_gpt, op), args, test_utils=test_util)
    assert result == {test_util: "SUCCESS"}


# ----------------------------------------------------------------------------------------------
# sym_matmul (both scripts hold the same copy): sym_matmul launches the Triton kernel only for CUDA tensors (CPU
# takes a torch fallback), so the kernel is tested by calling its launcher sym_matmul_triton on CPU tensors under
# Triton's interpreter (TRITON_INTERPRET=1, set in conftest.py before triton is imported).


@pytest.fixture
def interpreted_kernel(require_interpreted):
    """Skips unless train_gpt's Triton kernels run in the interpreter."""
    require_interpreted(train_gpt.sym_matmul_kernel)


@pytest.fixture(params=[train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def interpreted_script(request, require_interpreted):
    """A script whose Triton kernels run in the interpreter."""
    require_interpreted(request.param.sym_matmul_kernel)
    return request.param


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_sym_matmul_launches_triton_only_on_cuda(monkeypatch, script):
    calls = []
    monkeypatch.setattr(script, "sym_matmul_triton", lambda *a: calls.append(a))
    x = torch.randn(2, 8, 4)
    torch.testing.assert_close(script.sym_matmul(x), x @ x.mT)
    c = torch.randn(2, 8, 8)
    c = c + c.mT  # symmetric, as in orthogonalize: track 2's fallback mirrors the upper triangle, as the kernel does
    torch.testing.assert_close(script.sym_matmul(x, c, alpha=2.0, beta=-0.5), 2 * x @ x.mT - 0.5 * c)
    torch.testing.assert_close(script.sym_matmul(x, c, alpha=2.0, beta=-0.5, diagonal=3.0),
                               2 * x @ x.mT - 0.5 * c + 3 * torch.eye(8))
    assert calls == []


def sym_matmul_launch_key(x: torch.Tensor, c: torch.Tensor | None, y: torch.Tensor | None) -> tuple:
    """What Triton specialises a build of sym_matmul_kernel on, for sym_matmul_triton's arguments: the dtype, whether c
    is given, and each int the kernel takes (sizes and strides; out is contiguous) as 1, a multiple of 16 or other;
    track 2's second operand y (x where none is given) adds its strides."""
    _, m, k = x.shape
    ints = (m, k, *x.stride(), *(() if y is None else y.stride()), m * m, m, 1)
    return x.dtype, c is not None, tuple("1" if v == 1 else "16" if v % 16 == 0 else "other" for v in ints)


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
@pytest.mark.parametrize("test_util", ["test_schema", "test_faketensor", "test_aot_dispatch_dynamic"])
def test_sym_matmul_opcheck(script, test_util):
    x = torch.randn(2, 8, 4)
    c = x @ x.mT
    cases = [((x,), {}), ((x, c), dict(alpha=2.0, beta=-0.5, diagonal=3.0))]
    if script is train_gpt_medium:  # Gram Newton-Schulz's second operand
        cases.append(((x,), dict(y=2 * x)))
    for args, kwargs in cases:
        result = torch.library.opcheck(script.sym_matmul, args, kwargs, test_utils=test_util)
        assert result == {test_util: "SUCCESS"}


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_newton_schulz_builds_launch_every_build_orthogonalize_launches(monkeypatch, script):
    """On the GPU the op hands orthogonalize's tensors to the kernel with their strides (the first iteration's x of a
    tall matrix is a transposed view): the start-up's builds, launched on Muon's shapes, must cover each
    specialisation, or training builds it inside warmup step 1."""
    keys, op = [], script.sym_matmul

    def recorded(x, c=None, alpha=1.0, beta=0.0, diagonal=0.0, **y):  # y: track 2's
        keys.append(sym_matmul_launch_key(x, c, y.get("y")))
        return op(x, c, alpha, beta, diagonal, **y)

    monkeypatch.setattr(script, "sym_matmul", recorded)
    monkeypatch.setattr(script, "sym_matmul_triton", recorded)
    # sizes whose ints fall in training's classes (track 1's gate_w: heads x model_dim / 64, wide, not multiples of 16)
    args = script.parse_args(["--device=cpu", "--model_dim=192", "--num_heads=2", "--head_dim=32"])
    muon = script.build_optimizers(script.GPT(args), args, script.Comm(0, 1))[-1]
    for group in muon.param_groups:
        script.orthogonalize(torch.randn(2, *group["params"][0].shape[-2:]))
    trained = set(keys)
    keys.clear()
    script.newton_schulz_builds(muon, torch.device("cpu"))
    assert trained <= set(keys)
    assert any(key[2][3] == "1" for key in trained) == (script is train_gpt_medium)  # track 2's tall fc_w


@pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])
def test_orthogonalize_calls_the_symmetric_matmul_as_opaque_ops_in_a_compiled_graph(script):
    """Traced into a compiled graph, the kernel would be launched through inductor's path for user Triton kernels,
    which types its float arguments fp64 and ran it 1.3-1.8x slower on the GPU (perf/NOTES.md, session 33): dynamo
    must see one op call per product: a square x takes X X^T and the polynomial at each of five steps, as does a wide x
    in track 1; track 2's Gram steps (2 + 3) take X X^T once a part, the polynomial each step, its product with the
    previous ones from the second step, and P R P (two) before each step but a part's last."""
    graphs = []

    def capture(graph_module, example_inputs):
        graphs.append(graph_module)
        return graph_module.forward

    torch._dynamo.reset()
    for shape in [(2, 8, 8), (2, 8, 16)]:
        torch.compile(script.orthogonalize, backend=capture, fullgraph=True)(torch.randn(shape))
    square, wide = ([node.target for node in graph.graph.nodes if node.op == "call_function"] for graph in graphs)
    assert square.count(script.sym_matmul._opoverload) == 2 * 5
    gram_calls = (1 + 2 + 1 + 2) + (1 + 3 + 2 + 2 * 2)
    assert wide.count(script.sym_matmul._opoverload) == (gram_calls if script is train_gpt_medium else 2 * 5)


# float32 and float16: the interpreter's tl.dot multiplies bfloat16 operands as raw uint16 bits, so the
# kernel's bfloat16 use (orthogonalize on CUDA) cannot be checked here; the kernel code is dtype-agnostic.
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("batch, m, k", [(1, 8, 8), (2, 200, 96), (1, 256, 64), (3, 130, 200)])
def test_triton_sym_matmul_equals_x_xt(interpreted_script, dtype, batch, m, k):
    gen = torch.Generator().manual_seed(m + k)
    x = torch.randn(batch, m, k, generator=gen).to(dtype)
    out = interpreted_script.sym_matmul_triton(x)
    assert out.dtype == dtype and out.shape == (batch, m, m)
    exact = x.double() @ x.double().mT
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-3, atol=0.02 * k ** 0.5)
    torch.testing.assert_close(out.double(), exact, **tol)
    # blocks below the diagonal are the mirrored ones above it, bit for bit; a diagonal block is one product, whose
    # symmetry is the matmul's (numpy's, under the interpreter: not bit-symmetric on every CPU)
    block = torch.arange(m) // 128
    mirrored = block[:, None] != block[None, :]
    assert torch.equal(out[:, mirrored], out.mT[:, mirrored])


def test_triton_sym_matmul_with_c_alpha_beta_and_strided_input(interpreted_script):
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(2, 96, 150, generator=gen).mT  # (2, 150, 96) with a non-unit column stride
    c = torch.randn(2, 150, 150, generator=gen)
    c = c + c.mT
    out = interpreted_script.sym_matmul_triton(x, c, alpha=0.5, beta=-2.0)
    torch.testing.assert_close(out, 0.5 * x @ x.mT - 2.0 * c, rtol=1e-4, atol=1e-4)


def half_fp16_step(v: torch.Tensor) -> torch.Tensor:
    """Half the spacing of float16 values at each entry of v (fp64): the most a correct rounding to fp16 moves it."""
    return torch.ldexp(torch.ones_like(v), torch.frexp(v).exponent - 12).clamp_min(2.0 ** -25)


def test_triton_sym_matmul_rounds_its_float32_result_once(interpreted_script):
    """In fp16 (bf16 on the GPU), each entry within half an fp16 step of the exact result, plus twice fp32's error
    bound for sums of K products: the kernel accumulates its K blocks (here five, the last cut by the mask) in fp32 and
    adds beta c in fp32 before the one rounding. c nearly cancels x x^T here, as the polynomial's terms partly do in
    Newton-Schulz: beta c rounded to fp16 first (Triton's product of an fp32 scalar and an fp16 block is fp16) is off
    by steps of x x^T's size, not the result's. The tests above allow fp16 results an error of 0.02 sqrt(K), which an
    accumulator rounded to fp16 after each K block met, and test c and beta in fp32 only, where beta c is fp32."""
    x = torch.randn(2, 136, 300, generator=torch.Generator().manual_seed(12)).half()
    gram, magnitudes = x.double() @ x.double().mT, x.double().abs() @ x.double().abs().mT
    c = (gram / 0.75).half()  # symmetric, as gram is
    for out, exact, magnitudes in [(interpreted_script.sym_matmul_triton(x), gram, magnitudes),
                                   (interpreted_script.sym_matmul_triton(x, c, beta=-0.75), gram - 0.75 * c.double(),
                                    magnitudes + 0.75 * c.double().abs())]:
        float32_error = 300 * 2.0 ** -24 * magnitudes
        assert ((out.double() - exact).abs() <= half_fp16_step(exact) + 2 * float32_error).all()


@pytest.mark.parametrize("m", [64, 200])  # one diagonal block; two, the second cut by the mask
def test_triton_sym_matmul_newton_schulz_step_matches_fallback(interpreted_script, m):
    """The two calls orthogonalize makes: A = X X^T, then a I + b A + c A A^T (A symmetric), a only on the diagonal."""
    x = torch.randn(2, m, 160, generator=torch.Generator().manual_seed(8))
    x = x / x.norm(dim=(-2, -1), keepdim=True)
    a = interpreted_script.sym_matmul_triton(x)
    poly = interpreted_script.sym_matmul_triton(a, a, alpha=2.0315, beta=-4.7750, diagonal=3.4445)
    expected = 2.0315 * a.double() @ a.double() - 4.7750 * a.double() + 3.4445 * torch.eye(m, dtype=torch.float64)
    torch.testing.assert_close(poly.double(), expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(poly, interpreted_script.sym_matmul(a, a, alpha=2.0315, beta=-4.7750, diagonal=3.4445),
                               rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------------------------
# orthogonalize: quintic Newton-Schulz in bf16 approximates U V^T of the SVD, with either coefficient set

# Per set: the singular values' band and the least cosine with U V^T. Jordan's quintic leaves singular values
# roughly in [0.68, 1.2]; Polar Express's last step equioscillates, mapping [1e-3, 1] into [0.859, 1.141].
BANDS = {"jordan": (0.6, 1.3, 0.97), "polar_express": (0.8, 1.2, 0.99)}


def polar_factor(g):
    u, _, vh = torch.linalg.svd(g.double(), full_matrices=False)
    return u @ vh


def cosine(a, b):
    return (a * b).sum((-2, -1)) / (a.norm(dim=(-2, -1)) * b.norm(dim=(-2, -1)))


def orthogonalize(g, name):
    return train_gpt.orthogonalize(g, *train_gpt.NS_COEFFICIENTS[name])


@pytest.mark.parametrize("name", list(BANDS))
@pytest.mark.parametrize("shape", [(3, 64, 32), (2, 32, 96), (1, 192, 48), (2, 4, 8)])
def test_orthogonalize_approximates_u_vt(shape, name):
    low, high, least_cosine = BANDS[name]
    g = torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))
    out = orthogonalize(g, name)
    assert out.dtype == torch.bfloat16 and out.shape == g.shape
    singular_values = torch.linalg.svdvals(out.double())
    assert singular_values.min() > low and singular_values.max() < high
    assert (cosine(out.double(), polar_factor(g)) > least_cosine).all()


@pytest.mark.parametrize("name", list(BANDS))
def test_orthogonalize_square_matrices_with_spread_spectrum(name):
    low, high, least_cosine = BANDS[name]
    gen = torch.Generator().manual_seed(11)
    u = torch.linalg.qr(torch.randn(2, 48, 48, generator=gen))[0]
    v = torch.linalg.qr(torch.randn(2, 48, 48, generator=gen))[0]
    spectrum = torch.logspace(0, -1.3, 48)  # condition number 20
    g = u @ torch.diag_embed(spectrum.expand(2, 48)) @ v.mT
    out = orthogonalize(g, name).double()
    singular_values = torch.linalg.svdvals(out)
    assert singular_values.min() > low and singular_values.max() < high
    assert (cosine(out, polar_factor(g)) > least_cosine).all()


@pytest.mark.parametrize("shape", [(4, 64, 32), (4, 32, 96), (2, 48, 48), (2, 128, 128), (1, 256, 64)])
def test_polar_express_is_closer_to_u_vt_than_jordan(shape):
    """On random Gaussian matrices, square ones included (their smallest singular values are near 0)."""
    g = torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape) + 1))
    exact = polar_factor(g)
    error = {name: (orthogonalize(g, name).double() - exact).norm(dim=(-2, -1)) / exact.norm(dim=(-2, -1))
             for name in BANDS}
    assert (error["polar_express"] < 0.7 * error["jordan"]).all(), error


def test_default_is_jordans_fixed_quintic_five_times_bit_for_bit():
    """The default is Jordan's quintic, the same (a, b, c) five times, each iteration (a I + b A + c A A) @ x."""
    g = torch.randn(2, 24, 40, generator=torch.Generator().manual_seed(13))
    x = g.bfloat16()
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for _ in range(5):
        a = x @ x.mT
        poly = 2.0315 * (a @ a.mT) + -4.7750 * a + 3.4445 * torch.eye(24, dtype=x.dtype)  # sym_matmul's CPU order
        x = poly @ x
    assert torch.equal(train_gpt.orthogonalize(g), x)
    assert torch.equal(orthogonalize(g, "jordan"), x)


def test_polar_express_coefficients_as_published():
    """Amsel et al. 2025 for 5 steps, safety factor 2e-2, cushion 2 (the values in modded-nanogpt and nanochat)."""
    coefficients, norm_scale = train_gpt.NS_COEFFICIENTS["polar_express"]
    assert len(coefficients) == 5 and norm_scale == 1.02
    assert coefficients[0] == (8.156554524902461, -22.48329292557795, 15.878769915207462)
    assert coefficients[-1] == (2.3465413258596377, -1.7097828382687081, 0.42323551169305323)
    y = torch.linspace(1e-3, 1, 100_001, dtype=torch.float64)
    for a, b, c in coefficients:
        y = a * y + b * y ** 3 + c * y ** 5
    # the composition maps [1e-3, 1] into [1 - e, 1 + e], touching both ends (a wrong leading digit breaks this)
    assert 0.858 < y.min() < 0.86 and 1.14 < y.max() < 1.142


@pytest.mark.parametrize("norm_scale", [1.0, 1.02, 2.0])
@pytest.mark.parametrize("shape", [(3, 8, 24), (3, 24, 8)])
def test_orthogonalize_starts_from_each_matrix_over_its_frobenius_norm_times_norm_scale(norm_scale, shape):
    """The identity step (a, b, c) = (1, 0, 0) leaves the start: each matrix over its own Frobenius norm times
    norm_scale (Polar Express's 1.02 keeps every singular value below 1 / 1.02). The tests above cannot tell 1.02
    from 1: both sets' bands and cosines hold either way."""
    sizes = torch.tensor([1e-3, 1.0, 300.0])[:, None, None]  # each matrix its own norm
    g = torch.randn(*shape, generator=torch.Generator().manual_seed(14)) * sizes
    out = train_gpt.orthogonalize(g, ((1.0, 0.0, 0.0),), norm_scale).double()
    assert out.shape == g.shape
    torch.testing.assert_close(out.norm(dim=(-2, -1)), torch.full((3,), 1 / norm_scale, dtype=torch.float64),
                               rtol=1e-2, atol=0)  # bf16 roundings: 0.6% at most here; 1.02 against 1 is 2%
    assert (cosine(out, g.double()) > 0.9999).all()


@pytest.mark.parametrize("name", list(BANDS))
def test_orthogonalize_ignores_scale_and_commutes_with_transpose(name):
    g = torch.randn(2, 40, 24, generator=torch.Generator().manual_seed(12))
    out = orthogonalize(g, name)
    assert torch.equal(orthogonalize(g.mT, name), out.mT)
    assert torch.equal(orthogonalize(g * 1024, name), out)  # a power of two scales every rounding alike
    scaled = orthogonalize(g * 1000, name)
    assert (cosine(scaled.double(), out.double()) > 0.99).all()


@pytest.mark.parametrize("name", list(BANDS))
def test_orthogonalize_of_zero_is_zero(name):
    """Muon pads its stacks with zero matrices; they must stay zero, not turn into NaN."""
    out = orthogonalize(torch.zeros(2, 16, 8), name)
    assert torch.equal(out, torch.zeros_like(out))


def test_compiled_backward_quantises_the_gradient_outside_the_opaque_op():
    """Under torch.compile the gradient's float8 cast and transpose are ops of the traced backward graph
    (so inductor can fuse them with the loss backward); the custom op receives float8 tensors. Gradients
    match eager."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._functorch.aot_autograd import make_boxed_func
    backward_graphs = []

    def keep_forward(graph, example_inputs):
        return make_boxed_func(graph.forward)

    def keep_backward(graph, example_inputs):
        backward_graphs.append(graph)
        return make_boxed_func(graph.forward)

    def loss(x, w):
        return train_gpt.fp8_mm(x, w, *SCALES)[0].float().square().sum()

    x, w = head_inputs(6)
    w_eager, w_compiled = w.clone().requires_grad_(True), w.clone().requires_grad_(True)
    loss(x, w_eager).backward()
    torch._dynamo.reset()
    compiled = torch.compile(loss, backend=aot_autograd(fw_compiler=keep_forward, bw_compiler=keep_backward))
    compiled(x, w_compiled).backward()
    torch.testing.assert_close(w_compiled.grad, w_eager.grad)
    code = backward_graphs[0].code
    assert "nanogpt.fp8_mm_backward" in code
    assert "torch.float8_e5m2" in code  # the cast is in the graph, not hidden in the op


# ----------------------------------------------------------------------------------------------
# Fused softcapped cross entropy of the FP8 head (the GPU's training path): its kernels run here under
# Triton's interpreter, against the path the CPU takes (fp8_mm, softcap, F.cross_entropy).

def head_case(seed):
    """Head inputs whose logits span the softcap's range, and targets that include the last column."""
    x, w = head_inputs(seed)
    w = w * 40  # logits of a few units: the softmax is far from uniform
    targets = torch.randint(0, VOCAB, (TOKENS,), generator=torch.Generator().manual_seed(seed), dtype=torch.int32)
    targets[-1] = VOCAB - 1
    return x, w, targets


@pytest.fixture(params=[4096, 128], ids=["one block", "three blocks"])
def interpreted_ce(request, interpreted_kernel, monkeypatch):
    monkeypatch.setattr(train_gpt, "CE_BLOCK", request.param)  # several blocks: the row sum and the gradient loop


@triton.jit
def exp2_on_fma_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    offsets = tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, train_gpt.exp2_on_fma(tl.load(x_ptr + offsets)))


def test_exp2_on_fma_is_within_its_cubics_error_over_the_kernels_range(interpreted_kernel):
    """The first pass's exps without the special-function unit: 2^x within 7.5e-5 relative (the cubic's error;
    tanh.approx moves the same exps by up to ~1.8%), integers exact, for the kernel's arguments (0 to 43.3)
    and negative ones."""
    x = torch.cat([torch.linspace(-60, 60, 4093), torch.tensor([0.0, 1.0, 43.0])])
    out = torch.empty_like(x)
    exp2_on_fma_kernel[(1,)](x, out, BLOCK=x.numel())
    relative = (out.double() / torch.exp2(x.double()) - 1).abs()
    assert relative.max() < 7.6e-5 and relative.max() > 1e-6  # the cubic's, not exact by accident
    assert relative[-3:].max() < 1e-4


def exact_logits_grad(logits, targets):
    z = logits.float().requires_grad_(True)
    loss = F.cross_entropy(train_gpt.softcap(z), targets.long(), reduction="none")
    loss.sum().backward()
    return loss.detach(), z.grad


def test_cross_entropy_kernel_gives_each_rows_loss_and_the_scaled_gradient(interpreted_ce):
    """In an fp32 buffer (the interpreter's float8 casts misround; perf/gpu_checks.py checks the float8 output on
    the GPU against torch's cast)."""
    x, w, targets = head_case(11)
    logits = train_gpt.fp8_mm(x, w, *SCALES)[0]
    expected_loss, expected_grad = exact_logits_grad(logits, targets)
    assert train_gpt.softcap(logits).max() - train_gpt.softcap(logits).min() > 5
    grad_s = SCALES[2]
    grad = torch.full((TOKENS, VOCAB), float("nan"))
    loss = train_gpt.softcap_ce_rows(logits, targets, grad_s, grad)
    # half of the row sum's exps come from a cubic (relative error 7.5e-5): the log of the sum within 7.5e-5
    torch.testing.assert_close(loss, expected_loss, rtol=0, atol=1e-4)
    assert (expected_grad / grad_s).abs().max() > 100  # a real range of values, below e5m2's 57344
    # a quarter of the second pass's exps from the cubic too: 1.07e-4 relative at most here, 9.9e-5 past the 1e-5
    # (three blocks), so 1e-4 still holds
    torch.testing.assert_close(grad, expected_grad / grad_s, rtol=1e-4, atol=1e-5)


def test_cross_entropy_kernel_clamps_the_gradient_to_the_e5m2_range(interpreted_ce):
    """A gradient past 57344 * grad_s clips to e5m2's largest value (as to_float8 does), instead of inf."""
    logits = torch.zeros(2, 8, dtype=torch.bfloat16)
    grad = torch.empty(2, 8)
    train_gpt.softcap_ce_rows(logits, torch.tensor([3, 5], dtype=torch.int32), 1e-9, grad)
    assert grad[0, 3] == -57344 and grad[1, 5] == -57344 and grad[0, 0] == 57344


def test_cross_entropy_kernel_gradient_holds_where_softmax_over_grad_s_is_below_2_to_the_minus_126(
        interpreted_ce):
    """The second pass's exps are 2^x with x = log2(softmax / grad_s): training's grad_s = 1/448 keeps x above
    log2 448 - 2 CAP_LOG2 - log2 50304 = -50.1, a grad_s of 2^100 takes half the entries below -126, where
    exp2_on_fma's exponent add wraps (unclamped: NaN and saturated entries). Row 0 has one logit at the cap and the
    others at its floor. The gradient is within 2^-125 of the exact one (the clamp's: zero in e5m2), in fp32: the
    interpreter's float8 cast takes fp32 subnormals to e5m2's smallest subnormal, 2^-16, not to zero."""
    gen = torch.Generator().manual_seed(13)
    logits = (torch.randn(TOKENS, VOCAB, generator=gen) * 20).bfloat16()
    logits[0] = -60
    logits[0, 8] = 60
    targets = torch.randint(0, VOCAB, (TOKENS,), generator=gen, dtype=torch.int32)
    grad_s = 2.0 ** 100
    x = torch.log_softmax(train_gpt.softcap(logits), dim=-1) / math.log(2) - math.log2(grad_s)
    assert (x < -126).float().mean() > 0.4 and x.max() > -110
    expected_grad = exact_logits_grad(logits, targets)[1]
    grad = torch.full((TOKENS, VOCAB), float("nan"))
    train_gpt.softcap_ce_rows(logits, targets, grad_s, grad)
    assert grad.isfinite().all()
    torch.testing.assert_close(grad, expected_grad / grad_s, rtol=1e-4, atol=2 ** -125)


def float8_both_ways_by_torch(t, scale):
    """float8_both_ways as torch's casts make it: the interpreter's own float8 cast halves entries that round up to a
    power of two (test_float8_both_ways_is_the_eager_cast_and_its_transpose), too coarse for a loss compared to 1e-5."""
    out = train_gpt.to_float8(t, scale, torch.float8_e4m3fn)
    return out, out.T.contiguous()


def test_fused_head_ce_loss_and_gradients_match_the_torch_path(interpreted_ce, monkeypatch):
    monkeypatch.setattr(train_gpt, "float8_both_ways", float8_both_ways_by_torch)
    x, w, targets = head_case(12)
    xs = [x.clone().requires_grad_(True) for _ in range(2)]
    ws = [w.clone().requires_grad_(True) for _ in range(2)]
    fused = train_gpt.fp8_head_ce(xs[0], ws[0], *train_gpt.head_weight_casts(w, SCALES[1]), targets, *SCALES)[0]
    logits = train_gpt.fp8_mm(xs[1], ws[1], *SCALES)[0]
    reference = F.cross_entropy(train_gpt.softcap(logits), targets.long(), reduction="sum")
    (0.5 * fused).backward()  # the upstream gradient scales what the op computed in its forward
    (0.5 * reference).backward()
    torch.testing.assert_close(fused, reference, rtol=1e-5, atol=1e-3)
    assert xs[0].grad.dtype == torch.bfloat16 and ws[0].grad.dtype == torch.float32
    # both quantise the gradient to e5m2 (the torch path after the upstream scale and a bf16 rounding, and the
    # interpreter misrounds a few percent of float8 casts): ~1% apart here, where a wrong scale or layout is 50% or more
    for ours, theirs in [(xs[0].grad, xs[1].grad), (ws[0].grad, ws[1].grad)]:
        assert (ours.float() - theirs.float()).norm() / theirs.float().norm() < 0.02


def test_fused_head_ce_makes_each_float8_layout_in_one_kernel(interpreted_ce, monkeypatch):
    """The FP8 gradient GEMMs take K-major operands: x and w go to float8 in both layouts from one pass each
    (float8_both_ways; w's in head_weight_casts, once a step), the float8 gradient through transpose_kernel; no torch
    transposed float8 copy (~250 us a call in session 25's profile) and no eager cast passes."""
    calls, both_ways, transposed = [], train_gpt.float8_both_ways, train_gpt.transposed
    monkeypatch.setattr(train_gpt, "float8_both_ways",
                        lambda t, scale: calls.append(("both ways", tuple(t.shape))) or both_ways(t, scale))
    monkeypatch.setattr(train_gpt, "transposed",
                        lambda t: calls.append(("transposed", tuple(t.shape))) or transposed(t))
    monkeypatch.setattr(train_gpt, "to_float8", None)  # any eager cast would fail
    x, w, targets = head_case(12)
    w_f8, w_f8_t = train_gpt.head_weight_casts(w, SCALES[1])
    train_gpt.fp8_head_ce(x, w, w_f8, w_f8_t, targets, *SCALES)
    assert calls == [("both ways", tuple(w.shape)), ("both ways", tuple(x.shape)),
                     ("transposed", (len(targets), w.size(0)))]


@pytest.mark.parametrize("dtype, scale", [(torch.bfloat16, SCALES[0]), (torch.float32, SCALES[1])], ids=["x", "w"])
def test_float8_both_ways_is_the_eager_cast_and_its_transpose(interpreted_kernel, dtype, scale):
    """Both layouts hold the same bytes, saturated past the format's range. Against to_float8 a few entries differ,
    as Triton's interpreter casts: its bf16 rounding truncates (one float8 step lower) and its float8 cast halves a
    value that rounds up to a power of two (and casts NaN to 384). perf/gpu_checks.py compares the bytes exactly."""
    t = (torch.randn(70, 130, generator=torch.Generator().manual_seed(8)) * 300 * scale).to(dtype)
    t[0, :2] = torch.tensor([1e4 * scale, -1e4 * scale]).to(dtype)
    out, out_t = train_gpt.float8_both_ways(t, scale)
    assert (out.dtype, out_t.shape) == (torch.float8_e4m3fn, (130, 70))
    assert torch.equal(out_t.view(torch.uint8), out.view(torch.uint8).T)
    assert out[0, 0].item() == 448 and out[0, 1].item() == -448
    expected = train_gpt.to_float8(t, scale, torch.float8_e4m3fn)[1:]
    step = out.view(torch.uint8)[1:].int() - expected.view(torch.uint8).int()
    halved = (out[1:].float() * 2 == expected.float()) & (expected.view(torch.uint8) & 7 == 0)  # a power of two
    assert (step != 0).float().mean() < 0.1 and ((step.abs() <= 1) | halved).all()


@pytest.mark.parametrize("dtype, scale", [(torch.bfloat16, 1 / (1 + 2 ** -10)), (torch.float32, 1 / (1 + 2 ** -10)),
                                          (torch.float32, 1024 ** 0.5 / 448)], ids=["bf16", "fp32", "fp32 at 32 / 448"])
def test_float8_both_ways_scales_by_the_fp32_reciprocal_rounding_to_bf16_only_a_bf16_input(interpreted_kernel,
                                                                                           monkeypatch, dtype, scale):
    """As to_float8 on CUDA, where torch multiplies by the scale's fp32 reciprocal in the input's dtype: a bf16
    input's product rounds to bf16 before the e4m3 cast, an fp32 input's does not. Checked before the cast, in fp32
    buffers that the launch writes instead of its e4m3 ones: the interpreter's e4m3 cast rounds ties away from zero
    and its bf16 cast truncates, so that the bf16 step never shows in its e4m3 bytes (the test above passed without
    it, and with it for an fp32 input). Inputs of four significant bits times 1 + 2^-10 lie 2^-10 above a bf16
    value, where truncation and rounding to nearest agree; at model_dim 1024's x scale, 32 / 448, the fp32
    reciprocal is not the fp64 one rounded (14 - 2^-20, not 14)."""
    fp32_outputs, kernel = [], train_gpt.float8_both_ways_kernel

    class WritingFp32:
        def __getitem__(self, grid):
            def launch(src, out, out_t, *args, **kwargs):
                fp32_outputs.append((torch.full(out.shape, float("nan")), torch.full(out_t.shape, float("nan"))))
                kernel[grid](src, *fp32_outputs[-1], *args, **kwargs)
            return launch

    monkeypatch.setattr(train_gpt, "float8_both_ways_kernel", WritingFp32())
    gen = torch.Generator().manual_seed(9)
    signs = torch.randint(0, 2, (70, 130), generator=gen) * 2 - 1
    t = (signs * torch.randint(8, 16, (70, 130), generator=gen) * 2.0 ** torch.randint(-6, 2, (70, 130),
                                                                                         generator=gen)).to(dtype)
    reciprocal = torch.tensor(1.0) / torch.tensor(scale, dtype=torch.float32)
    expected = t.float() * reciprocal
    if dtype == torch.bfloat16:
        assert reciprocal == 1 + 2 ** -10 and not torch.equal(expected, t.float())
        expected = expected.bfloat16().float()  # t itself
    elif scale != 1 / (1 + 2 ** -10):
        assert reciprocal != torch.tensor(1 / scale, dtype=torch.float32)
    train_gpt.float8_both_ways(t, scale)
    assert expected.abs().max() < 448 and len(fp32_outputs) == 1
    assert torch.equal(fp32_outputs[0][0], expected) and torch.equal(fp32_outputs[0][1], expected.T)


@pytest.mark.parametrize("script, fused_op", [(train_gpt, "fp8_head_ce"), (train_gpt_medium, "head_ce")],
                         ids=["train_gpt", "train_gpt_medium"])
def test_training_head_loss_takes_the_fused_op_only_on_cuda(monkeypatch, script, fused_op):
    calls = []
    monkeypatch.setattr(script, fused_op, lambda *a: calls.append(a))
    model = script.GPT(script.Hyperparameters(model_dim=64, num_heads=2, head_dim=32, train_seq_len=128,
                                              val_seq_len=128))
    x = F.rms_norm(torch.randn(16, 64), (64,)).bfloat16()
    loss = model.head_loss(x, torch.randint(0, 50257, (16,), dtype=torch.int32))
    assert calls == [] and loss.ndim == 0 and loss > 16 * 10  # summed, near 16 * ln(50304) at init


def test_fused_head_takes_the_steps_weight_casts_and_casts_its_own_without_them(monkeypatch):
    """Where the fused head runs (CUDA; here takes_fused_head forced on), GPT.weight_casts holds the head weight's two
    e4m3 layouts, and head_loss passes the given ones to fp8_head_ce without casting again; given None, it casts
    the weight as it is."""
    casts_made, head_calls = [], []
    monkeypatch.setattr(train_gpt, "takes_fused_head", lambda t: True)
    monkeypatch.setattr(train_gpt, "head_weight_casts", lambda w, w_s: casts_made.append((w, w_s)) or (w * 2, w.T * 2))
    monkeypatch.setattr(train_gpt, "fp8_head_ce", lambda *args: head_calls.append(args) or (args[0].sum(),))
    model = train_gpt.GPT(train_gpt.Hyperparameters(model_dim=64, num_heads=2, head_dim=32, train_seq_len=128,
                                                    val_seq_len=128, num_layers=2))
    with torch.no_grad():
        model.lm_head_w.normal_()
    x, targets = torch.randn(16, 64).bfloat16(), torch.randint(0, 50257, (16,), dtype=torch.int32)
    block_casts, head_casts = model.weight_casts()
    assert len(block_casts) == 2 and len(casts_made) == 1
    assert casts_made[0][0] is model.lm_head_w and casts_made[0][1] == model.fp8_scales[1]
    model.head_loss(x, targets, head_casts)
    assert len(casts_made) == 1 and head_calls[0][1] is model.lm_head_w
    assert head_calls[0][2] is head_casts[0] and head_calls[0][3] is head_casts[1]
    assert head_calls[0][4] is targets and head_calls[0][5:] == model.fp8_scales
    model.head_loss(x, targets)
    assert len(casts_made) == 2 and torch.equal(head_calls[1][2], model.lm_head_w * 2)


@pytest.mark.parametrize("test_util", ["test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic",
                                       pytest.param("test_schema", marks=pytest.mark.skip(reason=FP8_NO_COMPARE))])
def test_fused_head_ce_opcheck(interpreted_kernel, test_util):
    x, w, targets = head_case(13)
    casts = train_gpt.head_weight_casts(w, SCALES[1])
    args = (x, w.requires_grad_(True), *casts, targets, *SCALES)
    assert torch.library.opcheck(train_gpt.fp8_head_ce, args, test_utils=test_util) == {test_util: "SUCCESS"}


@pytest.mark.parametrize("test_util", ["test_schema", "test_faketensor", "test_aot_dispatch_dynamic"])
def test_head_weight_casts_opcheck(interpreted_kernel, test_util):
    w = head_case(13)[1]
    result = torch.library.opcheck(train_gpt.head_weight_casts, (w, SCALES[1]), test_utils=test_util)
    assert result == {test_util: "SUCCESS"}


@pytest.mark.parametrize("rows, cols", [(64, 64), (70, 130), (1, 200), (129, 3)])
def test_transpose_kernel_of_partial_blocks(interpreted_kernel, rows, cols):
    src = torch.randn(rows, cols, generator=torch.Generator().manual_seed(rows * cols))
    dst = torch.full((cols, rows), float("nan"))
    train_gpt.transpose_kernel[(-(-rows // 64), -(-cols // 64))](src, dst, rows, cols, BLOCK=64)
    assert torch.equal(dst, src.T)
    assert torch.equal(train_gpt.transposed(src), src.T)


@pytest.fixture
def scaled_mm_calls(monkeypatch) -> list:
    """train_gpt.scaled_mm wrapped to record (a's shape, b's shape, out_dtype, fast_accum) of each call: the CPU
    ignores the flag, so only the flags passed show a wrong one."""
    calls, scaled_mm = [], train_gpt.scaled_mm

    def recording_scaled_mm(a, b, a_scale, b_scale, out_dtype, fast_accum):
        calls.append((tuple(a.shape), tuple(b.shape), out_dtype, fast_accum))
        return scaled_mm(a, b, a_scale, b_scale, out_dtype, fast_accum)

    monkeypatch.setattr(train_gpt, "scaled_mm", recording_scaled_mm)
    return calls


@pytest.mark.parametrize("fused", [False, True], ids=["fp8_mm and its autograd", "fp8_head_ce"])
def test_fp8_head_fast_accumulation_only_in_the_forward(scaled_mm_calls, require_interpreted, fused):
    """The logits (sums over model_dim) take the tensor cores' fast accumulation; grad_x sums over the whole
    vocabulary and grad_w over every token, so both keep the precise one."""
    x, w, targets = head_case(14)
    w.requires_grad_(True)
    if fused:  # loss and both gradients in the op's forward
        require_interpreted(train_gpt.softcap_ce_kernel)
        train_gpt.fp8_head_ce(x, w, *train_gpt.head_weight_casts(w.detach(), SCALES[1]), targets, *SCALES)
    else:
        train_gpt.fp8_mm(x, w, *SCALES)[0].float().sum().backward()
        assert w.grad is not None
    assert scaled_mm_calls == [((TOKENS, DIM), (DIM, VOCAB), torch.bfloat16, True),  # logits
                               ((TOKENS, VOCAB), (VOCAB, DIM), torch.bfloat16, False),  # grad_x
                               ((VOCAB, TOKENS), (TOKENS, DIM), torch.float32, False)]  # grad_w


# ----------------------------------------------------------------------------------------------
# FP8 MLP matmuls (--fp8_mlp): the weights' scales from their maximum, fixed, bounded or sampled for the rest;
# plain autograd


def mlp_inputs(seed):
    """rms-normed bf16 activations and a (dim x hidden) weight, as the MLP stores both of its own."""
    gen = torch.Generator().manual_seed(seed)
    x = F.rms_norm(torch.randn(TOKENS, DIM, generator=gen), (DIM,)).bfloat16()
    return x, torch.randn(DIM, 3 * DIM, generator=gen) * 0.02


def amax_scale(t, dtype, row_step=1):
    sample, headroom = (t[::row_step], 2) if row_step > 1 else (t, 1)
    return sample.abs().max().float() * headroom / torch.finfo(dtype).max


def test_float8_with_scale_from_the_max_uses_the_whole_range_and_survives_zeros():
    x, w = mlp_inputs(0)
    for t, dtype in [(x, torch.float8_e4m3fn), (w, torch.float8_e4m3fn), (x, torch.float8_e5m2)]:
        t_f8, scale = train_gpt.to_float8_scaled(t, dtype)
        assert t_f8.dtype == dtype and scale.ndim == 0
        assert t_f8.float().abs().max() == torch.finfo(dtype).max
        assert (t_f8.float() * scale - t.float()).norm() / t.float().norm() < 0.07
    zeros_f8, _ = train_gpt.to_float8_scaled(torch.zeros(4, 4), torch.float8_e4m3fn)
    assert torch.equal(zeros_f8.float(), torch.zeros(4, 4))


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_float8_scale_from_sampled_rows_has_headroom_and_saturates_an_outlier_outside_the_sample(dtype):
    x, _ = mlp_inputs(3)
    x[5, 7] = 10 * x.abs().max()  # row 5 is not among rows 0, 16, 32, ...
    t_f8, scale = train_gpt.to_float8_scaled(x, dtype, row_step=16)
    limit = torch.finfo(dtype).max
    assert scale == 2 * x[::16].abs().max().float() / limit
    assert t_f8[5, 7].float() == limit  # saturated, not NaN
    rows = torch.arange(x.size(0)) != 5
    assert t_f8[rows].float().abs().max() <= limit / 2 * 1.3  # the sampled maximum sits a binade below the top
    rel = (t_f8[rows].float() * scale - x[rows].float()).norm() / x[rows].float().norm()
    assert rel < 0.07  # relative precision as without headroom
    assert torch.equal(train_gpt.to_float8_scaled(x, dtype, row_step=1)[1], amax_scale(x, dtype))


def fp8_mlp_leaves():
    """FP8MLP's inputs as leaf tensors that take gradients: x, fc_w, proj_w."""
    x, fc_w = mlp_inputs(1)
    _, proj_w = mlp_inputs(2)
    return tuple(t.clone().requires_grad_(True) for t in (x, fc_w, proj_w))


def fp8_mlp_reference(x, fc_w, proj_w, grad_y, row_step):
    """FP8MLP's output and gradients step by step on the float8 grids of their scales (the RMS-normed x's fixed at
    sqrt(dim) / 448, a's gradient's at its bound, proj_w's e4m3 copy's largest column sum of magnitudes, the others
    amax scales), relu(h) in the backward from a's e4m3 copy (sqrt(a)): y, grad_x, grad_fc, grad_proj. a's and h's
    gradients are on their grids in grad_y's e5m2 units times proj_w's e4m3 units, as the op rounds them."""
    e4m3, e5m2 = torch.float8_e4m3fn, torch.float8_e5m2
    x_q, fc_q = through_e4m3(x, x.size(-1) ** 0.5 / 448), through_e4m3(fc_w, amax_scale(fc_w, e4m3))
    proj_scale, g_scale = amax_scale(proj_w, e4m3), amax_scale(grad_y, e5m2, row_step)
    proj_q = through_e4m3(proj_w, proj_scale)
    a = F.relu(x_q @ fc_q).square()  # h in fp32: the up projection's epilogue never rounds it to bf16
    a_q = through_e4m3(a, amax_scale(a, e4m3, row_step))
    g_q = through_e5m2(grad_y, g_scale)
    proj_units = proj_q / proj_scale
    bound = proj_units.abs().sum(dim=0).amax()
    grad_a_units = ((g_q / g_scale) @ (proj_units * (1 / bound))).to(e5m2).float()
    grad_h_units = 2 * a_q.sqrt() * grad_a_units
    grad_h_scale = amax_scale(grad_h_units, e5m2, row_step)
    grad_h_q = (grad_h_units / grad_h_scale).to(e5m2).float() * (grad_h_scale * (g_scale * proj_scale * bound))
    return (a_q @ proj_q.T).bfloat16(), (grad_h_q @ fc_q.T).bfloat16(), x_q.T @ grad_h_q, g_q.T @ a_q


@pytest.mark.parametrize("row_step", [1, 16])
def test_fp8_mlp_matches_the_float8_rounded_reference_forward_and_backward(row_step):
    x, fc_w, proj_w = fp8_mlp_leaves()
    out = train_gpt.FP8MLP.apply(x, fc_w, proj_w, *train_gpt.mlp_weight_casts(fc_w, proj_w), row_step)
    grad_y = (torch.randn(out.shape, generator=torch.Generator().manual_seed(2)) * 1e-3).bfloat16()
    out.backward(grad_y)
    y, grad_x, grad_fc, grad_proj = fp8_mlp_reference(x.detach(), fc_w.detach(), proj_w.detach(), grad_y, row_step)
    assert out.dtype == x.grad.dtype == torch.bfloat16 and fc_w.grad.dtype == proj_w.grad.dtype == torch.float32
    for ours, theirs in zip([out, x.grad, fc_w.grad, proj_w.grad], [y, grad_x, grad_fc, grad_proj]):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5 * theirs.abs().max().item())
    exact = F.relu(x.detach().float() @ fc_w.detach()).square() @ proj_w.detach().T
    assert 1e-4 < (out.float() - exact).norm() / exact.norm() < 0.15  # rounded, but the same function


def test_mlp_weight_casts_are_both_layouts_and_scales_that_view_no_other_tensor():
    """The scales are 0-d tensors of their own: one stacked scale tensor, indexed in FP8MLP, broke inductor's GEMM
    template lowering on the GPU (a view of two elements taken as one; perf/NOTES.md session 63)."""
    _, fc_w, proj_w = fp8_mlp_leaves()
    fc_f8, fc_f8_t, proj_f8, proj_f8_t, fc_scale, proj_scale, bound = train_gpt.mlp_weight_casts(fc_w, proj_w)
    for f8, f8_t, w, scale in ((fc_f8, fc_f8_t, fc_w, fc_scale), (proj_f8, proj_f8_t, proj_w, proj_scale)):
        assert torch.equal(f8.view(torch.uint8), train_gpt.to_float8_scaled(w.detach(), torch.float8_e4m3fn)[0].view(
            torch.uint8))
        assert torch.equal(f8_t.view(torch.uint8), f8.view(torch.uint8).T) and f8_t.is_contiguous()
    for scale in (fc_scale, proj_scale, bound):
        assert scale.shape == () and scale._base is None and not scale.requires_grad
    assert bound == proj_f8.float().abs().sum(dim=0).max()


def test_grad_a_bound_is_reached_by_the_worst_gradient_row_and_nothing_overflows_e5m2():
    """a's gradient in e5m2 units is grad_y's e5m2 (at most 57,344 an entry) times proj_w's e4m3 copy over the bound:
    a gradient row of +-57,344 with the signs of the largest column reaches e5m2's largest value there, and no entry
    of a random gradient (saturated where the cast saturates) goes past it. A zero weight gives a bound of 1."""
    _, fc_w, proj_w = fp8_mlp_leaves()
    *_, proj_f8, proj_f8_t, _, _, bound = train_gpt.mlp_weight_casts(fc_w.detach(), proj_w.detach())
    largest = torch.finfo(torch.float8_e5m2).max
    column = proj_f8.float().abs().sum(dim=0).argmax()
    worst = (torch.sign(proj_f8[:, column].float()) * largest).to(torch.float8_e5m2)
    noise = (torch.randn(64, proj_f8.size(0), generator=torch.Generator().manual_seed(3)) * 3e4).clamp(-largest,
                                                                                                        largest)
    grad_y_f8 = torch.cat([worst[None], noise.to(torch.float8_e5m2)])
    grad_a = train_gpt.scaled_mm(grad_y_f8, proj_f8_t.T, 1.0, 1 / bound, torch.float8_e5m2, fast_accum=True).float()
    assert grad_a[0, column] == largest and grad_a.isfinite().all() and grad_a.abs().max() == largest
    assert train_gpt.grad_a_bound(torch.zeros_like(proj_f8)) == 1.0


def test_fp8_mlp_fast_accumulation_only_where_the_sum_is_short(scaled_mm_calls):
    """The forward and grad_a / grad_x (sums over model_dim and the hidden width) take the tensor cores' fast
    accumulation; the weight gradients, sums over every token, keep the precise one. The forward's first product is
    the up projection of the sampled rows alone (a's scale), in fp32 as the up projection's epilogue sees h; the
    second the up projection itself (fp8_relu_square_up's CPU path)."""
    x, fc_w, proj_w = fp8_mlp_leaves()
    train_gpt.FP8MLP.apply(x, fc_w, proj_w, *train_gpt.mlp_weight_casts(fc_w, proj_w), 16).float().sum().backward()
    tokens, dim, hidden = x.shape[0], x.shape[1], fc_w.shape[1]
    assert scaled_mm_calls[0] == ((tokens // 16, dim), (dim, hidden), torch.float32, True)
    calls = [(a_shape, b_shape, fast_accum) for a_shape, b_shape, _, fast_accum in scaled_mm_calls[1:]]
    assert calls == [((tokens, dim), (dim, hidden), True), ((tokens, hidden), (hidden, dim), True),  # forward
                     ((tokens, dim), (dim, hidden), True),  # grad_a
                     ((dim, tokens), (tokens, hidden), False), ((dim, tokens), (tokens, hidden), False),  # weights
                     ((tokens, hidden), (hidden, dim), True)]  # grad_x


def test_fp8_mlp_keeps_the_e4m3_a_for_the_backward_not_h():
    """The one hidden-width tensor kept is a = relu(h)^2 in e4m3, the down projection's operand (a bf16 h would be
    twice its bytes, and a second tensor of that width)."""
    x, fc_w, proj_w = fp8_mlp_leaves()
    kept = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: kept.append(t) or t, lambda t: t):
        train_gpt.FP8MLP.apply(x, fc_w, proj_w, *train_gpt.mlp_weight_casts(fc_w, proj_w), 1)
    wide = [t for t in kept if t.shape == (x.shape[0], fc_w.shape[1])]
    assert [t.dtype for t in wide] == [torch.float8_e4m3fn]
    assert wide[0].float().max() == torch.finfo(torch.float8_e4m3fn).max  # scaled by its own largest value


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
def test_float8_transposed_is_the_transposes_bytes_and_an_op_compile_can_trace(dtype):
    t = (torch.randn(48, 80, generator=torch.Generator().manual_seed(7)) * 100).to(dtype)
    out = train_gpt.float8_transposed(t)
    assert out.dtype == dtype and out.is_contiguous()
    assert torch.equal(out.view(torch.uint8), t.view(torch.uint8).T)
    for test_util in ("test_faketensor", "test_autograd_registration", "test_aot_dispatch_dynamic"):  # FP8_NO_COMPARE
        assert torch.library.opcheck(train_gpt.float8_transposed, (t,), test_utils=test_util) == {test_util: "SUCCESS"}


def traced_fp8_mlp_graphs():
    """FP8MLP's forward and backward graphs as AOTAutograd hands them to inductor (the weights' casts as inputs)."""
    graphs = {}

    def keep(name):
        def compiler(graph_module, _):
            graphs[name] = graph_module.graph
            return make_boxed_func(graph_module.forward)
        return compiler

    x, fc_w, proj_w = fp8_mlp_leaves()
    mlp = aot_function(lambda x, fc_w, proj_w, *casts: train_gpt.FP8MLP.apply(x, fc_w, proj_w, *casts, 16),
                       fw_compiler=keep("forward"), bw_compiler=keep("backward"))
    mlp(x, fc_w, proj_w, *train_gpt.mlp_weight_casts(fc_w, proj_w)).float().sum().backward()
    return graphs


def test_fp8_mlp_transposes_float8_tensors_only_through_the_opaque_op():
    """The weight gradients' operands x and grad_y in e4m3 / e5m2, transposed: x's copy made in the forward and kept
    (not x's e4m3 copy, which the backward would recompute), grad_y's in the backward, each by float8_transposed.
    A copy of a transposed float8 view in the graph is what inductor fused into the kernel making the tensor, as
    one-byte stores a row apart (perf/NOTES.md, session 67)."""
    graphs = traced_fp8_mlp_graphs()
    for name, graph in graphs.items():
        calls = [node for node in graph.nodes if node.op == "call_function"]
        assert sum(node.target == torch.ops.nanogpt.float8_transposed.default for node in calls) == 1, name
        transposed_copies = [node for node in calls if node.target == torch.ops.aten.clone.default
                             and node.args[0].target in (torch.ops.aten.permute.default, torch.ops.aten.t.default)]
        assert transposed_copies == [], name


def test_relu_h_from_the_e4m3_a_is_within_e4m3s_rounding_halved():
    """relu(h) = sqrt(a_f8 * a_scale) (relu_square_grad's, for a gradient of ones): e4m3 rounds a normal a within 1/16
    of itself, so relu(h) comes within 1 - sqrt(15/16) = 3.2% of the exact one; zero where a rounded to zero (h
    below ~0.15% of the largest, positive ones included)."""
    gen = torch.Generator().manual_seed(6)
    h = torch.randn(1024, 768, generator=gen).bfloat16()
    a_f8, a_scale = train_gpt.to_float8_scaled(F.relu(h.float()).square(), torch.float8_e4m3fn)
    relu = train_gpt.relu_square_grad(a_f8, a_scale, torch.ones_like(h)) / 2
    exact = F.relu(h.float())
    normal = a_f8.float() >= torch.finfo(torch.float8_e4m3fn).smallest_normal
    zero = a_f8.float() == 0
    error = (relu[normal] - exact[normal]).abs() / exact[normal]
    assert normal.float().mean() > 0.45 and 0.025 < error.max() <= 1 - (15 / 16) ** 0.5
    assert (relu[zero] == 0).all() and (zero & (exact > 0)).sum() > 100


def relu_square_case(rows, cols, seed):
    """fp8_relu_square_grads's inputs: a = relu(h)^2's e4m3 copy for a random h, a's gradient in e5m2 (as FP8MLP's
    GEMM writes it), and a's and h's gradient's scales, inside both formats' ranges."""
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(rows, cols, generator=gen).bfloat16()
    grad_a = (torch.randn(rows, cols, generator=gen) * 100).to(torch.float8_e5m2)
    a_scale = torch.tensor(2.0 ** -3)
    a_f8 = train_gpt.to_float8(F.relu(h.float()).square(), a_scale, torch.float8_e4m3fn)
    return a_f8, grad_a, a_scale, torch.tensor(2.0 ** -3)


@pytest.mark.parametrize("launch", [(64, 64, 4), train_gpt.RELU_SQUARE_LAUNCH])
@pytest.mark.parametrize("one_pass", [False, True], ids=["two passes", "one pass"])
@pytest.mark.parametrize("rows, cols", [(128, 256), (70, 130), (1, 3)])
def test_relu_square_kernel_writes_the_gradient_and_the_transposed_activation(interpreted_kernel, rows, cols, one_pass,
                                                                              launch):
    """In fp32 buffers, a's e4m3 values included (the interpreter's float8 casts misround; perf/gpu_checks.py checks
    the float8 outputs on the GPU against the op's torch path), with partial blocks at both edges; in one pass also
    the transposed gradient."""
    a_f8, grad_a, a_scale, grad_scale = relu_square_case(rows, cols, rows + cols)
    a = a_f8.float()
    a_t, grad_h = torch.full((cols, rows), float("nan")), torch.full((rows, cols), float("nan"))
    grad_h_t = torch.full((cols, rows), float("nan"))
    train_gpt.launch_relu_square_grads(a, grad_a, a_scale, grad_scale, a_t, grad_h, grad_h_t if one_pass else None,
                                       launch=launch)
    expected = train_gpt.relu_square_grad(a_f8, a_scale, grad_a) / grad_scale
    assert torch.equal(grad_h, expected)
    assert torch.equal(a_t, a.T)
    assert (grad_h == 0).float().mean() > 0.3 and grad_h.abs().max() > 1  # relu's zeros and real values
    if one_pass:
        assert torch.equal(grad_h_t, expected.T)
    else:
        assert grad_h_t.isnan().all()  # not written: the transpose kernel's job


def test_relu_square_kernel_moves_the_e4m3_bytes_of_a_to_a_t(interpreted_kernel):
    """With a and a_t in e4m3 (the gradient in fp32 buffers): a_t is a's bytes transposed, every finite non-negative
    e4m3 value among them (subnormals and the largest), and the gradient takes relu(h) from those values."""
    a_f8, grad_a, a_scale, grad_scale = relu_square_case(70, 130, 9)
    a_f8.view(torch.uint8)[0] = torch.arange(130, dtype=torch.uint8) % 0x7f  # 0x7f is NaN
    a_t = torch.empty(130, 70, dtype=torch.float8_e4m3fn)
    grad_h, grad_h_t = torch.empty(70, 130), torch.empty(130, 70)
    train_gpt.launch_relu_square_grads(a_f8, grad_a, a_scale, grad_scale, a_t, grad_h, grad_h_t)
    assert torch.equal(a_t.view(torch.uint8), a_f8.view(torch.uint8).T)
    expected = (train_gpt.relu_square_grad(a_f8, a_scale, grad_a) / grad_scale).clamp(-57344, 57344)
    assert torch.equal(grad_h, expected) and torch.equal(grad_h_t, expected.T)


def test_relu_square_kernel_saturates_the_gradient_at_e5m2s_largest_value(interpreted_kernel):
    a_f8, grad_a, a_scale, _ = relu_square_case(64, 64, 7)
    a = a_f8.float()
    a[0, 0], grad_a[0, 0], grad_a[0, 1], a[0, 1] = 448.0, 1.0, -1.0, 448.0
    a_t, grad_h, grad_h_t = torch.empty(64, 64), torch.empty(64, 64), torch.empty(64, 64)
    train_gpt.launch_relu_square_grads(a, grad_a, a_scale, torch.tensor(1e-4), a_t, grad_h, grad_h_t)
    assert a_t[0, 0] == 448 and grad_h[0, 0] == 57344 and grad_h[0, 1] == -57344
    assert grad_h_t[0, 0] == 57344 and grad_h_t[1, 0] == -57344


@pytest.mark.parametrize("exact", [False, True], ids=["check failed: two passes", "check exact: one pass"])
def test_the_kernel_path_takes_one_pass_only_where_the_start_up_check_found_it_exact(interpreted_kernel, monkeypatch,
                                                                                     exact):
    """relu_square_grads_triton, the op's GPU path, run on CPU tensors: one pass (no transpose kernel) or the kernel
    and the transpose kernel, as the check says for a_f8's device; the same outputs either way (a_t: a's bytes
    moved; the gradient in e5m2, which the interpreter misrounds in a few percent of the entries: compared with
    torch's casts loosely)."""
    asked, transposes = [], []
    monkeypatch.setattr(train_gpt, "one_pass_relu_square_is_exact", lambda device: asked.append(device) or exact)
    transposed = train_gpt.transposed
    monkeypatch.setattr(train_gpt, "transposed", lambda t: transposes.append(t.shape) or transposed(t))
    a_f8, grad_a, a_scale, grad_scale = relu_square_case(70, 130, 5)
    a_t, grad_h, grad_h_t = train_gpt.relu_square_grads_triton(a_f8, grad_a, a_scale, grad_scale)
    assert asked == [a_f8.device] and transposes == ([] if exact else [(70, 130)])
    assert (a_t.dtype, grad_h.dtype, grad_h_t.dtype) == (torch.float8_e4m3fn, torch.float8_e5m2, torch.float8_e5m2)
    assert torch.equal(grad_h_t.view(torch.uint8), grad_h.view(torch.uint8).T)
    theirs = train_gpt.relu_square_grads_torch(a_f8, grad_a, a_scale, grad_scale)
    assert torch.equal(a_t.view(torch.uint8), theirs[0].view(torch.uint8))
    assert (grad_h.view(torch.uint8) != theirs[1].view(torch.uint8)).float().mean() < 0.05


def test_the_start_up_checks_inputs_are_made_as_the_mlp_makes_them():
    """a's e4m3 copy of relu(h)^2 and both scales from the tensors' largest values (all rows), as FP8MLP with
    row_step 1: a's largest entry is e4m3's largest, h's gradient's largest e5m2's."""
    a_f8, grad_a, a_scale, grad_scale = train_gpt.relu_square_check_inputs(192, 384, torch.device("cpu"))
    assert (a_f8.dtype, grad_a.dtype, a_f8.shape) == (torch.float8_e4m3fn, torch.float8_e5m2, (192, 384))
    assert a_f8.float().max() == 448 and 0.4 < (a_f8.float() == 0).float().mean() < 0.6
    grad_h = train_gpt.relu_square_grad(a_f8, a_scale, grad_a)
    assert torch.equal(grad_scale, train_gpt.float8_scale(grad_h, torch.float8_e5m2, 1))
    assert (grad_h / grad_scale).abs().max() == 57344


@pytest.mark.parametrize("wrong", [None, 0, 1, 2], ids=["all equal", "a_t differs", "grad_h differs",
                                                        "grad_h_t differs"])
def test_the_start_up_check_wants_all_three_outputs_byte_for_byte(interpreted_kernel, monkeypatch, wrong):
    """The check against a reference with the interpreter's own float8 rounding (the two-pass kernel path, which the
    one pass must equal), and against the same with one byte off in one output: no output goes unchecked."""
    def reference(*args):
        outputs = train_gpt.relu_square_grads_triton(*args, one_pass=False)
        if wrong is not None:
            outputs[wrong].view(torch.uint8)[-1, -1] ^= 1
        return outputs

    monkeypatch.setattr(train_gpt, "relu_square_grads_torch", reference)
    # __wrapped__: the check itself, past functools.cache, whose answer for the CPU would outlive the test
    assert train_gpt.one_pass_relu_square_is_exact.__wrapped__(torch.device("cpu")) == (wrong is None)


def test_relu_square_op_on_the_cpu_is_the_float8_cast_of_the_same_values(monkeypatch):
    monkeypatch.setattr(train_gpt, "one_pass_relu_square_is_exact", lambda device: pytest.fail("a kernel check on CPU"))
    a_f8, grad_a, a_scale, grad_scale = relu_square_case(96, 160, 3)
    a_t, grad_h, grad_h_t = train_gpt.fp8_relu_square_grads(a_f8, grad_a, a_scale, grad_scale)
    assert (a_t.dtype, grad_h.dtype, a_t.shape, grad_h.shape) == (torch.float8_e4m3fn, torch.float8_e5m2,
                                                                   (160, 96), (96, 160))
    expected = train_gpt.relu_square_grad(a_f8, a_scale, grad_a) / grad_scale
    assert torch.equal(grad_h.float(), expected.to(torch.float8_e5m2).float())
    assert torch.equal(grad_h_t.float(), grad_h.float().T)
    assert torch.equal(a_t.view(torch.uint8), a_f8.view(torch.uint8).T)


def relu_square_up_case(rows, cols, k, seed):
    """fp8_relu_square_up's inputs, e4m3 x (rows x k) and w (cols x k) with their scales, and a's scale at a
    quarter of a's largest value over 448, so that entries past a quarter of the largest saturate; and the fp32 h."""
    gen = torch.Generator().manual_seed(seed)
    x_f8, w_f8 = (torch.randn(n, k, generator=gen).to(torch.float8_e4m3fn) for n in (rows, cols))
    x_scale, w_scale = torch.tensor(0.5), torch.tensor(2.0 ** -4)
    h = (x_f8.float() * x_scale) @ (w_f8.float() * w_scale).T
    return x_f8, w_f8, x_scale, w_scale, F.relu(h).square().amax() * 0.25 / 448, h


# small tiles: 200 x 96 outputs are 7 x 2 tiles of 32 x 64, partial at both edges (one tile a program past the
# interpreter's 4 programs); the epilogue whole, or as two 32 x 32 halves; K in two blocks or one
@pytest.mark.parametrize("launch", [(32, 64, 32, 2, 4, 1, False), (32, 64, 32, 2, 4, 1, True),
                                    (32, 64, 64, 1, 4, 1, True)])
def test_relu_square_up_kernel_is_the_gemm_with_relu_square_in_its_epilogue(interpreted_kernel, launch):
    """In an fp32 buffer (the interpreter's float8 casts misround; perf/gpu_checks.py checks the e4m3 output on the
    GPU): a = relu(h)^2 / a_scale of the fp32 product, saturating at e4m3's largest value, every tile written.
    tests/test_perf_kernel_report.py checks the GPU build's NaN handling, which the interpreter's does not show."""
    x_f8, w_f8, x_scale, w_scale, a_scale, h = relu_square_up_case(200, 96, 64, 0)
    a = train_gpt.relu_square_up_triton(x_f8, w_f8, x_scale, w_scale, a_scale, torch.float32, launch)
    expected = (F.relu(h).square() / a_scale).clamp(max=448)
    torch.testing.assert_close(a, expected, rtol=1e-5, atol=1e-5)
    assert (a[h <= 0] == 0).all() and (h < 0).any() and (a == 448).sum() > 10


def test_relu_square_up_kernel_in_e4m3_is_torchs_cast_up_to_the_interpreters_rounding(interpreted_kernel):
    x_f8, w_f8, x_scale, w_scale, a_scale, _ = relu_square_up_case(96, 128, 64, 2)
    ours = train_gpt.relu_square_up_triton(x_f8, w_f8, x_scale, w_scale, a_scale,
                                           launch=(32, 64, 32, 2, 4, 1, True))
    theirs = train_gpt.relu_square_up_torch(x_f8, w_f8, x_scale, w_scale, a_scale)
    assert ours.dtype == theirs.dtype == torch.float8_e4m3fn
    assert float8_steps_apart(ours, theirs).all() and (ours.float() == 448).sum() > 10


def test_relu_square_up_op_on_the_cpu_is_the_e4m3_cast_of_the_fp32_product():
    x_f8, w_f8, x_scale, w_scale, a_scale, h = relu_square_up_case(48, 80, 32, 3)
    a_f8 = train_gpt.fp8_relu_square_up(x_f8, w_f8, x_scale, w_scale, a_scale)
    expected = (F.relu(h).square() / a_scale).clamp(max=448).to(torch.float8_e4m3fn)
    assert a_f8.shape == (48, 80) and torch.equal(a_f8.view(torch.uint8), expected.view(torch.uint8))


@pytest.mark.parametrize("fp8_mlp, fp8_qkv", [(True, False), (False, True), (True, True), (False, False)])
def test_the_start_up_builds_the_e4m3_transpose_wherever_an_fp8_projection_takes_it(fp8_mlp, fp8_qkv):
    """FP8MLP's float8_transposed of x and fp8_qkv_weight_grad's copy of its gradient are one e4m3 build, made once
    whichever of the two runs; the e5m2 build (the head's gradient, FP8MLP's grad_y) always."""
    args = train_gpt.Hyperparameters(model_dim=DIM, num_heads=2, head_dim=64, fp8_mlp=fp8_mlp, fp8_qkv=fp8_qkv)
    transposes = [launch.args[0].dtype for launch in train_gpt.tiny_kernel_launches(args, torch.device("cpu"))
                  if launch.func is train_gpt.transposed]
    assert transposes == [torch.float8_e5m2] + [torch.float8_e4m3fn] * (fp8_mlp or fp8_qkv)


@pytest.mark.parametrize("capability, lacks", [((8, 9), True), ((9, 0), False), ((10, 0), False)])
def test_gpus_before_sm_90_lack_the_up_projections_tma_and_build_no_kernel_for_it(monkeypatch, capability, lacks):
    """sm_89 has FP8 tensor cores but no TMA: the op takes torch's path there, and the start-up builds no GEMM."""
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    assert train_gpt.lacks_tma.__wrapped__(torch.device("cuda")) == lacks
    assert not train_gpt.lacks_tma.__wrapped__(torch.device("cpu"))
    monkeypatch.setattr(train_gpt, "lacks_tma", lambda device: lacks)
    args = train_gpt.Hyperparameters(model_dim=DIM, num_heads=2, head_dim=64)
    launched = [launch.func for launch in train_gpt.tiny_kernel_launches(args, torch.device("cpu"))]
    assert (train_gpt.relu_square_up_triton in launched) == (not lacks)
    assert train_gpt.one_pass_relu_square_is_exact in launched


@pytest.mark.parametrize("test_util", ["test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic",
                                       pytest.param("test_schema", marks=pytest.mark.skip(reason=FP8_NO_COMPARE))])
def test_relu_square_up_opcheck(test_util):
    result = torch.library.opcheck(train_gpt.fp8_relu_square_up, relu_square_up_case(32, 48, 32, 4)[:5],
                                   test_utils=test_util)
    assert result == {test_util: "SUCCESS"}


@pytest.mark.parametrize("test_util", ["test_autograd_registration", "test_faketensor", "test_aot_dispatch_dynamic",
                                       pytest.param("test_schema", marks=pytest.mark.skip(reason=FP8_NO_COMPARE))])
def test_relu_square_opcheck(test_util):
    args = relu_square_case(32, 48, 4)
    result = torch.library.opcheck(train_gpt.fp8_relu_square_grads, args, test_utils=test_util)
    assert result == {test_util: "SUCCESS"}


def test_fp8_mlp_is_fp8_in_training_only_and_learns():
    torch.manual_seed(0)
    plain, fp8 = train_gpt.MLP(DIM, 4 * DIM), train_gpt.MLP(DIM, 4 * DIM, fp8=True, amax_row_step=16)
    with torch.no_grad():
        plain.proj_w.normal_(std=0.02)
    fp8.load_state_dict(plain.state_dict())
    x = F.rms_norm(torch.randn(2, TOKENS // 2, DIM), (DIM,)).bfloat16()
    target = torch.randn(2, TOKENS // 2, DIM).bfloat16()
    trained, reference = fp8(x), plain(x)
    assert trained.shape == x.shape and not torch.equal(trained, reference)
    assert (trained.float() - reference.float()).norm() / reference.float().norm() < 0.1
    fp8.eval()
    assert torch.equal(fp8(x), reference)  # validation uses the bf16 weights as they are
    fp8.train()
    optimizer = torch.optim.SGD(fp8.parameters(), lr=0.5)
    losses = []
    for _ in range(5):
        loss = (fp8(x).float() - target.float()).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]


def test_rowwise_float8_scales_each_row_to_e4m3s_largest_value():
    t = torch.randn(6, DIM).bfloat16() * torch.arange(1, 7)[:, None]
    t_f8, scale = train_gpt.rowwise_float8(t)
    assert t_f8.dtype == torch.float8_e4m3fn and scale.shape == (6, 1)
    assert torch.equal(t_f8.float().abs().amax(dim=1), torch.full((6,), 448.0))
    torch.testing.assert_close(t_f8.float() * scale, t.float(), rtol=2 ** -3, atol=0)  # e4m3: 3 mantissa bits


def test_rowwise_float8_of_an_all_zero_row_is_zeros_with_a_finite_positive_scale():
    """A token whose gradient is zero throughout (every token's, at init, where the head is zero): its scale, the
    row's maximum over 448, is 0, and 0 / 0 made the row NaN in e4m3, which the GEMMs then spread to every gradient.
    The scale's floor keeps the row at zero and the other rows as they were."""
    t = torch.randn(4, DIM).bfloat16()
    t[2] = 0
    t_f8, scale = train_gpt.rowwise_float8(t)
    assert torch.isfinite(scale).all() and (scale > 0).all()
    assert torch.isfinite(t_f8.float()).all() and torch.equal(t_f8[2].float(), torch.zeros(DIM))
    rows = torch.tensor([0, 1, 3])
    assert torch.equal(t_f8[rows].view(torch.uint8), train_gpt.rowwise_float8(t[rows])[0].view(torch.uint8))
    zeros_f8, zeros_scale = train_gpt.rowwise_float8(torch.zeros(3, DIM).bfloat16())
    assert torch.isfinite(zeros_scale).all() and torch.equal(zeros_f8.float(), torch.zeros(3, DIM))


def fp8_attention_case(seed: int = 3, heads: int = 2, head_dim: int = 32):
    """x (batch x tokens x DIM, normed, bf16), the QKV weight (fp32), rotary tables, lambdas, a value embedding, and
    incoming gradients for q, k and v."""
    gen = torch.Generator().manual_seed(seed)
    x = F.rms_norm(torch.randn(1, TOKENS, DIM, generator=gen), (DIM,)).bfloat16()
    w = torch.randn(3 * heads * head_dim, DIM, generator=gen) * DIM ** -0.5
    cos, sin = train_gpt.Rotary(head_dim, 256).tables(TOKENS)
    ve = torch.randn(1, TOKENS, heads, head_dim, generator=gen).bfloat16()
    grads = tuple((torch.randn(1, TOKENS, heads, head_dim, generator=gen) * 1e-3).bfloat16() for _ in range(3))
    return x, w, cos, sin, torch.tensor([0.7, -0.4]), ve, grads


def test_fp8_attention_inputs_forward_and_input_gradient_are_rowwise_fp8_products():
    """--fp8_qkv: q, k, v are attention_inputs of the rowwise float8 product; x's gradient is the rowwise float8
    product of qkv's bf16 gradient and w (rounded there, not equal to bf16's); w's is the float8 product of that
    rowwise gradient and the forward's rowwise e4m3 x with each token's gradient scale on x's row, cast to e4m3
    again (fp8_qkv_weight_grad); the lambdas' and ve's gradients are exactly the bf16 path's."""
    x, w, cos, sin, lambdas, ve, grads = fp8_attention_case()
    leaves = [t.clone().requires_grad_() for t in (x, w, lambdas, ve)]
    outputs = train_gpt.fp8_attention_inputs(leaves[0], leaves[1], cos, sin, leaves[2], leaves[3], 32,
                                             *train_gpt.qkv_weight_casts(leaves[1]))
    torch.autograd.backward(outputs, grads)
    (x_f8, x_s), (w_f8, w_s) = train_gpt.rowwise_float8(x.flatten(0, 1)), train_gpt.rowwise_float8(w)
    qkv = ((x_f8.float() * x_s) @ (w_f8.float() * w_s).T).bfloat16().view(1, TOKENS, 6, 32).requires_grad_()
    reference = [t.clone().requires_grad_() for t in (lambdas, ve)]
    expected = train_gpt.attention_inputs(qkv, cos, sin, *reference)
    assert all(torch.equal(ours, theirs) for ours, theirs in zip(outputs, expected))
    torch.autograd.backward(expected, grads)
    grad_qkv = qkv.grad.flatten(-2).flatten(0, 1)
    (g_f8, g_s), (wt_f8, wt_s) = train_gpt.rowwise_float8(grad_qkv), train_gpt.rowwise_float8(w.T.contiguous())
    assert torch.equal(leaves[0].grad.flatten(0, 1), ((g_f8.float() * g_s) @ (wt_f8.float() * wt_s).T).bfloat16())
    bf16_grad_x = grad_qkv @ w.bfloat16()
    assert 1e-3 < (leaves[0].grad.flatten(0, 1) - bf16_grad_x).float().norm() / bf16_grad_x.float().norm() < 0.06
    x_total_scale = (g_s * x_s).amax()
    x_f8_scaled = train_gpt.to_float8(x_f8.float() * (g_s * x_s / x_total_scale), 1.0, torch.float8_e4m3fn)
    torch.testing.assert_close(leaves[1].grad, g_f8.float().T @ (x_f8_scaled.float() * x_total_scale), rtol=1e-5,
                               atol=1e-9)
    bf16_grad_w = (grad_qkv.T @ x.flatten(0, 1)).float()
    assert 1e-3 < (leaves[1].grad - bf16_grad_w).norm() / bf16_grad_w.norm() < 0.06
    assert torch.equal(leaves[2].grad, reference[0].grad) and torch.equal(leaves[3].grad, reference[1].grad)


def row_scale_pair(rows: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Two positive fp32 scales per row (rows x 1), as a gradient's and x's rowwise scales are."""
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(rows, 1, generator=gen) + 0.01, torch.rand(rows, 1, generator=gen) * 3 + 0.01


@pytest.mark.parametrize("rows, cols, launch", [(70, 130, (64, 4)), (16, 64, (64, 4)), (33, 20, (16, 2))])
@pytest.mark.parametrize("src_dtype", [torch.float8_e4m3fn, torch.bfloat16])
def test_row_scaled_transposed_kernel_is_the_scaled_rows_transposed_and_saturated(interpreted_kernel, rows, cols,
                                                                                 launch, src_dtype):
    """In fp32 (the interpreter's float8 casts misround): every entry times its row's multiplier (the two scales'
    product over the total, rounded as torch rounds it: the same bits), clamped to e4m3's range, in the transposed
    place; partial blocks both ways; from training's e4m3 rows and from bf16."""
    gen = torch.Generator().manual_seed(11)
    t = torch.randn(rows, cols, generator=gen).to(src_dtype)
    scales, other_scales = row_scale_pair(rows, 12)
    scales[0] = 1e4  # row 0 saturates
    total = torch.tensor(0.0123)
    out_t = train_gpt.row_scaled_transposed(t, scales, other_scales, total, torch.float32, launch)
    assert out_t.shape == (cols, rows)
    assert torch.equal(out_t, (t.float() * (scales * other_scales / total)).clamp(-448, 448).T)
    assert out_t[:, 0].abs().max() == 448


def test_row_scaled_transposed_kernel_in_e4m3_is_torchs_cast_up_to_the_interpreters_rounding(interpreted_kernel):
    t = torch.randn(70, 130, generator=torch.Generator().manual_seed(12)).bfloat16()
    scales, other_scales = row_scale_pair(70, 13)
    total = torch.tensor(0.05)
    out_t = train_gpt.row_scaled_transposed(t, scales, other_scales, total)
    expected = train_gpt.to_float8(t.float() * (scales * other_scales / total), 1.0, torch.float8_e4m3fn).T
    assert out_t.dtype == torch.float8_e4m3fn and float8_steps_apart(out_t, expected).all()
    assert (out_t.view(torch.uint8) != expected.view(torch.uint8)).float().mean() < 0.1


@pytest.mark.parametrize("rows, launch", [(49, (16, 2)), (16, (16, 2)), (3, (8, 1)), (300, (128, 4))])
def test_largest_product_kernel_is_torchs_clamped_amax(interpreted_kernel, rows, launch):
    """The largest a * b over rows (several loop iterations, a partial last one, a row count under the block) and the
    floor when every product is below it."""
    a, b = row_scale_pair(rows, 14)
    a[rows // 2] = 5.0  # the largest product inside, not at the ends
    assert torch.equal(train_gpt.largest_product(a, b, 1e-30, launch), (a * b).amax().clamp_min(1e-30))
    assert train_gpt.largest_product(a * 0, b, 1e-30, launch).item() == pytest.approx(1e-30)


def test_largest_product_kernel_keeps_nan_as_amax_does(interpreted_kernel):
    a, b = row_scale_pair(40, 15)
    a[25] = float("nan")
    assert (a * b).amax().isnan() and train_gpt.largest_product(a, b, 1e-30, (16, 2)).isnan()


def test_qkv_weight_grads_gpu_path_makes_the_torch_paths_scaled_copy(interpreted_kernel):
    """fp8_qkv_weight_grad's GPU path (largest_product, then row_scaled_transposed with the two scales) gives the
    torch path's total and x's scaled copy bit for bit (weight_grad_x_scales's ops, in fp32)."""
    grad = torch.randn(50, 96, generator=torch.Generator().manual_seed(16)) * 2.0 ** torch.arange(-25, 25)[:, None]
    x = torch.randn(50, 64, generator=torch.Generator().manual_seed(17)).bfloat16()
    (_, grad_scale), (x_f8, x_scale) = train_gpt.rowwise_float8(grad), train_gpt.rowwise_float8(x)
    total, multipliers = train_gpt.weight_grad_x_scales(grad_scale, x_scale)
    ours = train_gpt.largest_product(grad_scale, x_scale, train_gpt.WEIGHT_GRAD_X_SCALE_FLOOR, (16, 2))
    assert torch.equal(ours, total)
    x_t = train_gpt.row_scaled_transposed(x_f8.float(), grad_scale, x_scale, ours, torch.float32, (16, 2))
    assert torch.equal(x_t, (x_f8.float() * multipliers).clamp(-448, 448).T)


@pytest.mark.parametrize("rows, cols, launch", [(37, 2, (16, 2)), (8, 2, (16, 1)), (5, 72, (256, 4)),
                                                (300, 3, (64, 2))])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_column_sums_kernel_is_the_sums_along_the_rows(interpreted_kernel, rows, cols, launch, dtype):
    """Several loop iterations and a partial last one, fewer rows than a block, columns padded to a power of two (72
    to 128, 3 to 4); the sums in the dtype asked for."""
    parts = torch.randn(rows, cols, generator=torch.Generator().manual_seed(18)) + torch.arange(cols)
    sums = train_gpt.column_sums(parts, dtype, launch)
    assert sums.dtype == dtype and sums.shape == (cols,)
    rtol = 1e-5 if dtype == torch.float32 else 2 ** -7  # the interpreter's bf16 casts misround by a step
    torch.testing.assert_close(sums.float(), parts.sum(0), rtol=rtol, atol=1e-5)


def gate_case(tokens: int, heads: int, dims: int, dtype=torch.float32):
    """The gate's input (tokens x dims), weight (heads x dims) and the logits' gradient (tokens x heads)."""
    gen = torch.Generator().manual_seed(19)
    return (torch.randn(tokens, dims, generator=gen).to(dtype), torch.randn(heads, dims, generator=gen).to(dtype),
            torch.randn(tokens, heads, generator=gen).to(dtype))


@pytest.mark.parametrize("tokens, heads, dims, launch", [(37, 6, 12, (16, 2)), (64, 6, 12, (64, 4)),
                                                         (5, 2, 1, (16, 1)), (40, 8, 16, (8, 1))])
def test_gate_logits_kernels_are_the_linear_layers_products(interpreted_kernel, tokens, heads, dims, launch):
    """In fp32: the logits x @ w.T, x's gradient grad @ w and w's gradient grad.T @ x (the programs' parts summed by
    column_sums); a partial last block of tokens, heads and dims padded to powers of two (6 to 8, 12 to 16), one dim
    (a tiny model's gate)."""
    x, w, grad = gate_case(tokens, heads, dims)
    logits = train_gpt.gate_logits_triton(x, w, launch)
    assert logits.shape == (tokens, heads) and logits.dtype == torch.float32
    torch.testing.assert_close(logits, x @ w.T, rtol=1e-5, atol=1e-5)
    grad_x, grad_w = train_gpt.gate_logits_backward_triton(grad, x, w, launch)
    torch.testing.assert_close(grad_x, grad @ w, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(grad_w, grad.T @ x, rtol=1e-5, atol=1e-5)


def test_gate_logits_kernels_store_in_the_inputs_dtype(interpreted_kernel):
    """Training's bf16: the logits and x's gradient in bf16 and w's in w's dtype, each within bf16's rounding (one
    step more for the interpreter's casts) of the fp32 products."""
    x, w, grad = gate_case(50, 6, 12, torch.bfloat16)
    logits = train_gpt.gate_logits_triton(x, w)
    grad_x, grad_w = train_gpt.gate_logits_backward_triton(grad, x, w)
    for ours, exact in [(logits, x.float() @ w.float().T), (grad_x, grad.float() @ w.float()),
                        (grad_w, grad.float().T @ x.float())]:
        assert ours.dtype == torch.bfloat16
        torch.testing.assert_close(ours.float(), exact, rtol=2 ** -7, atol=2 ** -7)


def test_gate_logits_op_on_the_cpu_is_the_linear_layer_with_its_gradients():
    """The op's torch path gives F.linear's logits and autograd's gradients bit for bit (bf16, as in training)."""
    x, w, grad = gate_case(20, 6, 12, torch.bfloat16)
    ours = [t.clone().requires_grad_() for t in (x, w)]
    theirs = [t.clone().requires_grad_() for t in (x, w)]
    logits = train_gpt.gate_logits(*ours)
    expected = F.linear(*theirs)
    assert torch.equal(logits, expected)
    logits.backward(grad), expected.backward(grad)
    assert torch.equal(ours[0].grad, theirs[0].grad) and torch.equal(ours[1].grad, theirs[1].grad)


@pytest.mark.parametrize("test_util", ["test_schema", "test_autograd_registration", "test_faketensor",
                                       "test_aot_dispatch_dynamic"])
def test_gate_logits_opcheck(test_util):
    x, w, _ = gate_case(12, 6, 12)
    args = (x.requires_grad_(), w.requires_grad_())
    assert torch.library.opcheck(train_gpt.gate_logits, args, test_utils=test_util) == {test_util: "SUCCESS"}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("test_util", ["test_schema", "test_faketensor", "test_aot_dispatch_dynamic"])
def test_gate_logits_backward_opcheck(test_util, dtype):
    """The backward op's fake gradients (what the compiled backward plans for) in the real ones' dtypes, training's
    bf16 included: the forward's opcheck runs in fp32, where a fake w gradient fixed to fp32 passed."""
    x, w, grad = gate_case(12, 6, 12, dtype)
    result = torch.library.opcheck(train_gpt.gate_logits_backward, (grad, x, w), test_utils=test_util)
    assert result == {test_util: "SUCCESS"}


def nan_padded(t: torch.Tensor, pad: int = 256) -> torch.Tensor:
    """t's values in a buffer that goes on with pad NaNs: a kernel's read past t's end shows in its output."""
    buffer = torch.full((t.numel() + pad,), float("nan"), dtype=t.dtype)
    buffer[:t.numel()] = t.flatten()
    return buffer[:t.numel()].view(t.shape)


def test_gate_logits_kernels_read_nothing_past_their_inputs(interpreted_kernel):
    """x, w and the logits' gradient followed in memory by NaN, heads and dims padded to powers of two (6 to 8, 12 to
    16), a partial last block of tokens: a load whose mask lost its dims, heads or tokens term reads the next row's
    entries, which the other operand's masked zeros cancel, but past the last row it reads NaN, and NaN times zero is
    NaN. Without the padding such mutations passed, or failed only where the memory past a tensor held NaN or inf."""
    x, w, grad = (nan_padded(t) for t in gate_case(37, 6, 12))
    logits = train_gpt.gate_logits_triton(x, w, (16, 2))
    grad_x, grad_w = train_gpt.gate_logits_backward_triton(grad, x, w, (16, 2))
    for ours, exact in [(logits, x @ w.T), (grad_x, grad @ w), (grad_w, grad.T @ x)]:
        torch.testing.assert_close(ours, exact, rtol=1e-5, atol=1e-5)


def test_fp8_qkv_weight_grad_moves_each_tokens_gradient_scale_onto_x():
    """Tokens whose gradients and inputs differ by 2^10 in size: the gradient's rowwise e4m3 values against x's
    rowwise e4m3 copy with each token's gradient and x scales on its row give the weight gradient to e4m3's
    precision (a scale applied to the wrong operand, or left out, is off by orders of magnitude); x's largest scaled
    entry reaches 448."""
    gen = torch.Generator().manual_seed(14)
    x = torch.randn(TOKENS, DIM, generator=gen) * 2.0 ** torch.randint(-10, 1, (TOKENS, 1), generator=gen)
    grad = torch.randn(TOKENS, 3 * 64, generator=gen) * 2.0 ** torch.randint(-10, 1, (TOKENS, 1), generator=gen)
    grad_f8, grad_scale = train_gpt.rowwise_float8(grad.bfloat16())
    x_f8, x_scale = train_gpt.rowwise_float8(x.bfloat16())
    ours = train_gpt.fp8_qkv_weight_grad(grad_f8, grad_scale, x_f8, x_scale)
    exact = grad.bfloat16().double().T @ x.bfloat16().double()
    assert ours.dtype == torch.float32 and ours.shape == (3 * 64, DIM)
    assert (ours.double() - exact).norm() / exact.norm() < 0.05
    multipliers = train_gpt.weight_grad_x_scales(grad_scale, x_scale)[1]
    assert (x_f8.float() * multipliers).abs().max().item() == pytest.approx(448, rel=1e-2)


def test_fp8_attention_inputs_keeps_xs_e4m3_copy_not_x_for_the_backward():
    """The backward's saved tensors hold x's rowwise e4m3 copy and scales (half of x's bytes), and no bf16 tensor of
    x's size."""
    x, w, cos, sin, lambdas, ve, _ = fp8_attention_case()
    saved = []
    with torch.autograd.graph.saved_tensors_hooks(lambda t: saved.append(t) or t, lambda t: t):
        train_gpt.fp8_attention_inputs(x.requires_grad_(), w.requires_grad_(), cos, sin, lambdas, ve, 32,
                                       *train_gpt.qkv_weight_casts(w))
    x_f8, x_scale = train_gpt.rowwise_float8(x.detach().flatten(0, 1))
    assert any(t.dtype == torch.float8_e4m3fn and torch.equal(t.view(torch.uint8), x_f8.view(torch.uint8))
               for t in saved)
    assert any(torch.equal(t, x_scale) for t in saved if t.shape == x_scale.shape)
    assert not any(t.dtype == torch.bfloat16 and t.numel() == x.numel() for t in saved)


@pytest.mark.parametrize("test_util", ["test_faketensor", "test_aot_dispatch_dynamic",
                                       pytest.param("test_schema", marks=pytest.mark.skip(reason=FP8_NO_COMPARE))])
def test_fp8_qkv_weight_grad_opcheck(test_util):
    x = F.rms_norm(torch.randn(TOKENS, DIM), (DIM,)).bfloat16()
    grad_f8, grad_scale = train_gpt.rowwise_float8(torch.randn(TOKENS, 3 * 64).bfloat16())
    args = (grad_f8, grad_scale, *train_gpt.rowwise_float8(x))
    assert torch.library.opcheck(train_gpt.fp8_qkv_weight_grad, args, test_utils=test_util) == {test_util: "SUCCESS"}


def fp8_op_case(name: str) -> tuple:
    """(op, args, differentiable) for one of train_gpt.py's FP8 custom ops, its inputs as training makes them."""
    x, w = head_inputs(21)
    if name == "fp8_mm":
        return train_gpt.fp8_mm, (x.requires_grad_(), w.requires_grad_(), *SCALES), True
    if name == "fp8_mm_backward":
        _, x_f8, w_f8 = train_gpt.fp8_mm(x, w, *SCALES)
        grad_f8 = train_gpt.to_float8(torch.randn(TOKENS, VOCAB).bfloat16(), SCALES[2], torch.float8_e5m2)
        return train_gpt.fp8_mm_backward, (grad_f8, grad_f8.T.contiguous(), x_f8.T.contiguous(),
                                           w_f8.T.contiguous(), *SCALES), False
    if name == "float8_transposed":
        return train_gpt.float8_transposed, (train_gpt.to_float8(x, SCALES[0], torch.float8_e4m3fn),), False
    if name == "fp8_relu_square_up":
        return train_gpt.fp8_relu_square_up, relu_square_up_case(32, 48, 32, 4)[:5], False
    if name == "fp8_relu_square_grads":
        return train_gpt.fp8_relu_square_grads, relu_square_case(32, 48, 4), False
    if name == "head_weight_casts":
        return train_gpt.head_weight_casts, (w, SCALES[1]), False
    if name == "fp8_head_ce":
        x, w, targets = head_case(21)
        casts = train_gpt.head_weight_casts(w, SCALES[1])
        return train_gpt.fp8_head_ce, (x.requires_grad_(), w.requires_grad_(), *casts, targets, *SCALES), True
    assert name == "fp8_qkv_weight_grad"
    grad_f8, grad_scale = train_gpt.rowwise_float8(torch.randn(TOKENS, 3 * 64).bfloat16())
    return train_gpt.fp8_qkv_weight_grad, (grad_f8, grad_scale, *train_gpt.rowwise_float8(x)), False


def raw_bytes(t: torch.Tensor) -> torch.Tensor:
    """t's bytes (float8 included, whose CPU comparisons are missing; NaN equal to itself)."""
    return t.detach().reshape(-1).view(torch.uint8)


@pytest.mark.parametrize("name", ["fp8_mm", "fp8_mm_backward", "float8_transposed", "fp8_relu_square_up",
                                  "fp8_relu_square_grads", "head_weight_casts", "fp8_head_ce", "fp8_qkv_weight_grad"])
def test_fp8_ops_leave_their_inputs_as_they_were(request, name):
    """Every op is declared mutates_args=(): compiled code may reuse an input after the op, or hand the op a buffer
    another kernel still reads. opcheck's test_schema, which catches an undeclared write, is skipped for these ops
    (FP8_NO_COMPARE), so a scale rescaled in place or a float8 operand overwritten went unseen: each input's bytes,
    and for the ops with a registered backward the incoming gradient's and the saved outputs', are unchanged after
    the forward and the backward."""
    if name in ("head_weight_casts", "fp8_head_ce"):  # Triton kernels on CPU tensors too
        request.getfixturevalue("interpreted_kernel")
    op, args, differentiable = fp8_op_case(name)
    tensors = [t for t in args if isinstance(t, torch.Tensor)]
    before = [t.detach().clone() for t in tensors]
    outputs = op(*args)
    if differentiable:
        grad = torch.randn(outputs[0].shape, generator=torch.Generator().manual_seed(22)).to(outputs[0].dtype)
        tensors += [grad, *outputs[1:]]  # fp8_mm's backward reads its float8 outputs, fp8_head_ce's its gradients
        before += [grad.clone(), *(t.detach().clone() for t in outputs[1:])]
        outputs[0].backward(grad)
        assert args[1].grad is not None  # the registered backward ran
    for i, (ours, theirs) in enumerate(zip(tensors, before)):
        assert ours.dtype == theirs.dtype and torch.equal(raw_bytes(ours), raw_bytes(theirs)), f"tensor {i} changed"


def test_only_the_qkv_projection_is_fp8_and_only_in_training(monkeypatch):
    """--fp8_qkv: the QKV projection's forward and input gradient are rowwise FP8 products (3 x 128 columns, then
    128); the output projection stays bf16; validation (eval) runs bf16 throughout."""
    args = train_gpt.Hyperparameters(model_dim=DIM, num_heads=2, head_dim=64, train_seq_len=128, val_seq_len=128)
    torch.manual_seed(0)
    attention = train_gpt.CausalSelfAttention(args, train_gpt.Rotary(64, 256))
    with torch.no_grad():
        attention.qkvo_w[3].normal_(std=0.02)
    x = F.rms_norm(torch.randn(1, 256, DIM), (DIM,)).bfloat16()
    mask = train_gpt.dense_mask(torch.zeros(256, dtype=torch.int32), torch.tensor(2))  # one document, 2 blocks
    products, rowwise_scaled_mm = [], train_gpt.rowwise_scaled_mm
    monkeypatch.setattr(train_gpt, "rowwise_scaled_mm", lambda a, a_s, b, b_s: products.append(b.shape) or
                        rowwise_scaled_mm(a, a_s, b, b_s))
    outputs = {}
    for fp8 in (True, False):
        attention.fp8_qkv = fp8
        outputs[fp8] = attention(x, None, torch.tensor([0.5, 0.5]), mask)
        outputs[fp8].float().square().sum().backward()
    assert products == [(3 * DIM, DIM), (DIM, 3 * DIM)]  # the forward's, then the backward's grad_x
    assert not torch.equal(outputs[True], outputs[False])
    assert (outputs[True].float() - outputs[False].float()).norm() / outputs[False].float().norm() < 0.1
    attention.fp8_qkv = True
    attention.eval()
    assert torch.equal(attention(x, None, torch.tensor([0.5, 0.5]), mask), outputs[False])
    assert len(products) == 2


# ----------------------------------------------------------------------------------------------
# Attention inputs (attention_inputs, both scripts; track 2 norms the values too): q and k RMS-normed and rotated, v
# mixed with the value embedding; the kernels under Triton's interpreter against each script's torch path, and the
# op's registration

SCRIPTS = pytest.mark.parametrize("script", [train_gpt, train_gpt_medium], ids=["train_gpt", "train_gpt_medium"])


def attention_case(script, tokens: int, has_ve: bool, seed: int = 0, heads: int = 3, head_dim: int = 32):
    gen = torch.Generator().manual_seed(seed)
    cos, sin = script.Rotary(head_dim, 256).tables(tokens)
    qkv = torch.randn(1, tokens, 3 * heads, head_dim, generator=gen).bfloat16()
    ve = torch.randn(1, tokens, heads, head_dim, generator=gen).bfloat16() if has_ve else None
    grads = tuple(torch.randn(1, tokens, heads, head_dim, generator=gen).bfloat16() for _ in range(3))
    return qkv, cos, sin, torch.tensor([0.7, -0.4]), ve, grads


def torch_attention_gradients(script, qkv, cos, sin, lambdas, ve, grads):
    """The torch path's gradients in fp32 (qkv, lambdas, ve), from fp32 copies of the inputs, by autograd."""
    inputs = [t.float().requires_grad_() for t in (qkv, lambdas) + ((ve,) if ve is not None else ())]
    outputs = script.attention_inputs_torch(inputs[0], cos, sin, inputs[1], inputs[2] if ve is not None else None)
    return torch.autograd.grad(outputs, inputs, [g.float() for g in grads], allow_unused=True)


@SCRIPTS
@pytest.mark.parametrize("tokens", [16, 37])  # whole blocks of rows, and a partial last block
@pytest.mark.parametrize("has_ve", [True, False], ids=["value embedding", "none"])
def test_attention_inputs_kernels_match_the_torch_path(require_interpreted, script, tokens, has_ve):
    require_interpreted(script.attention_inputs_kernel)
    qkv, cos, sin, lambdas, ve, grads = attention_case(script, tokens, has_ve)
    reference = script.attention_inputs_torch(qkv.float(), cos, sin, lambdas, ve.float() if has_ve else None)
    for ours, theirs in zip(script.attention_inputs_triton(qkv, cos, sin, lambdas, ve), reference):
        assert ours.dtype == torch.bfloat16 and ours.shape == theirs.shape
        torch.testing.assert_close(ours.float(), theirs, rtol=2 ** -7, atol=2 ** -7)  # bf16's rounding
    grad_qkv, grad_lambdas, grad_ve = script.attention_inputs_backward_triton(grads, qkv, cos, sin, lambdas, ve)[:3]
    expected = torch_attention_gradients(script, qkv, cos, sin, lambdas, ve, grads)
    torch.testing.assert_close(grad_qkv.float(), expected[0], rtol=2 ** -7, atol=2 ** -6)
    torch.testing.assert_close(grad_lambdas, expected[1], rtol=1e-4, atol=1e-3)  # fp32 sums of ~10^3 products
    assert (grad_ve is None) == (not has_ve)
    if has_ve:
        torch.testing.assert_close(grad_ve.float(), expected[2], rtol=2 ** -7, atol=2 ** -7)


@SCRIPTS
def test_attention_inputs_torch_path_norms_q_and_k_and_mixes_v(script):
    qkv, cos, sin, lambdas, ve, _ = attention_case(script, 8, True)
    q, k, v = script.attention_inputs_torch(qkv, cos, sin, lambdas, ve)
    for x in (q, k):  # rotation keeps each row's norm: RMS 1 after the norm
        torch.testing.assert_close(x.float().square().mean(-1), torch.ones(1, 8, 3), rtol=0, atol=2e-2)
    values = qkv[:, :, 6:].float()
    if script is train_gpt_medium:  # track 2 norms the values before the mix
        values = F.rms_norm(qkv[:, :, 6:], (32,)).float()
    torch.testing.assert_close(v, (0.7 * values - 0.4 * ve.float()).bfloat16(), rtol=0, atol=2 ** -6)


@SCRIPTS
@pytest.mark.parametrize("has_ve", [True, False], ids=["value embedding", "none"])
@pytest.mark.parametrize("test_util", ["test_schema", "test_autograd_registration", "test_faketensor",
                                       "test_aot_dispatch_dynamic"])
def test_attention_inputs_opcheck(script, test_util, has_ve):
    qkv, cos, sin, lambdas, ve, _ = attention_case(script, 12, has_ve)
    args = (qkv.requires_grad_(), cos, sin, lambdas.requires_grad_(), ve.requires_grad_() if has_ve else None)
    assert torch.library.opcheck(script.attention_inputs, args, test_utils=test_util) == {test_util: "SUCCESS"}


@SCRIPTS
def test_attention_inputs_gradients_on_the_cpu_path_are_autograds(script):
    """The op's CPU backward (the kernel's formulas in torch ops) gives what autograd gives for the torch path."""
    qkv, cos, sin, lambdas, ve, grads = attention_case(script, 10, True)
    qkv.requires_grad_(), lambdas.requires_grad_(), ve.requires_grad_()
    outputs = script.attention_inputs(qkv, cos, sin, lambdas, ve)
    torch.autograd.backward(outputs, grads)
    expected = torch_attention_gradients(script, qkv.detach(), cos, sin, lambdas.detach(), ve.detach(), grads)
    for got, want in zip((qkv.grad, lambdas.grad, ve.grad), expected):
        torch.testing.assert_close(got.float(), want, rtol=2 ** -7, atol=2 ** -6)


@SCRIPTS
def test_attention_inputs_cpu_gradients_hold_for_heads_far_from_rms_1(script):
    """The test above with q, k and v of RMS 4: track 2's value lambda's gradient sums grad_v times rms_norm(v), and
    attention_case's draws have an RMS near 1, where a CPU backward that summed grad_v times v passed."""
    qkv, cos, sin, lambdas, ve, grads = attention_case(script, 10, True)
    qkv = (4 * qkv).requires_grad_()  # exact in bf16
    lambdas.requires_grad_(), ve.requires_grad_()
    torch.autograd.backward(script.attention_inputs(qkv, cos, sin, lambdas, ve), grads)
    expected = torch_attention_gradients(script, qkv.detach(), cos, sin, lambdas.detach(), ve.detach(), grads)
    for got, want in zip((qkv.grad, lambdas.grad, ve.grad), expected):
        torch.testing.assert_close(got.float(), want, rtol=2 ** -7, atol=2 ** -6)


@SCRIPTS
def test_attention_inputs_backward_kernel_reads_gradients_in_flexattentions_layout(require_interpreted, script):
    """Gradients laid out heads first (batch x heads x tokens x head_dim, seen transposed), as FlexAttention's backward
    may give them, are read through their strides: the same result as contiguous ones."""
    require_interpreted(script.attention_inputs_kernel)
    qkv, cos, sin, lambdas, ve, grads = attention_case(script, 21, True)
    heads_first = tuple(g.transpose(1, 2).contiguous().transpose(1, 2) for g in grads)
    assert not heads_first[0].is_contiguous() and torch.equal(heads_first[0], grads[0])
    ours = script.attention_inputs_backward_triton(heads_first, qkv, cos, sin, lambdas, ve)[:3]
    for got, want in zip(ours, script.attention_inputs_backward_triton(grads, qkv, cos, sin, lambdas, ve)[:3]):
        assert torch.equal(got, want)


def heads_first(t: torch.Tensor) -> torch.Tensor:
    """t (batch x tokens x heads x head_dim) laid out batch x heads x tokens x head_dim, seen as t's shape."""
    return t.transpose(1, 2).contiguous().transpose(1, 2)


def head_dim_first(t: torch.Tensor) -> torch.Tensor:
    """t laid out with head_dim before heads: a stride other than 1 along head_dim."""
    return t.transpose(-2, -1).contiguous().transpose(-2, -1)


@SCRIPTS
@pytest.mark.parametrize("layouts", [(lambda g: g, heads_first, lambda g: g), (head_dim_first,) * 3],
                         ids=["k's heads first", "head_dim strided"])
def test_attention_inputs_backward_kernel_reads_gradients_of_any_layouts(require_interpreted, script, layouts):
    """The kernel reads the three incoming gradients through one token and one head stride, with head_dim's stride 1:
    gradients whose layouts differ from one another, or that share a head_dim stride other than 1, give what
    contiguous ones give (the test above gives three of one layout, unit along head_dim)."""
    require_interpreted(script.attention_inputs_kernel)
    qkv, cos, sin, lambdas, ve, grads = attention_case(script, 21, True)
    laid_out = tuple(layout(g) for layout, g in zip(layouts, grads))
    assert len({g.stride() for g in laid_out}) > 1 or laid_out[0].stride(-1) != 1
    ours = script.attention_inputs_backward_triton(laid_out, qkv, cos, sin, lambdas, ve)[:3]
    for got, want in zip(ours, script.attention_inputs_backward_triton(grads, qkv, cos, sin, lambdas, ve)[:3]):
        assert torch.equal(got, want)


@SCRIPTS
def test_attention_inputs_kernels_take_qkv_and_ve_in_any_layout(require_interpreted, script):
    """The kernels read qkv and ve as row-major rows and the op takes any layout: qkv and ve laid out heads first give,
    both ways, what their contiguous copies give (the tests above pass contiguous ones only, so launchers that handed
    the kernels their inputs as they came passed)."""
    require_interpreted(script.attention_inputs_kernel)
    qkv, cos, sin, lambdas, ve, grads = attention_case(script, 21, True)
    strided_qkv, strided_ve = heads_first(qkv), heads_first(ve)
    assert not strided_qkv.is_contiguous() and not strided_ve.is_contiguous()
    layouts = [(strided_qkv, strided_ve), (qkv, ve)]
    forward = [script.attention_inputs_triton(q, cos, sin, lambdas, v) for q, v in layouts]
    backward = [script.attention_inputs_backward_triton(grads, q, cos, sin, lambdas, v)[:3] for q, v in layouts]
    for ours, contiguous in (forward, backward):
        for got, want in zip(ours, contiguous):
            assert torch.equal(got, want)


def float8_steps_apart(ours: torch.Tensor, expected: torch.Tensor) -> torch.Tensor:
    """Whether each float8 entry is within what Triton's interpreter misrounds: one float8 step, or half of a power of
    two that the value rounds up to (its cast loses the carry into the exponent)."""
    step = ours.view(torch.uint8).int() - expected.view(torch.uint8).int()
    power_of_two = torch.frexp(expected.float()).mantissa.abs() == 0.5  # subnormal ones too
    return (step.abs() <= 1) | ((ours.float() * 2 == expected.float()) & power_of_two)


@pytest.mark.parametrize("heads, tokens, launch", [(6, 37, (16, 4)), (3, 16, (8, 4)), (4, 9, (64, 8)),
                                                   (6, 5, (4, 4))])  # heads padded to 8 or 4; partial blocks
def test_attention_inputs_backward_kernel_writes_qkvs_gradient_in_rowwise_e4m3_too(interpreted_kernel, heads, tokens,
                                                                                   launch):
    """With rowwise_fp8 the kernel writes qkv's gradient as rowwise_float8 makes it from the bf16 gradient (a scale
    per token over all heads of q, k and v) instead of the bf16 gradient, and every other output stays as without it
    (the lambdas' sums up to their order: the two ways block the rows differently)."""
    qkv, cos, sin, lambdas, ve, grads = attention_case(train_gpt, tokens, True, heads=heads)
    grads = (grads[0], grads[1] * 8, grads[2] / 8)  # a token's largest entry may lie in q, k or v
    plain = train_gpt.attention_inputs_backward_triton(grads, qkv, cos, sin, lambdas, ve, launch)
    *outputs, (grad_f8, grad_scale) = train_gpt.attention_inputs_backward_triton(grads, qkv, cos, sin, lambdas, ve,
                                                                                 launch, rowwise_fp8=True)
    assert plain[3] is None and outputs[0] is None and torch.equal(outputs[2], plain[2])
    torch.testing.assert_close(outputs[1], plain[1], rtol=1e-5, atol=1e-5)
    expected_f8, expected_scale = train_gpt.rowwise_float8(plain[0].flatten(-2).flatten(0, -2))
    assert grad_f8.dtype == torch.float8_e4m3fn and grad_f8.shape == (tokens, 3 * heads * 32)
    torch.testing.assert_close(grad_scale, expected_scale, rtol=2 ** -7, atol=0)  # the interpreter's bf16 rounding
    assert float8_steps_apart(grad_f8, expected_f8).all()
    assert (grad_f8 != expected_f8).float().mean() < 0.1


@pytest.mark.parametrize("rowwise_fp8", [False, True])
@pytest.mark.parametrize("test_util", ["test_schema", "test_faketensor"])
def test_attention_inputs_backward_opcheck(test_util, rowwise_fp8):
    """The op's fake outputs (what the compiled graph plans for) have the real ones' shapes and dtypes."""
    qkv, cos, sin, lambdas, ve, grads = attention_case(train_gpt, 12, True)
    args = (*grads, qkv, cos, sin, lambdas, ve, rowwise_fp8)
    assert torch.library.opcheck(train_gpt.attention_inputs_backward, args,
                                 test_utils=test_util) == {test_util: "SUCCESS"}


@SCRIPTS
@pytest.mark.parametrize("head_dim, fits", [(128, True), (64, True), (32, True), (16, True), (256, True),
                                            (96, False), (80, False), (192, False), (48, False), (12, False)])
def test_attention_kernel_takes_heads_whose_half_is_a_power_of_two_and_only_on_cuda(script, head_dim, fits):
    """The kernels work on each head's two halves as Triton blocks, whose width must be a power of two: other head
    sizes (and every CPU tensor) must take the torch path, and the model's 128 must not silently lose the kernel."""
    assert script.attention_kernel_fits(head_dim) is fits
    with FakeTensorMode():  # a CUDA tensor's metadata without a GPU
        on_cuda = torch.empty(1, 8, 3 * 2, head_dim, dtype=torch.bfloat16, device="cuda")
    assert on_cuda.is_cuda and script.takes_attention_kernel(on_cuda) is fits
    assert script.takes_attention_kernel(torch.zeros(1, 8, 3 * 2, head_dim, dtype=torch.bfloat16)) is False


@SCRIPTS
def test_attention_kernels_take_one_sequence_only(script):
    """The kernels take a row's rotary angles at its token's index among all batch x tokens rows, past the tables for
    a second sequence's rows (rotated by other angles, no error: the op's torch path and its docstring take batches),
    so a batch of several takes the torch path on the GPU too; the model's batch is 1."""
    with FakeTensorMode():  # a CUDA tensor's metadata without a GPU
        one, several = (torch.empty(batch, 8, 3 * 2, 128, dtype=torch.bfloat16, device="cuda") for batch in (1, 2))
    assert script.takes_attention_kernel(one) and not script.takes_attention_kernel(several)


# ----------------------------------------------------------------------------------------------
# Embedding tables' gradients summed in fp32 (add_rows_): the kernel under Triton's interpreter against index_add_


@pytest.mark.parametrize("launch", [train_gpt.ADD_ROWS_LAUNCH, (16, 64, 4)], ids=["training's", "small blocks"])
def test_add_rows_kernel_adds_each_tokens_row_to_its_ids_row_repeats_included(interpreted_kernel, launch):
    """ids repeat, in runs longer than a block and runs that start and end inside one (the same row gets several
    tokens' adds); the token count and width are not multiples of the blocks; the sums start non-zero (a step's
    earlier micro-steps)."""
    gen = torch.Generator().manual_seed(12)
    ids = torch.tensor([3] * 40 + [0] * 5 + [7] + [19] * 3 + [1] * 20 + [11] * 8, dtype=torch.int32)[
        torch.randperm(77, generator=gen)]
    rows = torch.randn(77, 300, generator=gen).bfloat16()
    sums = torch.randn(20, 300, generator=gen)
    expected = sums.clone().index_add_(0, ids.long(), rows.float())
    train_gpt.add_rows_triton(sums, *ids.sort(), rows, launch)
    assert torch.allclose(sums, expected, rtol=1e-6, atol=1e-5)


def test_add_rows_op_on_the_cpu_adds_each_tokens_row_to_its_ids_row_without_the_kernel(monkeypatch):
    """The CPU's path (index_add_ in fp32): rows of any float dtype and shape ... x dim, each token's added to its id's
    row through the sort's order, repeats included, and no Triton launch (which needs a GPU or the interpreter); the
    kernel's own test calls its launcher. Integer rows: the sums exact in any order."""
    monkeypatch.setattr(train_gpt, "add_rows_triton", lambda *args: pytest.fail("a kernel launch on CPU"))
    gen = torch.Generator().manual_seed(16)
    ids = torch.randint(0, 10, (2, 12), generator=gen, dtype=torch.int32)
    rows = torch.randint(-8, 8, (2, 12, 8), generator=gen).bfloat16()
    sums = torch.randint(-8, 8, (10, 8), generator=gen).float()
    expected = sums.clone()
    for token_id, row in zip(ids.flatten().tolist(), rows.flatten(0, 1).float()):
        expected[token_id] += row
    train_gpt.add_rows_(sums, *ids.flatten().sort(), rows)
    assert sums.dtype == torch.float32 and torch.equal(sums, expected)


@pytest.mark.parametrize("test_util", ["test_schema", "test_faketensor", "test_aot_dispatch_dynamic"])
def test_add_rows_opcheck(test_util):
    gen = torch.Generator().manual_seed(13)
    sorted_ids, order = torch.randint(0, 10, (12,), generator=gen).sort()
    args = (torch.zeros(10, 8), sorted_ids, order, torch.randn(2, 6, 8, generator=gen))
    assert torch.library.opcheck(train_gpt.add_rows_, args, test_utils=test_util) == {test_util: "SUCCESS"}


def test_add_rows_kernel_ends_the_last_run_at_the_last_token_whatever_follows_the_ids(interpreted_kernel):
    """sorted_ids viewed in a longer buffer whose next entry repeats the last id (memory past a tensor holds
    anything), the last token inside a block: the kernel must not read past the ids, or the last id's run does not
    end there and its rows are never added."""
    gen = torch.Generator().manual_seed(14)
    ids = torch.randint(0, 6, (37,), generator=gen, dtype=torch.int32)
    sorted_ids, order = ids.sort()
    buffer = torch.cat([sorted_ids, sorted_ids[-1:]])
    rows, sums = torch.randn(37, 40, generator=gen), torch.zeros(6, 40)
    train_gpt.add_rows_triton(sums, buffer[:37], order, rows, (16, 64, 1))
    assert torch.allclose(sums, torch.zeros(6, 40).index_add_(0, ids.long(), rows), rtol=1e-6, atol=1e-5)


@triton.jit
def segmented_add_groupings_kernel(values_ptr, starts_ptr, left_ptr, right_ptr, N: tl.constexpr):
    """(a + b) + c and a + (b + c) by segmented_add, for N triples (values, and starts as 0 or 1): the sums, then the
    combined starts, in left and right."""
    i = tl.arange(0, N)
    a, b, c = tl.load(values_ptr + i), tl.load(values_ptr + N + i), tl.load(values_ptr + 2 * N + i)
    a_s, b_s = tl.load(starts_ptr + i) != 0, tl.load(starts_ptr + N + i) != 0
    c_s = tl.load(starts_ptr + 2 * N + i) != 0
    ab, ab_s = train_gpt.segmented_add(a, a_s, b, b_s)
    left, left_s = train_gpt.segmented_add(ab, ab_s, c, c_s)
    bc, bc_s = train_gpt.segmented_add(b, b_s, c, c_s)
    right, right_s = train_gpt.segmented_add(a, a_s, bc, bc_s)
    tl.store(left_ptr + i, left)
    tl.store(left_ptr + N + i, left_s.to(tl.float32))
    tl.store(right_ptr + i, right)
    tl.store(right_ptr + N + i, right_s.to(tl.float32))


def test_add_rows_kernels_segmented_sum_combines_in_any_grouping(interpreted_kernel):
    """tl.associative_scan may group a block's combines in any order (a tree on the GPU), but the interpreter's scan
    is a left fold, whose combines never read a combined start flag, only the next position's own: the add_rows test
    passed a combine whose start flag kept only b's. Each grouping of three positions gives the sum since the last
    start (integer values: exact), and a start wherever one of the three held one."""
    starts = torch.tensor([[(n >> k) & 1 for n in range(8)] for k in range(3)]).repeat(1, 4)  # every pattern
    values = torch.randint(-50, 50, (3, 32), generator=torch.Generator().manual_seed(15)).float()
    left, right = torch.full((2, 32), float("nan")), torch.full((2, 32), float("nan"))
    segmented_add_groupings_kernel[(1,)](values, starts.float(), left, right, N=32)
    (a, b, c), (a_s, b_s, c_s) = values, starts.bool()
    expected = torch.where(c_s, c, torch.where(b_s, b + c, a + b + c))
    assert torch.equal(left[0], expected) and torch.equal(right[0], expected)
    assert torch.equal(left[1], (a_s | b_s | c_s).float()) and torch.equal(right[1], (a_s | b_s | c_s).float())
