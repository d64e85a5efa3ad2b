"""Device-side correctness checks of both tracks' kernels against plain-torch references (run on a GPU), the time and
memory of track 2's fused head against torch.compile of the plain one, the time of its Newton-Schulz through the
symmetric matmul kernel against the plain matmuls, its MLP with the epilogue GEMMs against fp64, track 1's rowwise FP8
QKV projection (--fp8_qkv: forward and input gradient) against its CPU emulation, both tracks' attention-inputs
kernels (QK-norm, rotary, value mix) against torch, timed against inductor's kernels for the same, and that both
tracks' kernel launchers do not synchronise the host.

python perf/gpu_checks.py  ->  the ptxas that builds the kernels, one line per check with the relative error, and
the timings; exits 1 on a failure. It takes no arguments (--help prints this). Its GEMMs run on cuBLASLt with
training's settings (train_gpt.CUBLASLT_SETTINGS, set at import where the environment does not say otherwise).
"""
import math
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch._inductor.exc import InductorError
from triton.testing import do_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import train_gpt as tg  # noqa: E402
import train_gpt_medium as tm  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_common import no_gpu_error, usage_or_error  # noqa: E402

# At import, so that checks called from other code build as training does too: session 63 called them from code of
# its own, Triton's bundled ptxas built their kernels, and two failed, one as that ptxas's builds had failed before
# (perf/NOTES.md, sessions 14 and 64); and the GEMMs they time run on cuBLASLt as in training
tg.configure_triton_builds()
tg.configure_cublaslt()


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return ((out.double() - ref.double()).norm() / ref.double().norm()).item()


def float8_steps(ours: torch.Tensor, theirs: torch.Tensor) -> torch.Tensor:
    """How many float8 steps apart each pair of same-signed entries is (their bytes' difference)."""
    return (ours.view(torch.uint8).int() - theirs.view(torch.uint8).int()).abs()


def check(name: str, error: float, tolerance: float) -> bool:
    ok = error < tolerance
    print(f"{'ok ' if ok else 'BAD'} {name}: relative error {error:.2e} (tolerance {tolerance:.0e})")
    return ok


