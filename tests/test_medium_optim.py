"""train_gpt_medium.py optimizers: exact fp32 master weights as bf16 + uint16, the Muon update, sharded Adam."""

import sys
from pathlib import Path

import pytest
import torch

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / "perf"))
import train_gpt_medium as medium  # noqa: E402
from gpu_checks import medium_plain_newton_schulz as plain_newton_schulz  # noqa: E402  (the GPU check's reference)
from stand_ins import check_train_step_applies_the_schedules_of_its_own_step  # noqa: E402


def scalars(momentum, lr, keep):
    return [torch.tensor(v, dtype=torch.float32) for v in (momentum, lr, keep)]


def test_split_then_join_is_exact_for_every_bit_pattern():
    bits = torch.randint(-2**31, 2**31, (200_000,), dtype=torch.int64).to(torch.int32)
    bits[:4] = torch.tensor([0, -2**31, 0x7F800000, 1])  # +0, -0, +inf, smallest subnormal
    high, low = medium.split_fp32(bits.view(torch.float32))
    assert high.dtype == low.dtype == torch.uint16
    assert torch.equal(medium.join_fp32(high, low).view(torch.int32), bits)
    # the bf16 half is the fp32 number with its low 16 bits cleared, i.e. truncated toward zero
    assert torch.equal(high.view(torch.bfloat16).float().view(torch.int32), bits & -65536)


def test_split_of_random_weights_keeps_the_bf16_parameter_close():
    x = torch.randn(10_000) * torch.logspace(-20, 20, 10_000)
    high, low = medium.split_fp32(x)
    as_bf16 = high.view(torch.bfloat16).float()
    assert (as_bf16.abs() <= x.abs()).all()
    assert ((x - as_bf16).abs() <= x.abs() * 2**-7).all()  # within one bf16 ulp
    assert torch.equal(medium.join_fp32(high, low), x)


def test_many_tiny_updates_match_fp32_where_plain_bf16_drifts():
    torch.manual_seed(0)
    rows, cols, steps = 32, 16, 120
    start = (torch.rand(rows, cols) * 0.5 + 0.5).bfloat16()  # magnitudes in [0.5, 1): bf16 ulp 2^-8
    direction = torch.randn(rows, cols)
    grads = [(direction + 0.3 * torch.randn(rows, cols)).bfloat16() for _ in range(steps)]
    momentum, lr, keep = scalars(0.95, 3e-4, 1 - 3e-4 * 0.02)

    param, low_bits, buffer = start.clone(), torch.zeros(rows, cols, dtype=torch.uint16), torch.zeros(rows, cols)
    reference, ref_buffer, plain = start.float(), torch.zeros(rows, cols), start.clone()
    for grad in grads:
        medium.muon_update(param.view(torch.uint16), low_bits, buffer, grad, momentum, lr, keep)
        ref_buffer = momentum * ref_buffer + (1 - momentum) * grad.float()
        update = medium.orthogonalize(momentum * ref_buffer + (1 - momentum) * grad.float()).float()
        reference = reference * keep - update * lr
        plain = (plain.float() * keep - update * lr).bfloat16()

    master = medium.join_fp32(param.view(torch.uint16), low_bits)
    assert torch.equal(buffer, ref_buffer)
    assert torch.equal(master, reference)  # exact: the split/join loses nothing
    assert torch.equal(param, medium.split_fp32(reference)[0].view(torch.bfloat16))
    moved = (reference - start.float()).abs().max().item()
    assert moved > 0.015  # the updates add up to several bf16 ulps...
    assert (plain.float() - reference).abs().max().item() > 0.5 * moved  # ...which plain bf16 rounds away


@pytest.mark.parametrize("shape", [(32, 128), (128, 32), (3, 48, 96)])
def test_orthogonalize_gives_near_unit_singular_values(shape):
    torch.manual_seed(1)
    g = torch.randn(shape)
    out = medium.orthogonalize(g)
    assert out.shape == g.shape and out.dtype == torch.float16
    singular = torch.linalg.svdvals(out.float())
    assert singular.min() > 0.8 and singular.max() < 1.2
    assert torch.equal(medium.orthogonalize(g.mT), out.mT)  # tall matrices are done transposed


def test_compiled_newton_schulz_update_is_a_plain_bmm(inductor_source):
    """As track 1's: (a I + poly) @ x, no baddbmm, one bmm a step for a square x and one a Gram part for a wide one;
    the other products are calls of the opaque sym_matmul op."""
    for shape, bmm_calls, op_calls in [((2, 3, 32, 32), 5, 10), ((2, 3, 32, 64), 2, 16)]:
        code = inductor_source(medium.orthogonalize, torch.randn(shape))
        assert "baddbmm" not in code
        assert code.count("extern_kernels.bmm(") == bmm_calls
        assert code.count("torch.ops.nanogpt_medium.sym_matmul.default(") == op_calls


def test_orthogonalize_is_scale_free_past_the_fp16_range():
    """Gradients are sums over the step's tokens: a norm past fp16's 65,504 (or an entry past it) must not turn the
    update into zeros or NaN."""
    g = torch.randn(2, 32, 128, generator=torch.Generator().manual_seed(2))
    torch.testing.assert_close(medium.orthogonalize(g * 1e5), medium.orthogonalize(g), rtol=0, atol=2e-3)


def test_orthogonalize_of_zero_is_zero():
    assert torch.equal(medium.orthogonalize(torch.zeros(8, 16)).float(), torch.zeros(8, 16))


@pytest.fixture(params=["torch", "triton"])
def sym_matmul_path(request, require_interpreted, monkeypatch):
    """sym_matmul as the CPU runs it (torch), or through its Triton kernel as the GPU does, in the interpreter (fp16,
    as on the GPU)."""
    if request.param == "triton":
        require_interpreted(medium.sym_matmul_kernel)
        monkeypatch.setattr(medium, "sym_matmul", medium.sym_matmul_triton)


@pytest.mark.parametrize("shape", [(32, 128), (128, 32), (3, 48, 96), (2, 4, 64, 64)])  # last: stacked qkvo_w
def test_orthogonalize_matches_the_plain_matmul_iterations(sym_matmul_path, shape):
    """The fp16 Gram form (wide x) or iterations on x (square) through sym_matmul, against the plain matmul iterations
    in fp64: closer than those iterations in bf16 (~2% here, as track 2 ran them before), where swapped coefficients
    or a wrong mirror are far off."""
    g = torch.randn(shape, generator=torch.Generator().manual_seed(3))
    out, reference = medium.orthogonalize(g), plain_newton_schulz(g, torch.float64)
    assert out.shape == g.shape and out.dtype == torch.float16

    def error(x):
        return (x.double() - reference).norm(dim=(-2, -1)) / reference.norm(dim=(-2, -1))

    assert (error(out) < 0.005).all() and (error(out) < error(plain_newton_schulz(g)) / 3).all(), error(out)


def spread_spectrum(rows, cols, power, seed):
    """Two wide matrices whose i-th singular value is i^-power, as gradients' spectra fall off."""
    gen = torch.Generator().manual_seed(seed)
    u = torch.linalg.qr(torch.randn(2, rows, rows, generator=gen, dtype=torch.float64))[0]
    v = torch.linalg.qr(torch.randn(2, cols, rows, generator=gen, dtype=torch.float64))[0]
    return (u * torch.arange(1, rows + 1, dtype=torch.float64) ** -power) @ v.mT


def gram_parts(g, parts, dtype=torch.float16):
    """orthogonalize of a wide g, normed as it is, with its steps in the given parts."""
    x = (g / (g.norm(dim=(-2, -1), keepdim=True) + 1e-7)).to(dtype)
    for steps in parts:
        x = torch.bmm(medium.gram_newton_schulz(medium.sym_matmul(x), steps), x)
    return x


def relative_error(x, reference):
    return ((x.double() - reference).norm(dim=(-2, -1)) / reference.norm(dim=(-2, -1))).max().item()


JORDAN = [(3.4445, -4.7750, 2.0315)] * 5  # Muon's fixed quintic: the Gram form is no matter of the coefficients


@pytest.mark.parametrize("coefficients", [medium.NS_COEFFICIENTS, JORDAN], ids=["track 2's", "jordan"])
@pytest.mark.parametrize("wide", [True, False])
def test_gram_newton_schulz_is_the_plain_iterations_in_exact_arithmetic(coefficients, wide):
    """In fp64 the Gram form (R -> P R P, x multiplied once a part) equals the iterations on x, each product's mirror
    included, with orthogonalize's restarts for either layout and with all five steps in one part."""
    g = spread_spectrum(16, 48, 1.0, seed=14)
    reference = plain_newton_schulz(g, torch.float64, coefficients)
    for parts in [medium.restarts(coefficients, wide), [coefficients]]:
        assert relative_error(gram_parts(g, parts, torch.float64), reference) < 1e-12