def main(argv: list[str]) -> int:
    if (answer := usage_or_error(argv, __doc__, ())) is not None:
        return answer
    if answer := no_gpu_error("perf/gpu_checks.py"):
        return answer
    print("ptxas:", tg.ptxas_in_use())  # what builds the kernels below
    torch.manual_seed(0)
    results = []
    for script, batch, m, k in [(tg, 4, 768, 768), (tg, 12, 768, 3072), (tg, 3, 200, 72), (tg, 2, 6, 12),
                                (tm, 60, 1024, 1024), (tm, 16, 1024, 4096)]:  # track 2: its stacks on one GPU
        name = "sym_matmul" if script is tg else "medium sym_matmul"
        dtype = torch.bfloat16 if script is tg else torch.float16  # orthogonalize's in each track
        x = torch.randn(batch, m, k, device="cuda", dtype=dtype) / k ** 0.5
        ref = x.double() @ x.double().mT
        results.append(check(f"{name} {batch}x{m}x{k}", relative_error(script.sym_matmul_triton(x), ref), 1e-2))
        a = script.sym_matmul_triton(x)
        ref2 = 3.4445 * torch.eye(m, device="cuda") - 4.775 * a.double() + 2.0315 * a.double() @ a.double()
        out2 = script.sym_matmul_triton(a, a, alpha=2.0315, beta=-4.775, diagonal=3.4445)
        results.append(check(f"{name} with C and diagonal {batch}x{m}", relative_error(out2, ref2), 2e-2))
        if script is tm:  # Gram Newton-Schulz's products
            results.append(check(f"{name} of two commuting symmetric matrices {batch}x{m}",
                                 relative_error(tm.sym_matmul_triton(out2, y=a), out2.double() @ a.double()), 1e-2))
    g = torch.randn(8, 768, 3072, device="cuda")
    u, _, vt = torch.linalg.svd(g.double(), full_matrices=False)
    results.append(check("orthogonalize vs SVD polar factor (NS5 is approximate)",
                         relative_error(tg.orthogonalize(g), u @ vt), 0.35))
    x = torch.randn(4096, 768, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(50304, 768, device="cuda") * 0.02
    out, x_f8, w_f8 = tg.fp8_mm(x, w, tg.normed_e4m3_scale(768), 2 ** -9, 1 / 448)
    emulated = tg.scaled_mm(x_f8.cpu(), w_f8.cpu().T, tg.normed_e4m3_scale(768), 2 ** -9, torch.bfloat16, False)
    results.append(check("fp8_mm CUDA vs CPU emulation", relative_error(out.cpu(), emulated), 1e-2))
    results.append(check("fp8_mm vs bf16 matmul", relative_error(out, x.float() @ w.T), 8e-2))
    results += fused_head_ce_checks()
    results += float8_both_ways_checks()
    results += add_rows_checks()
    results += fp8_mlp_checks()
    results += fp8_qkv_checks()
    results += small_reductions_checks()
    results += gate_logits_checks()
    results += attention_inputs_checks(tg, "track 1", 49152, 6)
    results += attention_inputs_checks(tm, "track 2", 65536, 8)
    results += medium_head_checks()
    results += medium_orthogonalize_checks()
    results += medium_mlp_checks()
    results += host_sync_checks()
    return 0 if all(results) else 1


def synchronising(launches: list) -> list[str]:
    """The names of the launches that synchronise the host: each runs once (its build, its caches), then again under
    torch.cuda.set_sync_debug_mode("error"), which raises at a synchronising call (a prototype, its warning says: it
    does not see every kind)."""
    for launch in launches:
        launch()
    torch.cuda.synchronize()
    names = []
    for launch in launches:
        torch.cuda.set_sync_debug_mode("error")
        try:
            launch()
        except RuntimeError:
            names.append(launch.func.__name__)
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return names


def host_sync_checks() -> list[bool]:
    """Both tracks' Triton launchers (the start-up's tiny launches: each build a custom op starts) do not synchronise
    the host. One that does, once a micro-step, stops the host running ahead of the GPU: ~2 ms a micro-step in
    session 47's full batch (records/track_1_short/2026-12-04_EmbeddingBackwardDropped, a torch index put)."""
    results = []
    for script, name in [(tg, "track 1"), (tm, "track 2")]:
        launches = script.tiny_kernel_launches(script.parse_args([]), torch.device("cuda"))
        names = synchronising(launches)
        print(f"{'BAD' if names else 'ok '} {name}'s {len(launches)} kernel launches: {len(names)} synchronise the "
              f"host{': ' + ', '.join(names) if names else ''}")
        results.append(not names)
    return results


def fp8_mlp_checks() -> list[bool]:
    """FP8MLP's output and gradients against the exact MLP, and its relu-square kernel's float8 bytes, in one pass and
    in two, against the torch path's casts (the CPU tests compare the kernel's values in fp32 under the interpreter);
    then which of the two the op takes."""
    results = []
    for row_step in (1, tg.Hyperparameters().fp8_amax_row_step):
        gen = torch.Generator("cuda").manual_seed(row_step)
        x = torch.randn(4096, 768, device="cuda", generator=gen).bfloat16().requires_grad_(True)
        fc_w, proj_w = (torch.randn(768, 3072, device="cuda", generator=gen).mul_(0.02).requires_grad_(True)
                        for _ in range(2))
        out = tg.FP8MLP.apply(x, fc_w, proj_w, *tg.mlp_weight_casts(fc_w, proj_w), row_step)
        grad = torch.randn(out.shape, device="cuda", generator=gen) * 1e-3
        out.backward(grad)
        exact = [t.detach().double().requires_grad_(True) for t in (x, fc_w, proj_w)]
        exact_out = torch.relu(exact[0] @ exact[1]).square() @ exact[2].T
        exact_out.backward(grad.double())
        for name, ours, theirs in [("forward", out, exact_out), ("grad_x", x.grad, exact[0].grad),
                                   ("grad_fc", fc_w.grad, exact[1].grad), ("grad_proj", proj_w.grad, exact[2].grad)]:
            results.append(check(f"FP8MLP {name}, scales from every {row_step}th row, vs exact",
                                 relative_error(ours, theirs.detach()), 1.5e-1))
    a_f8, grad_a, a_scale, grad_scale = tg.relu_square_check_inputs(8192, 3072, torch.device("cuda"))
    # a at e4m3's largest (448) and a's gradient far past the one its scale was taken from: h's gradient saturates
    a_f8.view(torch.uint8)[0, 0], grad_a[0, 0] = 0x7e, 57344.0
    torch_path = tg.relu_square_grads_torch(a_f8, grad_a, a_scale, grad_scale)
    for passes in ("two passes", "one pass"):  # a miscompiled one pass: its grad_h_t's bytes differ
        kernel = tg.relu_square_grads_triton(a_f8, grad_a, a_scale, grad_scale, one_pass=passes == "one pass")
        for name, ours, theirs in zip(["a_t (e4m3)", "grad_h (e5m2)", "grad_h_t (e5m2)"], kernel, torch_path):
            differs = ours.view(torch.uint8) != theirs.view(torch.uint8)
            results.append(check(f"relu-square {passes} {name} bytes unequal to torch's cast",
                                 differs.float().mean().item(), 1e-4))
            if differs.any():
                at = tuple(differs.nonzero()[0].tolist())
                print(f"    first at {at}: {ours[at].float().item()} vs {theirs[at].float().item()}")
        # a_t moves a's 448; the next values below the largest are 416 and 49152: anything but saturation fails
        for name, t, largest in [("a_t", kernel[0], 448), ("grad_h", kernel[1], 57344), ("grad_h_t", kernel[2], 57344)]:
            results.append(check(f"relu-square {passes} saturates: {largest} - {name}[0, 0]",
                                 largest - t[0, 0].float().item(), 0.5))
    for t in (a_f8, kernel[1]):  # FP8MLP's weight gradients take x and grad_y transposed by this op
        same = torch.equal(tg.float8_transposed(t).view(torch.uint8), t.view(torch.uint8).T)
        results.append(check(f"float8_transposed of {t.dtype}: bytes unequal to the transpose's", 1 - same, 0.5))
    exact = tg.one_pass_relu_square_is_exact(a_f8.device)
    print(f"relu-square op: {'one pass (start-up check exact)' if exact else 'two passes (start-up check failed)'}")
    return results + grad_a_e5m2_checks() + relu_square_up_checks()


def grad_a_e5m2_checks(tokens: int = 8192) -> list[bool]:
    """FP8MLP's grad_a GEMM with its e5m2 output divided by grad_a_bound (cuBLAS's FP8 output) against the same GEMM
    to fp32 cast by torch (a first run, against fp32 products of the float8 values, found 0.5% of the bytes one
    step apart: the fast accumulation's rounding), and a gradient row of +-57,344 with the signs of the largest
    column: e5m2's largest there, every entry finite."""
    gen = torch.Generator("cuda").manual_seed(5)
    proj_w = torch.randn(768, 3072, device="cuda", generator=gen) * 0.02
    *_, proj_f8, proj_f8_t, _, _, bound = tg.mlp_weight_casts(proj_w, proj_w)
    grad_y_f8, _ = tg.to_float8_scaled(torch.randn(tokens, 768, device="cuda", generator=gen), torch.float8_e5m2)
    column = proj_f8.float().abs().sum(dim=0).argmax()
    grad_y_f8[0] = (torch.sign(proj_f8[:, column].float()) * 57344).to(torch.float8_e5m2)
    ours = tg.scaled_mm(grad_y_f8, proj_f8_t.T, 1.0, 1 / bound, torch.float8_e5m2, fast_accum=True)
    theirs = tg.scaled_mm(grad_y_f8, proj_f8_t.T, 1.0, 1 / bound, torch.float32, fast_accum=True).to(torch.float8_e5m2)
    differs = (ours.view(torch.uint8) != theirs.view(torch.uint8)).float().mean().item()
    largest = ours.float()
    print(f"    grad_a's largest entry over the bound: {largest[1:].abs().max().item() / 57344:.3g} (random rows)")
    return [check("grad_a e5m2 GEMM: bytes unequal to its fp32 output cast by torch", differs, 1e-4),
            check("grad_a e5m2 GEMM: 57344 - the worst row at the largest column", 57344 - largest[0, column].item(),
                  0.5),
            check("grad_a e5m2 GEMM: non-finite entries", (~largest.isfinite()).float().sum().item(), 0.5)]


def relu_square_up_checks() -> list[bool]:
    """The up projection's GEMM with a's e4m3 cast in its epilogue against torch's path (cuBLAS's fp32 product cast
    by torch; the CPU tests compare the kernel's fp32 values under the interpreter) at a block's shape, with a's
    scale at a quarter of its largest value so that entries saturate: a's bytes at most one e4m3 step apart (the
    sums' order), nearly all equal; and a NaN x scale gives a NaN a everywhere, as torch's relu and clamp do."""
    gen = torch.Generator("cuda").manual_seed(0)
    x_f8, w_f8 = (torch.randn(rows, 768, device="cuda", generator=gen).to(torch.float8_e4m3fn) for rows in (8192, 3072))
    x_scale, w_scale = torch.tensor(0.5, device="cuda"), torch.tensor(2.0 ** -4, device="cuda")
    h = tg.scaled_mm(x_f8, w_f8.T, x_scale, w_scale, torch.float32, fast_accum=True)
    a_scale = torch.relu(h).square().amax() / 4 / 448
    steps = float8_steps(tg.relu_square_up_triton(x_f8, w_f8, x_scale, w_scale, a_scale),
                         tg.relu_square_up_torch(x_f8, w_f8, x_scale, w_scale, a_scale))
    nan = tg.relu_square_up_triton(x_f8, w_f8, torch.tensor(float("nan"), device="cuda"), w_scale, a_scale)
    return [check("up projection's epilogue GEMM: a's bytes unequal to torch's cast", (steps > 0).float().mean().item(),
                  1e-3),
            check("up projection's epilogue GEMM: a's most steps from torch's cast", steps.max().item(), 2),
            check("up projection's epilogue GEMM: entries a NaN x scale leaves finite",
                  nan.float().isfinite().float().mean().item(), 1e-9)]


def fp8_qkv_checks() -> list[bool]:
    """--fp8_qkv's FP8AttentionInputs at a block's shape (4,096 tokens, 6 heads of 128): q, k, v against
    attention_inputs of the CPU emulation of the same rowwise product; x's gradient against the exact one and against
    the CPU emulation of the rowwise product of the kernel's e4m3 gradient, whose bytes and scales are checked against
    rowwise_float8 of the kernel's bf16 gradient; w's gradient (fp8_qkv_weight_grad) against the exact one and the CPU
    emulation, and its scaled copy of x's e4m3 copy byte for byte against torch's cast; the op's time against bf16's
    GEMM."""
    gen = torch.Generator("cuda").manual_seed(7)
    tokens, heads, head_dim = 4096, 6, 128
    x = F.rms_norm(torch.randn(1, tokens, 768, device="cuda", generator=gen), (768,)).bfloat16().requires_grad_(True)
    w = (torch.randn(3 * heads * head_dim, 768, device="cuda", generator=gen) / 768 ** 0.5).requires_grad_(True)
    cos, sin = (t.cuda() for t in tg.Rotary(head_dim, tokens).tables(tokens))
    lambdas = torch.tensor([0.7, -0.4], device="cuda")
    ve = torch.randn(1, tokens, heads, head_dim, device="cuda", generator=gen).bfloat16()
    grads = tuple((torch.randn(ve.shape, device="cuda", generator=gen) * 1e-3).bfloat16() for _ in range(3))
    outputs = tg.fp8_attention_inputs(x, w, cos, sin, lambdas, ve, head_dim, *tg.qkv_weight_casts(w))
    torch.autograd.backward(outputs, grads)
    (x_f8, x_s), (w_f8, w_s) = tg.rowwise_float8(x.detach().flatten(0, 1)), tg.rowwise_float8(w.detach())
    qkv = tg.rowwise_scaled_mm(x_f8.cpu(), x_s.cpu(), w_f8.cpu(), w_s.cpu()).view(1, tokens, 3 * heads, head_dim)
    emulated = tg.attention_inputs(qkv, cos.cpu(), sin.cpu(), lambdas.cpu(), ve.cpu())
    # the backward's reference from the CUDA product the function saved (the emulation's differs in rounding)
    qkv = tg.rowwise_scaled_mm(x_f8, x_s, w_f8, w_s).view(1, tokens, 3 * heads, head_dim).requires_grad_(True)
    reference = tg.attention_inputs(qkv, cos, sin, lambdas, ve)
    torch.autograd.backward(reference, grads)
    grad_qkv = tg.attention_inputs_backward_triton(grads, qkv.detach(), cos, sin, lambdas, ve)[0]
    grad_f8, grad_scale = tg.attention_inputs_backward_triton(grads, qkv.detach(), cos, sin, lambdas, ve,
                                                              rowwise_fp8=True)[3]
    expected_f8, expected_scale = tg.rowwise_float8(grad_qkv.flatten(-2).flatten(0, 1))
    steps = float8_steps(grad_f8, expected_f8)
    wt_f8, wt_s = tg.rowwise_float8(w.detach().T.contiguous())
    grad_x_emulated = tg.rowwise_scaled_mm(grad_f8.cpu(), grad_scale.cpu(), wt_f8.cpu(), wt_s.cpu())
    grad_x_exact = qkv.grad.flatten(-2).flatten(0, 1).double() @ w.detach().double()
    grad_w_emulated = tg.fp8_qkv_weight_grad(grad_f8.cpu(), grad_scale.cpu(), x_f8.cpu(), x_s.cpu())
    grad_w_exact = qkv.grad.flatten(-2).flatten(0, 1).double().T @ x.detach().flatten(0, 1).double()
    total, multipliers = tg.weight_grad_x_scales(grad_scale, x_s)
    total_ours = tg.largest_product(grad_scale, x_s, tg.WEIGHT_GRAD_X_SCALE_FLOOR)
    x_t = tg.row_scaled_transposed(x_f8, grad_scale, x_s, total_ours)
    x_t_torch = tg.to_float8(x_f8.float() * multipliers, 1.0, torch.float8_e4m3fn).T
    with_nan = grad_scale.clone()
    with_nan[grad_scale.numel() // 3] = float("nan")
    nan_kept = tg.largest_product(with_nan, x_s, tg.WEIGHT_GRAD_X_SCALE_FLOOR).isnan().item()
    x_t_unequal = (x_t.view(torch.uint8) != x_t_torch.view(torch.uint8)).float().mean().item()
    qkv_weight_grad_times(3 * heads * head_dim, 768)
    print(f"FP8AttentionInputs: rowwise e4m3 gradient entries one step off rowwise_float8's: "
          f"{(steps == 1).float().mean().item():.2e}, more: {(steps > 1).sum().item()}")
    return [*(check(f"FP8AttentionInputs {name} CUDA vs CPU emulation", relative_error(ours.cpu(), theirs), 1e-2)
              for name, ours, theirs in zip("qkv", outputs, emulated)),
            check("FP8AttentionInputs e4m3 gradient scales vs rowwise_float8", relative_error(grad_scale,
                                                                                              expected_scale), 1e-6),
            check("FP8AttentionInputs e4m3 gradient vs rowwise_float8 (entries more than one step off)",
                  (steps > 1).float().mean().item(), 1e-6),
            check("FP8AttentionInputs grad_x CUDA vs CPU emulation", relative_error(x.grad.flatten(0, 1).cpu(),
                                                                                     grad_x_emulated), 1e-2),
            check("FP8AttentionInputs grad_x vs exact", relative_error(x.grad.flatten(0, 1), grad_x_exact), 8e-2),
            check("FP8AttentionInputs grad_w CUDA vs CPU emulation", relative_error(w.grad.cpu(), grad_w_emulated),
                  1e-3),
            check("FP8AttentionInputs grad_w vs exact", relative_error(w.grad.double(), grad_w_exact), 8e-2),
            check("fp8_qkv_weight_grad's e4m3 copy of x bytes unequal to torch's cast", x_t_unequal, 1e-9),
            check("largest_product vs torch's clamped amax", relative_error(total_ours, total), 1e-9),
            check("largest_product keeps a NaN (1 = kept)", 1.0 - nan_kept, 1e-9)]


def qkv_weight_grad_times(width: int, dim: int, tokens: int = 49152):
    """fp8_qkv_weight_grad (its two copies and the FP8 GEMM) against the bf16 GEMM it replaced, at a micro-step's
    tokens (at the check's 4,096 the op's launches, not its kernels, set its time)."""
    grad = torch.randn(tokens, width, device="cuda").bfloat16()
    x = F.rms_norm(torch.randn(tokens, dim, device="cuda"), (dim,)).bfloat16()
    (grad_f8, grad_scale), (x_f8, x_scale) = tg.rowwise_float8(grad), tg.rowwise_float8(x)
    op_ms = do_bench(lambda: tg.fp8_qkv_weight_grad(grad_f8, grad_scale, x_f8, x_scale))
    bf16_ms = do_bench(lambda: grad.T @ x)
    print(f"time QKV weight gradient at {tokens} tokens: fp8_qkv_weight_grad {op_ms * 1000:.1f} us, bf16 GEMM "
          f"{bf16_ms * 1000:.1f} us; its gradient's transpose {do_bench(lambda: tg.transposed(grad_f8)) * 1000:.1f} us")
    total = tg.largest_product(grad_scale, x_scale, tg.WEIGHT_GRAD_X_SCALE_FLOOR)
    for launch in [tg.ROW_SCALED_TRANSPOSED_LAUNCH, (64, 4), (64, 8), (128, 8)]:  # BLOCK, num_warps
        ms = do_bench(lambda: tg.row_scaled_transposed(x_f8, grad_scale, x_scale, total, launch=launch))
        print(f"time row_scaled_transposed of x ({tokens}, {dim}) e4m3 to e4m3, BLOCK={launch[0]} warps={launch[1]}: "
              f"{ms * 1000:.1f} us")


def small_reductions_checks(tokens: int = 49152) -> list[bool]:
    """column_sums against torch's sum, and the one-program reductions' times (do_bench: each call's launch
    included) against the ATen ops they replace at a micro-step's sizes: the lambdas' partial sums
    (attention_inputs_backward's, 2 tokens a program) and fp8_qkv_weight_grad's total scale (largest_product of the
    two rowwise scales; checked in fp8_qkv_checks)."""
    parts = torch.randn(tokens // 2, 2, device="cuda")
    grad_scale, x_scale = (torch.rand(tokens, 1, device="cuda") + 0.01 for _ in range(2))
    results = [check("column_sums vs torch's sum", relative_error(tg.column_sums(parts, torch.float32),
                                                                  parts.double().sum(0)), 1e-6)]
    times = [f"ATen {1000 * do_bench(lambda: parts.sum(0).to(torch.bfloat16)):.1f} us"]
    for launch in [tg.COLUMN_SUMS_LAUNCH, (4096, 4), (16384, 16), (2048, 4)]:  # entries an iteration, num_warps
        times.append(f"{launch} {1000 * do_bench(lambda: tg.column_sums(parts, torch.bfloat16, launch)):.1f} us")
    print(f"time the lambdas' sums of {tokens // 2} x 2 partial sums: {', '.join(times)}")
    times = [f"torch's ops {1000 * do_bench(lambda: tg.weight_grad_x_scales(grad_scale, x_scale)):.1f} us"]
    for launch in [tg.LARGEST_PRODUCT_LAUNCH, (4096, 4), (16384, 16), (2048, 4)]:  # BLOCK, num_warps
        ms = do_bench(lambda: tg.largest_product(grad_scale, x_scale, tg.WEIGHT_GRAD_X_SCALE_FLOOR, launch))
        times.append(f"{launch} {1000 * ms:.1f} us")
    print(f"time fp8_qkv_weight_grad's total scale at {tokens} tokens: {', '.join(times)}")
    return results


def gate_logits_checks(tokens: int = 49152, heads: int = 6, dims: int = 12) -> list[bool]:
    """The attention gate's logits op forward and backward (bf16, a micro-step's tokens) against fp64 torch and
    against the bf16 linear layer it replaced. Untimed here: do_bench of either way ran at the host's pace (the op
    588 us, the layer 96.5 us, session 70), where the census's kernels took 6.8 + 4.5 us a call against the layer's
    ~32 us (perf/kernel_census.py)."""
    x = torch.randn(tokens, dims, device="cuda", dtype=torch.bfloat16)
    w = (torch.randn(heads, dims, device="cuda") * 0.3).bfloat16()
    grad = (torch.randn(tokens, heads, device="cuda") * 1e-3).bfloat16()
    ours = [t.clone().requires_grad_() for t in (x, w)]
    theirs = [t.clone().requires_grad_() for t in (x, w)]
    logits, linear = tg.gate_logits(*ours), F.linear(*theirs)
    logits.backward(grad), linear.backward(grad)
    x64, w64, grad64 = x.double(), w.double(), grad.double()
    results = []
    for name, got, cublas, exact in [("logits", logits, linear, x64 @ w64.T), ("x's gradient", ours[0].grad,
                                      theirs[0].grad, grad64 @ w64), ("w's gradient", ours[1].grad, theirs[1].grad,
                                                                      grad64.T @ x64)]:
        results += [check(f"gate_logits {name} vs fp64", relative_error(got, exact), 4e-3),
                    check(f"gate_logits {name} vs the bf16 linear layer", relative_error(got, cublas), 4e-3)]
    return results


def fused_head_ce_checks() -> list[bool]:
    """The fused softcapped cross entropy of the FP8 head (gradients in the forward: a Triton row kernel writing the
    float8 gradient, a transpose kernel) against the unfused path (fp8_mm, softcap, F.cross_entropy) that the CPU
    takes."""
    scales = (tg.normed_e4m3_scale(768), 2 ** -9, 1 / 448)
    x = torch.nn.functional.rms_norm(torch.randn(8192, 768, device="cuda"), (768,)).bfloat16()
    w = torch.randn(50304, 768, device="cuda") * 0.5  # logits of a few units
    targets = torch.randint(0, 50304, (8192,), device="cuda", dtype=torch.int32)
    xs = [x.clone().requires_grad_(True) for _ in range(2)]
    ws = [w.clone().requires_grad_(True) for _ in range(2)]
    loss = tg.fp8_head_ce(xs[0], ws[0], *tg.head_weight_casts(w, scales[1]), targets, *scales)[0]
    logits = tg.fp8_mm(xs[1], ws[1], *scales)[0]
    reference = torch.nn.functional.cross_entropy(tg.softcap(logits), targets.long(), reduction="sum")
    loss.backward()
    reference.backward()
    # both quantise the gradient to e5m2, the torch path after rounding it to bf16 and dividing in bf16: two
    # roundings of 2 mantissa bits apart, 2.2e-2 in session 5. The kernel's tanh.approx moves each capped logit by
    # less than 0.008 (exact sigmoid: 8.6e-8 relative on the loss)
    results = [check("fused head CE loss vs torch", relative_error(loss, reference), 1e-3),
               check("fused head CE grad_x vs torch", relative_error(xs[0].grad, xs[1].grad), 4e-2),
               check("fused head CE grad_w vs torch", relative_error(ws[0].grad, ws[1].grad), 4e-2)]
    z = logits.detach().float().requires_grad_(True)
    torch.nn.functional.cross_entropy(tg.softcap(z), targets.long(), reduction="sum").backward()
    grad_f8 = torch.empty_like(logits, dtype=torch.float8_e5m2)
    tg.softcap_ce_rows(logits.detach(), targets, scales[2], grad_f8)
    expected = tg.to_float8(z.grad, scales[2], torch.float8_e5m2)
    same = (grad_f8.view(torch.uint8) == expected.view(torch.uint8)).float().mean().item()
    # tanh.approx's gradient is ~1e-3 off, so entries next to a rounding boundary of e5m2 may round the other way
    print(f"{'ok ' if same > 0.98 else 'BAD'} fused head CE float8 gradient: {same:.6f} of entries equal torch's cast")
    transposed = torch.equal(tg.transposed(grad_f8).view(torch.uint8), grad_f8.view(torch.uint8).T)
    print(f"{'ok ' if transposed else 'BAD'} fused head CE transposed gradient equals the gradient's transpose")
    saturated = torch.empty(2, 8, device="cuda", dtype=torch.float8_e5m2)  # the kernel leaves the range to the cast
    tg.softcap_ce_rows(torch.zeros(2, 8, device="cuda", dtype=torch.bfloat16),
                       torch.tensor([3, 5], device="cuda", dtype=torch.int32), 1e-9, saturated)
    saturates = (saturated[0, 3].item() == -57344 and saturated[1, 5].item() == -57344
                 and saturated[0, 0].item() == 57344)
    print(f"{'ok ' if saturates else 'BAD'} fused head CE float8 gradient past e5m2's range saturates")
    rows_logits = torch.randn(49152, 50304, device="cuda", dtype=torch.bfloat16) * 3
    rows_targets = torch.randint(0, 50304, (49152,), device="cuda", dtype=torch.int32)
    loss_rows, grad_rows = torch.empty(49152, device="cuda"), torch.empty_like(rows_logits, dtype=torch.float8_e5m2)
    for fast in (True, False):  # the proxy step's rows: the kernel's two ways of computing tanh and exp2
        ms = do_bench(lambda: tg.softcap_ce_kernel[(49152,)](
            rows_logits, rows_targets, loss_rows, grad_rows, 50304, 1 / scales[2], -math.log2(scales[2]),
            torch.finfo(torch.float8_e5m2).max, BLOCK=tg.CE_BLOCK, ON_GPU=fast, num_warps=tg.CE_WARPS))
        print(f"time softcap_ce_kernel, 49152 x 50304 bf16 logits, "
              f"{'tanh.approx, ex2.approx.ftz' if fast else 'exact sigmoid, exp2'}: {ms:.2f} ms")
    return results + [same > 0.98, transposed, saturates]


def add_rows_checks() -> list[bool]:
    """The embedding tables' gradient sums (add_rows_triton): a micro-step's 49,152 bf16 rows added by token id (in id
    order) into fp32 sums that already hold a micro-step's, against index_add_; and its time."""
    gen = torch.Generator("cuda").manual_seed(14)
    ranks = torch.arange(1, 50305, device="cuda", dtype=torch.float64)  # ids with a long tail, as text's: long runs
    ids = torch.multinomial(1 / ranks, 49152, replacement=True, generator=gen).int()
    rows = torch.randn(49152, 768, device="cuda", generator=gen).bfloat16()
    sums = torch.randn(50304, 768, device="cuda", generator=gen)
    expected = sums.clone().index_add_(0, ids.long(), rows.float())
    sorted_ids, order = ids.sort()
    tg.add_rows_triton(sums, sorted_ids, order, rows)
    result = check("add_rows_triton vs index_add_", relative_error(sums, expected), 1e-6)
    us = do_bench(lambda: tg.add_rows_triton(sums, sorted_ids, order, rows)) * 1000  # the sums grow: checked above
    print(f"time add_rows_triton of a micro-step's rows: {us:.1f} us")
    return [result]


def float8_both_ways_checks() -> list[bool]:
    """The FP8 head's one-pass casts of x (bf16) and w (fp32) at the proxy's sizes, byte for byte against to_float8
    (torch's casts) and its transpose, saturated and NaN kept; then their time against the eager casts plus the
    Triton transpose (the CPU tests run the kernel under the interpreter, whose casts misround)."""
    results = []
    for name, t, scale in [("x", torch.randn(49152, 768, device="cuda").mul_(3).bfloat16(), tg.normed_e4m3_scale(768)),
                           ("w", torch.randn(50304, 768, device="cuda").mul_(0.3), 2 ** -9)]:
        t.view(-1)[:3] = torch.tensor([1e4, -1e4, float("nan")])
        out, out_t = tg.float8_both_ways(t, scale)
        expected = tg.to_float8(t, scale, torch.float8_e4m3fn)
        for layout, ours, theirs in [("row-major", out, expected), ("transposed", out_t, expected.T)]:
            differs = (ours.view(torch.uint8) != theirs.view(torch.uint8)).float().mean().item()
            results.append(check(f"float8_both_ways {name} {layout} bytes unequal to torch's cast", differs, 1e-9))
        one_pass = do_bench(lambda: tg.float8_both_ways(t, scale))
        eager = do_bench(lambda: tg.transposed(tg.to_float8(t, scale, torch.float8_e4m3fn)))
        print(f"time float8 casts of {name} {tuple(t.shape)} {t.dtype}: one pass {one_pass * 1000:.1f} us, "
              f"eager cast and transpose kernel {eager * 1000:.1f} us")
    return results


def attention_inputs_checks(script, track: str, tokens: int, heads: int, head_dim: int = 128) -> list[bool]:
    """A track's attention inputs (QK-norm, rotary, value mix: one kernel each way) against its torch path in fp32 at
    the proxy step's shape, and the kernels' forward + backward time at five launches against inductor's kernels for
    the torch path; for track 1 also its backward alone at each launch, storing the bf16 gradient or the rowwise e4m3
    one (--fp8_qkv's)."""
    cos, sin = (t.cuda() for t in script.Rotary(head_dim, tokens).tables(tokens))
    qkv = torch.randn(1, tokens, 3 * heads, head_dim, device="cuda", dtype=torch.bfloat16)
    ve = torch.randn(1, tokens, heads, head_dim, device="cuda", dtype=torch.bfloat16)
    lambdas = torch.tensor([0.7, -0.4], device="cuda")
    grads = tuple(torch.randn_like(ve) for _ in range(3))
    exact = [t.float().requires_grad_() for t in (qkv, lambdas, ve)]
    reference = script.attention_inputs_torch(exact[0], cos, sin, exact[1], exact[2])
    expected = torch.autograd.grad(reference, exact, [g.float() for g in grads])
    outputs = script.attention_inputs_triton(qkv, cos, sin, lambdas, ve)
    gradients = script.attention_inputs_backward_triton(grads, qkv, cos, sin, lambdas, ve)[:3]
    results = [check(f"{track} attention inputs {name} vs torch", relative_error(ours, theirs), 1e-2)
               for name, ours, theirs in zip(("q", "k", "v"), outputs, reference)]
    results += [check(f"{track} attention inputs gradient of {name} vs torch", relative_error(ours, theirs), 1e-2)
                for name, ours, theirs in zip(("qkv", "lambdas", "value embedding"), gradients, expected)]
    leaves = [t.clone().requires_grad_() for t in (qkv, lambdas, ve)]
    inductor = torch.compile(lambda qkv, lambdas, ve: script.attention_inputs_torch(qkv, cos, sin, lambdas, ve))
    shape = f"{tokens} tokens x {heads} heads"
    try:
        ms = do_bench(lambda: torch.autograd.grad(inductor(*leaves), leaves, grads))
        print(f"time {track} attention inputs forward + backward, {shape}, inductor: {ms:.3f} ms")
    except InductorError as error:  # session 24: track 2's shape alone hit a tiling assertion
        print(f"time {track} attention inputs forward + backward, {shape}, inductor: did not compile "
              f"({tg.first_line(error)[:100]})")
    for launch in [script.ATTENTION_INPUTS_LAUNCH, (8, 4), (32, 4), (32, 8), (64, 8)]:  # BLOCK_ROWS, num_warps
        ms = do_bench(lambda: (script.attention_inputs_triton(qkv, cos, sin, lambdas, ve, launch),
                               script.attention_inputs_backward_triton(grads, qkv, cos, sin, lambdas, ve, launch)))
        print(f"time {track} attention inputs forward + backward, {shape}, kernels {launch}: {ms:.3f} ms")
        if script is tg:
            alone = [1000 * do_bench(lambda: tg.attention_inputs_backward_triton(grads, qkv, cos, sin, lambdas, ve,
                                                                                 launch, rowwise_fp8=rowwise))
                     for rowwise in (False, True)]
            print(f"time {track} attention inputs backward alone, {shape}, kernel {launch}: {alone[0]:.1f} us, "
                  f"with the rowwise e4m3 gradient instead of bf16 {alone[1]:.1f} us")
    return results


def medium_plain_head(x, w, targets):
    return F.cross_entropy(tm.softcap(F.linear(x, w).float()), targets, reduction="sum")


def medium_head_checks() -> list[bool]:
    """Track 2's fused head (gradients in the forward, the logits' gradient written over the logits) against autograd
    of the plain head; then forward + backward at the proxy's 64K tokens: time and peak memory of both."""
    x = F.rms_norm(torch.randn(8192, 1024, device="cuda"), (1024,)).bfloat16()
    w = (torch.randn(50304, 1024, device="cuda") * 0.5).bfloat16()
    targets = torch.randint(0, 50304, (8192,), device="cuda")
    xs = [x.clone().requires_grad_(True) for _ in range(2)]
    ws = [w.clone().requires_grad_(True) for _ in range(2)]
    fused = tm.head_ce(xs[0], ws[0], targets)[0]
    plain = medium_plain_head(xs[1], ws[1], targets)
    (fused / 8192).backward()
    (plain / 8192).backward()
    # half of the row sums' exps come from a cubic (7.5e-5 relative): each row's loss within 7.5e-5 of ~10
    results = [check("medium head loss vs plain", relative_error(fused, plain), 2e-5),
               check("medium head grad_x vs plain", relative_error(xs[0].grad, xs[1].grad), 1e-2),
               check("medium head grad_w vs plain", relative_error(ws[0].grad, ws[1].grad), 1e-2)]
    x = F.rms_norm(torch.randn(65536, 1024, device="cuda"), (1024,)).bfloat16().requires_grad_(True)
    targets = torch.randint(0, 50304, (65536,), device="cuda")
    compiled = torch.compile(medium_plain_head)
    for name, head in [("fused head", lambda *a: tm.head_ce(*a)[0]), ("torch.compile plain head", compiled)]:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        ms = do_bench(lambda: head(x, ws[0], targets).backward(), grad_to_none=[x, ws[0]])
        peak = torch.cuda.max_memory_allocated() / 2 ** 30
        print(f"time {name}: forward + backward of 65536 x 1024 -> 50304, {ms:.2f} ms, peak {peak:.1f} GiB")
    return results


def medium_plain_mlp(x, fc_w, proj_w):
    return F.linear(F.relu(F.linear(F.rms_norm(x, (x.size(-1),)), fc_w)).square(), proj_w)


def medium_mlp_checks() -> list[bool]:
    """Track 2's MLP with its RMSNorm and relu-square in the epilogue GEMMs (NormedReluSquareMLP, bf16, the script's
    launches) against the plain MLP in fp64; the plain MLP in bf16 beside it, for the size of bf16's own error."""
    x = (torch.randn(8192, 1024, device="cuda") * 30).bfloat16()
    fc_w = (torch.randn(4096, 1024, device="cuda") / 32).bfloat16()
    proj_w = (torch.randn(1024, 4096, device="cuda") / 64).bfloat16()
    grad_y = torch.randn(8192, 1024, device="cuda").bfloat16()
    reference = [t.double().requires_grad_(True) for t in (x, fc_w, proj_w)]
    medium_plain_mlp(*reference).backward(grad_y.double())
    results = []
    for name, mlp in [("epilogue MLP", tm.NormedReluSquareMLP.apply), ("plain bf16 MLP", medium_plain_mlp)]:
        inputs = [t.clone().requires_grad_(True) for t in (x, fc_w, proj_w)]
        out = mlp(*inputs)
        out.backward(grad_y)
        errors = [relative_error(out, medium_plain_mlp(*[t.detach() for t in reference]))]
        errors += [relative_error(mine.grad, theirs.grad) for mine, theirs in zip(inputs, reference)]
        for part, error in zip(["output", "grad_x", "grad_fc_w", "grad_proj_w"], errors):
            results.append(check(f"medium {name} {part} vs fp64", error, 1e-2))
    return results


def medium_plain_newton_schulz(g, dtype=torch.bfloat16, coefficients=tm.NS_COEFFICIENTS):
    """Track 2's orthogonalisation before it used sym_matmul: the same iterations with plain matmuls, in bf16 as it
    ran (or in fp64: the reference), one step per (a, b, c) of coefficients."""
    x = g.to(dtype)
    transposed = x.size(-2) > x.size(-1)
    if transposed:
        x = x.mT
    x = x / (x.norm(dim=(-2, -1), keepdim=True) + 1e-7)
    for a, b, c in coefficients:
        xxt = x @ x.mT
        x = a * x + (b * xxt + c * xxt @ xxt) @ x
    return x.mT if transposed else x


def medium_orthogonalize_checks() -> list[bool]:
    """Track 2's Newton-Schulz through the symmetric kernel, eager and compiled (muon_update is), and the plain bf16
    matmuls it replaced, each against the same iterations in fp64 (on the CPU all are 1-2% from them), on its stacks
    of one GPU (qkvo_w, fc_w, proj_w; the tall fc_w gives the kernel a transposed input); then the time of the two,
    compiled."""
    shapes = [(15, 4, 1024, 1024), (16, 4096, 1024), (16, 1024, 4096)]
    stacks = [torch.randn(shape, device="cuda") for shape in shapes]
    orthogonalize, plain = (torch.compile(f, dynamic=False) for f in (tm.orthogonalize, medium_plain_newton_schulz))
    results = []
    for shape, g in zip(shapes, stacks):
        reference = medium_plain_newton_schulz(g, torch.float64)
        for name, f in [("orthogonalize", tm.orthogonalize), ("orthogonalize compiled", orthogonalize),
                        ("plain matmuls compiled", plain)]:
            results.append(check(f"medium {name} {'x'.join(map(str, shape))} vs fp64 iterations",
                                 relative_error(f(g), reference), 3e-2))
    for name, f in [("symmetric kernel", orthogonalize), ("plain matmuls", plain)]:
        ms = do_bench(lambda: [f(g) for g in stacks])
        print(f"time medium Newton-Schulz of the stacks {shapes}, compiled, {name}: {ms:.2f} ms")
    return results


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