def test_restarts_split_wide_matrices_after_two_steps_and_square_ones_every_step():
    steps = medium.NS_COEFFICIENTS
    assert medium.restarts(steps, True) == [steps[:2], steps[2:]]
    assert medium.restarts(steps, False) == [[step] for step in steps]


def test_newton_schulz_coefficients_are_track_2s_records():
    """The five (a, b, c) steps of You Jiacheng's schedule that track 2's records ran. Every other test takes its
    reference iterations from medium.NS_COEFFICIENTS, so a changed step (Jordan's fixed quintic first, say) moves the
    script and its references together and passes them all, while the run's updates change."""
    assert medium.NS_COEFFICIENTS == [(4.0848, -6.8946, 2.9270), (3.9505, -6.3029, 2.6377), (3.7418, -5.5913, 2.3037),
                                      (2.8769, -3.1427, 1.2046), (2.8366, -3.0525, 1.2012)]


@pytest.mark.parametrize("power", [1.0, 2.0])
def test_fp16_gram_with_its_restart_beats_the_bf16_iterations_where_no_restart_diverges(power):
    """Against the iterations in fp64, on spectra falling as i^-1 and i^-2: orthogonalize (fp16, Gram steps 2 + 3) is
    several times closer than the bf16 iterations it replaced. All five steps in one Gram part let fp16 round-off in R
    grow into spurious eigenvalues, which the steepest spectrum turns into an error far above any of them."""
    g = spread_spectrum(32, 128, power, seed=15)
    reference = plain_newton_schulz(g, torch.float64)
    gram = relative_error(medium.orthogonalize(g), reference)
    assert gram == relative_error(gram_parts(g, medium.restarts(medium.NS_COEFFICIENTS, True)), reference)
    bf16 = relative_error(plain_newton_schulz(g), reference)
    assert gram < bf16 / 2
    no_restart = relative_error(gram_parts(g, [medium.NS_COEFFICIENTS]), reference)
    if power == 2.0:
        assert not no_restart < 10 * bf16  # nan counts


def muon(params_by_group, lr=0.05, momentum=0.9):
    groups = [dict(params=params, weight_decay=wd) for params, wd in params_by_group]
    return medium.Muon(groups, lr, momentum, medium.Comm(0, 1), medium.muon_update)


def test_muon_step_scales_lr_for_tall_matrices_and_decays_per_group():
    torch.manual_seed(2)
    tall = [torch.nn.Parameter(torch.randn(16, 8).bfloat16()) for _ in range(2)]
    wide = torch.nn.Parameter(torch.randn(8, 16).bfloat16())
    before = [p.detach().clone() for p in tall + [wide]]
    for p in tall:
        p.grad = torch.randn(16, 8).bfloat16()
    wide.grad = torch.zeros(8, 16, dtype=torch.bfloat16)
    opt = muon([(tall, 0.1), ([wide], 0.5)])
    opt.step()

    for p, old in zip(tall, before):  # reference: one update with lr x sqrt(rows / cols)
        expected, low = old.clone(), torch.zeros(16, 8, dtype=torch.uint16)
        medium.muon_update(expected.view(torch.uint16), low, torch.zeros(16, 8), p.grad,
                           *scalars(0.9, 0.05 * 2 ** 0.5, 1 - 0.05 * 0.1))
        assert torch.equal(p.detach(), expected)
        assert torch.equal(opt.state[p]["low_bits"], low)
    # a zero gradient leaves only the decay p *= 1 - lr * weight_decay, applied in fp32
    master = medium.join_fp32(wide.detach().view(torch.uint16), opt.state[wide]["low_bits"])
    assert torch.equal(master, before[2].float() * torch.tensor(1 - 0.05 * 0.5, dtype=torch.float32))


def test_muon_step_leaves_the_lr_of_wide_and_square_matrices_unscaled():
    """lr x sqrt(rows / cols) for tall matrices only (track 2's fc): max(1, rows / cols), so a wide one (its proj
    matrices, 4 x wider than high) keeps lr as a square one (its QKVO) does; sqrt(rows / cols) alone would halve the
    proj steps. The tall test above gives its wide matrix a zero gradient, which cannot tell."""
    torch.manual_seed(8)
    wide, square = torch.nn.Parameter(torch.randn(8, 32).bfloat16()), torch.nn.Parameter(torch.randn(8, 8).bfloat16())
    before = [p.detach().clone() for p in (wide, square)]
    for p in (wide, square):
        p.grad = torch.randn(p.shape).bfloat16()
    muon([([wide], 0.1), ([square], 0.1)]).step()
    for p, old in zip((wide, square), before):
        expected = old.clone()
        medium.muon_update(expected.view(torch.uint16), torch.zeros(p.shape, dtype=torch.uint16), torch.zeros(p.shape),
                           p.grad, *scalars(0.9, 0.05, 1 - 0.05 * 0.1))
        assert torch.equal(p.detach(), expected)


def test_muon_step_takes_lr_and_momentum_from_its_groups_as_the_schedules_set_them():
    """train_step sets each group's lr (the cooldown) and momentum (the warmup) before the step; the update must read
    them there, not the values Muon was built with (its defaults), or neither schedule reaches the hidden matrices. The
    schedules' test (stand-in optimizers) and a run (both of its runs alike) cannot tell. Two steps: the first's
    update, orthogonalize((1 - m^2) g), is the same for any momentum m."""
    torch.manual_seed(9)
    param = torch.nn.Parameter(torch.randn(8, 16).bfloat16())
    expected, low, buffer = param.detach().clone(), torch.zeros(8, 16, dtype=torch.uint16), torch.zeros(8, 16)
    opt = muon([([param], 0.1)])
    opt.param_groups[0].update(lr=0.02, momentum=0.6)
    for _ in range(2):
        param.grad = torch.randn(8, 16).bfloat16()
        opt.step()
        medium.muon_update(expected.view(torch.uint16), low, buffer, param.grad, *scalars(0.6, 0.02, 1 - 0.02 * 0.1))
    assert torch.equal(param.detach(), expected)


def test_muon_updates_each_group_in_one_call_and_keeps_per_matrix_state():
    """Eight same-shape matrices take one update call (a stack), not eight: per-matrix calls leave most of the GPU
    idle on 1024 x 1024 products. The state dict still holds each matrix's low bits and momentum, as views of
    the stacks that later steps update in place."""
    torch.manual_seed(4)
    params = [torch.nn.Parameter(torch.randn(16, 8).bfloat16()) for _ in range(8)]
    twins = [torch.nn.Parameter(p.detach().clone()) for p in params]
    calls = []

    def counting_update(*args):
        calls.append(args[0].shape)
        medium.muon_update(*args)

    stacked = medium.Muon([dict(params=params, weight_decay=0.1)], 0.05, 0.9, medium.Comm(0, 1), counting_update)
    reference_state = {}  # each twin's (low bits, momentum)
    bases = []  # the stacks behind the state dict's views, after each step
    for _ in range(2):
        for p, twin in zip(params, twins):
            p.grad = twin.grad = torch.randn(16, 8).bfloat16()
        stacked.step()
        bases.append([stacked.state[params[0]][key]._base for key in ("low_bits", "momentum_buffer")])
        for twin in twins:  # the reference: the same update, one matrix at a time
            state = reference_state.setdefault(twin, (torch.zeros(16, 8, dtype=torch.uint16), torch.zeros(16, 8)))
            medium.muon_update(twin.data.view(torch.uint16), *state, twin.grad, *scalars(0.9, 0.05 * 2 ** 0.5,
                                                                                      1 - 0.05 * 0.1))
    assert calls == [(8, 16, 8)] * 2
    assert None not in bases[0] and all(a is b for a, b in zip(*bases))  # updated in place, not stacked again
    # CPU fp16 products of 8 matrices and of 1 can round an ulp apart (on Sapphire Rapids they do), which Newton-Schulz
    # grows to ~1e-4 in the weights; another matrix's state would be ~1 off
    for p, twin in zip(params, twins):
        master = medium.join_fp32(p.detach().view(torch.uint16), stacked.state[p]["low_bits"])
        reference = medium.join_fp32(twin.detach().view(torch.uint16), reference_state[twin][0])
        torch.testing.assert_close(master, reference, rtol=0, atol=1e-3)
        assert torch.equal(stacked.state[p]["momentum_buffer"], reference_state[twin][1])


def test_muon_updates_the_parameters_in_place_as_rows_of_one_stack_per_group():
    """Each parameter is a view of its group's stack, so the step writes the parameters (their bf16 high bits)
    without stacking them and copying them back; restoring a model state (as the warmup does) keeps the views."""
    torch.manual_seed(6)
    params = [torch.nn.Parameter(torch.randn(8, 16).bfloat16()) for _ in range(3)]
    module = torch.nn.ParameterList(params)
    initial = {key: value.clone() for key, value in module.state_dict().items()}
    opt = muon([(params[:2], 0.1), (params[2:], 0.0)])
    for p in params:
        p.grad = torch.randn(8, 16).bfloat16()
    opt.step()
    module.load_state_dict(initial)
    assert [p.data_ptr() for p in params] == [row.data_ptr() for stack in opt.stacks for row in stack]
    before = [p.detach().clone() for p in params]
    opt.step()
    for p, old, row in zip(params, before, [row for stack in opt.stacks for row in stack]):
        assert torch.equal(p.detach(), row) and not torch.equal(p.detach(), old)


def test_restoring_the_initial_muon_state_drops_the_low_bits():
    param = torch.nn.Parameter(torch.randn(8, 16).bfloat16())
    opt = muon([([param], 0.0)])
    initial = opt.state_dict()
    param.grad = torch.randn(8, 16).bfloat16()
    opt.step()
    assert opt.state[param]["low_bits"].any()
    opt.load_state_dict(initial)  # what the warmup does: the restored bf16 weights have zero low bits
    assert len(opt.state) == 0


@pytest.mark.parametrize("count, world_size, rows", [(15, 1, 15), (15, 2, 16), (15, 4, 16), (3, 4, 4), (6, 8, 8),
                                                    (16, 8, 16)])
def test_padded_stack_pads_a_group_to_a_multiple_of_the_world_size_with_zeros(count, world_size, rows):
    """Track 2's 15 attention matrices (block 7 has none) take one zero row over 2, 4 or 8 ranks; a 6-block model's 6
    MLP matrices take two over 8. The 2-process run pads 15 and 16 matrices alike whatever the sign of the count: a
    pad of len % world_size would give 4 ranks 18 rows, which no reduce-scatter splits."""
    tensors = [torch.full((2, 3), i + 1.0) for i in range(count)]
    stack = medium.padded_stack(tensors, world_size)
    assert stack.shape == (rows, 2, 3)
    assert torch.equal(stack[:count], torch.stack(tensors)) and not stack[count:].any()


class OneRankOf(medium.Comm):
    """Rank `rank` of world_size processes that all hold the same gradients: the reduce-scatter's average is this
    rank's rows of them, and nothing is gathered (the other ranks' rows stay as they were)."""

    def reduce_scatter_avg(self, full):
        return self.own(full).clone(), None

    def all_gather(self, full, shard):
        return None


@pytest.mark.parametrize("world_size, rank", [(2, 0), (2, 1), (4, 1), (4, 3)])
def test_each_rank_updates_its_own_matrices_and_keeps_their_state_under_them(world_size, rank):
    """3 matrices over 2 or 4 ranks (padded to 4 rows): rank r updates matrices r x per_rank onwards as one process
    would, keeps each one's state under that matrix, and leaves the other ranks' rows alone; rank 3 of 4 owns only
    the padding row and updates nothing (a 6-block model's MLP groups over 8 GPUs). The 2-process run cannot tell
    which matrices a rank's state is filed under, nor reach a rank without a matrix."""
    torch.manual_seed(7)
    params = [torch.nn.Parameter(torch.randn(8, 16).bfloat16()) for _ in range(3)]
    twins = [torch.nn.Parameter(p.detach().clone()) for p in params]
    before = [p.detach().clone() for p in params]
    for p, twin in zip(params, twins):
        p.grad = twin.grad = torch.randn(8, 16).bfloat16()
    groups = [dict(params=params, weight_decay=0.1)], [dict(params=twins, weight_decay=0.1)]
    sharded = medium.Muon(groups[0], 0.05, 0.9, OneRankOf(rank, world_size), medium.muon_update)
    whole = medium.Muon(groups[1], 0.05, 0.9, medium.Comm(0, 1), medium.muon_update)
    sharded.step()
    whole.step()
    per_rank = 4 // world_size
    owned = [i for i in range(rank * per_rank, (rank + 1) * per_rank) if i < 3]
    assert len(sharded.state) == len(owned)
    for i, (p, twin) in enumerate(zip(params, twins)):
        if i not in owned:
            assert torch.equal(p.detach(), before[i]) and p not in sharded.state
            continue
        state, reference = sharded.state[p], whole.state[twin]
        assert torch.equal(state["momentum_buffer"], reference["momentum_buffer"])
        # fp16 products of 1 or 2 matrices and of 3 can round an ulp apart (see the one-call test above)
        torch.testing.assert_close(medium.join_fp32(p.detach().view(torch.uint16), state["low_bits"]),
                                   medium.join_fp32(twin.detach().view(torch.uint16), reference["low_bits"]),
                                   rtol=0, atol=1e-3)
        assert not torch.equal(p.detach(), before[i])


def test_comm_averages_the_ranks_gradients_into_this_ranks_rows(monkeypatch):
    """The reduce-scatter averages (the gradient of the global batch's mean loss, as one process's accumulation
    gives); a sum would scale every gradient by the world size, which Adam's eps and Muon's norm floor then see
    differently in a 2-process run and in 1 process."""
    calls = []

    def reduce_scatter(shard, full, op, async_op):
        calls.append((tuple(shard.shape), op, async_op))
        return "handle"

    monkeypatch.setattr(medium, "REDUCE_SCATTER", reduce_scatter)
    comm, full = medium.Comm(1, 4), torch.arange(16.0).view(8, 2)
    shard, handle = comm.reduce_scatter_avg(full)
    assert handle == "handle" and shard.shape == (2, 2)
    assert calls == [((2, 2), medium.dist.ReduceOp.AVG, True)]
    assert torch.equal(comm.own(full), full[2:4])
    assert medium.Comm(0, 1).reduce_scatter_avg(full) == (full, None)  # one process: the full tensor is the shard


class Handle:
    """An async collective's handle that records its wait in a shared log."""

    def __init__(self, log, name):
        self.log, self.name = log, name

    def wait(self):
        self.log.append(f"wait {self.name}")


class AsyncOneRankOf(OneRankOf):
    """OneRankOf whose collectives return handles, as dist's async ones do, and log their calls and waits."""

    def __init__(self, rank, world_size, log):
        super().__init__(rank, world_size)
        self.log = log

    def reduce_scatter_avg(self, full):
        self.log.append("reduce-scatter")
        return super().reduce_scatter_avg(full)[0], Handle(self.log, "reduce-scatter")

    def all_gather(self, full, shard):
        self.log.append("all-gather")
        return Handle(self.log, "all-gather")


@pytest.mark.parametrize("which", ["muon", "adam"])
def test_steps_wait_for_every_gradient_before_its_update_and_for_every_gather_before_returning(which):
    """Both optimizers start every reduce-scatter, wait for each one before updating from it, and wait for all their
    all-gathers before step returns: the next forward reads the gathered weights, and an all-gather still in flight
    would hand it some ranks' rows of the previous step. One process (or the in-process stand-ins) waits on nothing,
    and a 2-process CPU run's gathers are done in time by chance, so neither can tell."""
    torch.manual_seed(10)
    params = [torch.nn.Parameter(torch.randn(8, 16).bfloat16()) for _ in range(2)]
    log = []
    comm = AsyncOneRankOf(0, 2, log)
    for p in params:
        p.grad = torch.randn(8, 16).bfloat16()
    if which == "muon":
        opt = medium.Muon([dict(params=params[:1], weight_decay=0.0), dict(params=params[1:], weight_decay=0.0)],
                          0.05, 0.9, comm, lambda *args: log.append("update"))
    else:
        opt = medium.ShardedAdam([dict(params=params, lr=0.01)], (0.8, 0.95), 1e-10, comm,
                                 lambda *args: log.append("update"))
    opt.step()
    assert log == ["reduce-scatter"] * 2 + ["wait reduce-scatter", "update", "all-gather"] * 2 + ["wait all-gather"] * 2


def test_sharded_adam_keeps_fp32_moments_for_bf16_weights():
    torch.manual_seed(3)
    weight = torch.nn.Parameter(torch.randn(16, 8).bfloat16())
    reference = torch.nn.Parameter(weight.detach().float().clone())
    opt = medium.ShardedAdam([dict(params=[weight], lr=0.01)], (0.8, 0.95), 1e-10, medium.Comm(0, 1))
    ref_opt = torch.optim.Adam([reference], lr=0.01, betas=(0.8, 0.95), eps=1e-10)
    for _ in range(3):
        grad = torch.randn(16, 8)
        weight.grad, reference.grad = grad.bfloat16(), grad.bfloat16().float()
        opt.step()
        ref_opt.step()
        reference.data.copy_(reference.detach().bfloat16().float())  # as if stored in bf16
    assert opt.state[weight]["exp_avg"].dtype == torch.float32
    assert weight.dtype == torch.bfloat16
    torch.testing.assert_close(weight.detach().float(), reference.detach(), rtol=2**-7, atol=1e-6)


def test_sharded_adam_adds_eps_to_the_root_of_the_second_moment_as_torch_adam_does():
    """Gradients from 1e-9 to 1 a column (a rare token's embedding row gets tiny ones): eps = 1e-10 sits beside
    sqrt(v), as in torch's Adam; inside the root it would be sqrt(1e-10) = 1e-5, and updates of gradients below that
    would stall. The bf16 test above has gradients near 1, where either place gives the same steps."""
    torch.manual_seed(5)
    weight = torch.nn.Parameter(torch.randn(16, 8))
    reference = torch.nn.Parameter(weight.detach().clone())
    opt = medium.ShardedAdam([dict(params=[weight], lr=0.01)], (0.8, 0.95), 1e-10, medium.Comm(0, 1))
    ref_opt = torch.optim.Adam([reference], lr=0.01, betas=(0.8, 0.95), eps=1e-10)
    for _ in range(3):
        weight.grad = torch.randn(16, 8) * torch.logspace(-9, 0, 8)
        reference.grad = weight.grad.clone()
        opt.step()
        ref_opt.step()
    torch.testing.assert_close(weight.detach(), reference.detach())


def test_lr_multiplier_past_the_schedule_holds_the_final_frac():
    args = medium.Hyperparameters(num_iterations=5)
    assert [medium.lr_multiplier(s, args) for s in (5, 6, 9)] == [0.0, 0.0, 0.0]  # not negative
    flat = medium.Hyperparameters(num_iterations=5, cooldown_frac=0.0)
    assert [medium.lr_multiplier(s, flat) for s in range(10)] == [1.0] * 10


def test_record_7_schedules_lr_flat_then_to_zero_momentum_warmup_and_window():
    args = medium.Hyperparameters(num_iterations=6450)
    assert medium.lr_multiplier(0, args) == medium.lr_multiplier(2579, args) == 1.0  # flat for 40%
    assert medium.lr_multiplier(6450 - 645, args) == pytest.approx(645 / 3870)  # then linear to 0
    assert medium.lr_multiplier(6450, args) == 0.0
    assert medium.muon_momentum(0, args) == pytest.approx(0.85)
    assert medium.muon_momentum(150, args) == pytest.approx(0.90) and medium.muon_momentum(300, args) == 0.95
    for step in range(args.num_iterations + 1):  # record 7: next_multiple_of_n(1728 * progress, 128) tokens
        tokens = 1728 * step / args.num_iterations
        assert medium.window_blocks_at(step, args) == max(128, -(-tokens // 128) * 128) // 128, step
    assert medium.window_blocks_at(0, args) == 1 and medium.window_blocks_at(6450, args) == 14


def test_lr_cooldown_ends_at_final_lr_frac_and_holds_it():
    """Linear from 1 to final_lr_frac over the cooldown (the record's 0 would hide a schedule that ignores it)."""
    args = medium.Hyperparameters(num_iterations=10, cooldown_frac=0.5, final_lr_frac=0.2)
    assert [medium.lr_multiplier(s, args) for s in range(6)] == [1.0] * 6
    assert medium.lr_multiplier(8, args) == pytest.approx(0.4 + 0.6 * 0.2)
    assert [medium.lr_multiplier(s, args) for s in (10, 11, 20)] == [pytest.approx(0.2)] * 3


def test_momentum_without_warmup_steps_is_the_final_momentum_from_step_0():
    args = medium.Hyperparameters(muon_momentum_warmup_steps=0)
    assert [medium.muon_momentum(s, args) for s in (0, 1, 500)] == [0.95] * 3


def test_window_grows_from_window_start_and_holds_window_end_past_the_schedule():
    """1024 -> 2048 tokens over 4 steps: 8, 10, 12, 14, 16 blocks; warmup steps past the schedule keep 16."""
    args = medium.Hyperparameters(num_iterations=4, window_start=1024, window_end=2048)
    assert [medium.window_blocks_at(s, args) for s in range(5)] == [8, 10, 12, 14, 16]
    assert [medium.window_blocks_at(s, args) for s in (5, 40)] == [16, 16]
    warm = medium.Hyperparameters(num_iterations=4, warmup_steps=40, window_start=1024, window_end=2048)
    assert sorted(medium.window_tensors(warm, torch.device("cpu"))) == [1, 8, 10, 12, 14, 16]  # 1: warmup validation


def test_train_step_applies_the_schedules_of_its_own_step():
    """Track 2's train_step with its own learning rates, through the check both tracks share."""
    check_train_step_applies_the_schedules_of_its_own_step(medium, (0.3, 0.015), 0.025)


def test_build_optimizers_groups_learning_rates_and_weight_decay():
    """As track 1's, with track 2's groups: Muon holds the 15 QKVO stacks (block 7 has no attention) at
    muon_weight_decay 0.01, and the 16 fc and the 16 proj matrices at 0.01 x mlp_weight_decay_mult 3 = 0.03; Adam the
    token and value embeddings at embed_lr, the scalars at scalar_lr and the head at head_lr, every group with the
    settings' betas (in their order: swapped, both runs of the 2-process test take them alike) and eps."""
    args = medium.Hyperparameters(model_dim=64, num_heads=2, head_dim=32, train_seq_len=128, val_seq_len=128,
                                  compile=False, muon_weight_decay=0.01, mlp_weight_decay_mult=3.0, adam_beta1=0.7,
                                  adam_beta2=0.9, adam_eps=1e-8)
    with torch.device("meta"):
        gpt = medium.GPT(args)
    adam, muon = medium.build_optimizers(gpt, args, medium.Comm(0, 1))

    def ids(groups):
        return [[id(p) for p in group["params"]] for group in groups]

    blocks = list(gpt.blocks)
    attention = [b.attn.qkvo_w for b in blocks if b.attn is not None]
    assert len(attention) == 15
    assert ids(muon.param_groups) == ids([dict(params=attention), dict(params=[b.mlp.fc_w for b in blocks]),
                                          dict(params=[b.mlp.proj_w for b in blocks])])
    assert [g["weight_decay"] for g in muon.param_groups] == pytest.approx([0.01, 0.03, 0.03])
    assert [(g["lr"], g["momentum"]) for g in muon.param_groups] == [(0.025, 0.95)] * 3
    embeddings = [gpt.embed.weight] + [e.weight for e in gpt.value_embeds]
    assert ids(adam.param_groups) == ids([dict(params=embeddings), dict(params=[gpt.scalars]),
                                          dict(params=[gpt.lm_head_w])])
    assert [g["lr"] for g in adam.param_groups] == [0.3, 0.015, 1 / 320]
    assert [(g["betas"], g["eps"]) for g in adam.param_groups] == [((0.7, 0.9), 1e-8)] * 3  # beta1 first, as passed
    every = [p for opt in (adam, muon) for group in ids(opt.param_groups) for p in group]
    assert sorted(every) == sorted(id(p) for p in gpt.parameters())  # each parameter in exactly one group
    assert all(g["initial_lr"] == g["lr"] for opt in (adam, muon) for g in opt.param_groups)


def test_sharded_adam_hands_a_bf16_gradient_to_the_update_uncast():
    """The gradient is widened to fp32 inside adam_update (the one compiled kernel on the GPU), not by a cast pass
    over it before; the moments are fp32 from the first step."""
    seen = []

    def recording_update(shard, grad, *rest):
        seen.append(grad.dtype)
        medium.adam_update(shard, grad, *rest)

    weight = torch.nn.Parameter(torch.randn(16, 8).bfloat16())
    opt = medium.ShardedAdam([dict(params=[weight], lr=0.01)], (0.8, 0.95), 1e-10, medium.Comm(0, 1),
                             recording_update)
    weight.grad = torch.randn(16, 8).bfloat16()
    opt.step()
    assert seen == [torch.bfloat16]
    assert {opt.state[weight][key].dtype for key in ("exp_avg", "exp_avg_sq")} == {torch.float32}


def test_compiled_adam_update_matches_eager_for_bf16_weights_without_recompiles(counted_compile):
    compile_fn, compilations = counted_compile
    compiled_update = compile_fn(medium.adam_update)
    torch.manual_seed(4)
    weight = torch.nn.Parameter(torch.randn(16, 8).bfloat16())
    twin = torch.nn.Parameter(weight.detach().clone())
    opts = [medium.ShardedAdam([dict(params=[weight], lr=0.01)], (0.8, 0.95), 1e-10, medium.Comm(0, 1),
                               compiled_update),
            medium.ShardedAdam([dict(params=[twin], lr=0.01)], (0.8, 0.95), 1e-10, medium.Comm(0, 1))]
    for step in range(3):
        grad = torch.randn(16, 8).bfloat16()
        weight.grad, twin.grad = grad.clone(), grad.clone()
        for opt in opts:
            opt.param_groups[0]["lr"] = 0.01 / (step + 1)
            opt.step()
    assert torch.equal(weight.detach(), twin.detach()) and weight.dtype == torch.bfloat16
    assert len(compilations) == 1
