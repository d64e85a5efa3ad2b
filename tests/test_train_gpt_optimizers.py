"""train_gpt.py, section "Optimizers" (Muon, ShardedAdam, Comm) and the lr / momentum schedules they follow:
world size 1 against hand-written updates, and 2 gloo processes against world size 1."""

import copy
import os
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))
import train_gpt  # noqa: E402
from train_gpt import Comm, Hyperparameters, Muon, ShardedAdam  # noqa: E402
from stand_ins import check_train_step_applies_the_schedules_of_its_own_step  # noqa: E402

# Same-shape matrices form one Muon group; the 3-D one is stacked like the merged QKVO weight.
MUON_SHAPES = [(16, 8), (16, 8), (8, 24), (24, 8), (3, 8, 12)]
ADAM_SHAPES = [(10, 6), (8,), (4, 5)]


def make_params(shapes, seed):
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(*shape, generator=gen) * 0.1) for shape in shapes]


def make_grads(shapes, steps, seed):
    gen = torch.Generator().manual_seed(seed)
    return [[torch.randn(*shape, generator=gen) for shape in shapes] for _ in range(steps)]


def reference_normuon(update, second_moment, beta2):
    """One NorMuon step on one matrix, written per neuron: a neuron is a row of a tall or square matrix and a column
    of a wide one; v_i <- beta2 v_i + (1 - beta2) mean(u_i^2), u_i <- u_i / sqrt(v_i), then the whole matrix is
    brought back to the Frobenius norm it had. Returns the new update and v."""
    rows, cols = update.shape
    neurons = update.double() if rows >= cols else update.double().T
    second_moment = beta2 * second_moment + (1 - beta2) * torch.stack([(u * u).mean() for u in neurons])
    scaled = torch.stack([u / second_moment[i].sqrt() for i, u in enumerate(neurons)])
    scaled = scaled * (neurons.norm() / scaled.norm())
    return (scaled if rows >= cols else scaled.T), second_moment


def reference_muon(params, grads_per_step, lrs, momentums, weight_decay, nesterov=True, shape_scale=True,
                   ns_coefficients="jordan", normuon_beta2=None):
    """Nesterov momentum, orthogonalised update scaled by max(1, rows/cols)^0.5, decoupled weight decay;
    with normuon_beta2, each orthogonalised matrix goes through reference_normuon first."""
    params = [p.detach().clone() for p in params]
    buffers = [torch.zeros_like(p) for p in params]
    second_moments = [[torch.zeros(max(p.shape[-2:]), dtype=torch.float64)] * (p.numel() // p.shape[-2:].numel())
                      for p in params]
    for grads, lr, momentum in zip(grads_per_step, lrs, momentums):
        for i, (p, g) in enumerate(zip(params, grads)):
            buffers[i] = momentum * buffers[i] + (1 - momentum) * g
            direction = momentum * buffers[i] + (1 - momentum) * g if nesterov else buffers[i]
            matrices = direction.reshape(-1, *direction.shape[-2:])
            update = train_gpt.orthogonalize(matrices, *train_gpt.NS_COEFFICIENTS[ns_coefficients]).float().view_as(p)
            if normuon_beta2 is not None:
                normalized = [reference_normuon(u, v, normuon_beta2) for u, v in zip(update.reshape_as(matrices),
                                                                                     second_moments[i])]
                update = torch.stack([u for u, _ in normalized]).float().view_as(p)
                second_moments[i] = [v for _, v in normalized]
            rows, cols = p.shape[-2:]
            scale = max(1.0, rows / cols) ** 0.5 if shape_scale else 1.0
            params[i] = p * (1 - lr * weight_decay) - lr * scale * update
    return params


@pytest.mark.parametrize("weight_decay", [0.0, 0.1])
def test_muon_matches_reference_with_momentum_warmup(weight_decay):
    steps = 3
    args = Hyperparameters(num_iterations=3, muon_momentum_warmup_steps=2)  # momentum 0.85, 0.90, 0.95
    params = make_params(MUON_SHAPES, 0)
    start = [p.detach().clone() for p in params]
    grads = make_grads(MUON_SHAPES, steps, 1)
    opt = Muon(params, lr=0.05, momentum=args.muon_momentum, weight_decay=weight_decay, comm=Comm(0, 1))
    assert [len(g["params"]) for g in opt.param_groups] == [2, 1, 1, 1]  # grouped by shape
    for group in opt.param_groups:
        group["initial_lr"] = group["lr"]
    lrs, momentums = [], []
    for step in range(steps):
        for p, g in zip(params, grads[step]):
            p.grad = g.clone()
        train_gpt.set_schedules([opt], step, args)
        lrs.append(opt.param_groups[0]["lr"])
        momentums.append(opt.param_groups[0]["momentum"])
        opt.step()
    assert momentums == pytest.approx([0.85, 0.90, 0.95])
    assert lrs == pytest.approx([0.05, 0.05, 0.05 * train_gpt.lr_multiplier(2, args)])
    assert lrs[2] < 0.05  # step 2 of 3 is in the cooldown
    expected = reference_muon(start, grads, lrs, momentums, weight_decay)
    for p, e, s in zip(params, expected, start):
        step_size = (e - s).abs().max()
        torch.testing.assert_close(p.detach(), e, rtol=0, atol=2e-3 * step_size)
        assert not torch.equal(p.detach(), s)


@pytest.mark.parametrize("shape", [(24, 8), (2, 24, 8)])
def test_muon_reference_tolerance_tells_nesterov_and_shape_scale_apart(shape):
    """Without Nesterov or without the shape scale the reference lands far outside the tolerance used above. A stack
    of tall matrices takes the scale of its matrices' rows and columns, not of its leading dimensions: the QKVO
    weight (4, heads x head_dim, model_dim) is tall where heads x head_dim > model_dim (the test above's 3-D
    weight is wide, where either gives 1)."""
    params = make_params([shape], 2)
    start = params[0].detach().clone()
    grads = make_grads([shape], 2, 3)
    opt = Muon(params, lr=0.1, momentum=0.9, weight_decay=0.0, comm=Comm(0, 1))
    for (g,) in grads:
        params[0].grad = g.clone()
        opt.step()
    schedule = (grads, [0.1, 0.1], [0.9, 0.9], 0.0)
    expected = reference_muon([start], *schedule)[0]
    tolerance = 2e-3 * (expected - start).abs().max()
    torch.testing.assert_close(params[0].detach(), expected, rtol=0, atol=tolerance)
    for variant in [dict(nesterov=False), dict(shape_scale=False)]:
        other = reference_muon([start], *schedule, **variant)[0]
        assert (other - params[0].detach()).abs().max() > 10 * tolerance, variant


def test_muon_with_polar_express_coefficients_matches_reference():
    params = make_params(MUON_SHAPES, 6)
    start = [p.detach().clone() for p in params]
    grads = make_grads(MUON_SHAPES, 2, 7)
    opt = Muon(params, lr=0.1, momentum=0.9, weight_decay=0.0, comm=Comm(0, 1), ns_coefficients="polar_express")
    for step_grads in grads:
        for p, g in zip(params, step_grads):
            p.grad = g.clone()
        opt.step()
    schedule = (grads, [0.1, 0.1], [0.9, 0.9], 0.0)
    expected = reference_muon(start, *schedule, ns_coefficients="polar_express")
    jordan = reference_muon(start, *schedule)
    for p, e, j, s in zip(params, expected, jordan, start):
        tolerance = 2e-3 * (e - s).abs().max()
        torch.testing.assert_close(p.detach(), e, rtol=0, atol=tolerance)
        assert (j - p.detach()).abs().max() > 10 * tolerance  # the coefficients are really used


# ----------------------------------------------------------------------------------------------
# NorMuon: per-neuron second-moment normalisation of the orthogonalised update


@pytest.mark.parametrize("shape", [(16, 8), (8, 24), (12, 12), (3, 8, 12)])
def test_normuon_scale_matches_the_per_neuron_reference_for_three_steps(shape):
    grads = torch.randn(3, *shape, generator=torch.Generator().manual_seed(20))
    updates = train_gpt.orthogonalize(grads.reshape(-1, *shape[-2:])).float().view_as(grads)
    second_moment = torch.zeros_like(train_gpt.neuron_mean_square(updates[0]))
    count = 3 if len(shape) == 3 else 1
    references = [torch.zeros(max(shape[-2:]), dtype=torch.float64)] * count
    for update in updates:  # three steps of one parameter: a matrix, or a stack of 3
        out = train_gpt.normuon_scale(update, second_moment, 0.9)
        for k, (matrix, normalized) in enumerate(zip(update.view(count, *shape[-2:]), out.view(count, *shape[-2:]))):
            expected, references[k] = reference_normuon(matrix, references[k], 0.9)
            torch.testing.assert_close(normalized.double(), expected, rtol=1e-5, atol=1e-7)
            # the Frobenius norm is kept, and every neuron has one scale, proportional to 1 / sqrt(v_i)
            assert normalized.norm().item() == pytest.approx(matrix.norm().item(), rel=1e-5)
            before, after = (matrix, normalized) if shape[-2] >= shape[-1] else (matrix.T, normalized.T)
            scale = after.norm(dim=1) / before.norm(dim=1)
            torch.testing.assert_close(after, scale[:, None] * before, rtol=1e-5, atol=1e-7)
            inverse_root = scale.double() * references[k].sqrt()
            torch.testing.assert_close(inverse_root, inverse_root[:1].expand_as(inverse_root), rtol=1e-5, atol=0)
            assert scale.max() > 1.1 * scale.min()  # and the scales do differ between neurons
    assert second_moment.shape == ((*shape[:-1], 1) if shape[-2] >= shape[-1] else (*shape[:-2], 1, shape[-1]))


def test_normuon_neurons_of_the_mlp_weights_are_the_hidden_units():
    """Both (dim, hidden) MLP matrices get one second moment per hidden unit; square ones per row."""
    args = Hyperparameters(model_dim=64, num_heads=2, head_dim=32)
    mlp = train_gpt.MLP(args.model_dim, 4 * args.model_dim)
    for w in (mlp.fc_w, mlp.proj_w):
        assert train_gpt.neuron_mean_square(w).shape == (1, 4 * args.model_dim)
    qkvo = torch.empty(4, args.num_heads * args.head_dim, args.model_dim)
    assert train_gpt.neuron_mean_square(qkvo).shape == (4, args.num_heads * args.head_dim, 1)


def test_normuon_scale_of_a_zero_update_is_zero():
    """Muon's zero padding, or a zero-initialised matrix before its first gradient: no NaN."""
    second_moment = torch.zeros(1, 24)
    out = train_gpt.normuon_scale(torch.zeros(8, 24), second_moment, 0.95)
    assert torch.equal(out, torch.zeros(8, 24)) and torch.equal(second_moment, torch.zeros(1, 24))


def run_muon(params, grads, schedule, **options):
    opt = Muon(params, lr=0.05, momentum=0.95, weight_decay=0.0, comm=Comm(0, 1), **options)
    for group in opt.param_groups:
        group["initial_lr"] = group["lr"]
    for step, step_grads in enumerate(grads):
        train_gpt.set_schedules([opt], step, schedule)
        step_on(opt, params, step_grads)
    return opt


def step_on(opt, params, grads):
    for p, g in zip(params, grads):
        p.grad = g.clone()
    opt.step()
    return [p.detach().clone() for p in params]


@pytest.mark.parametrize("ns_coefficients, beta2", [("jordan", 0.9), ("polar_express", 0.9), ("jordan", 0.0)])
def test_muon_with_normuon_matches_reference(ns_coefficients, beta2):
    """beta2 = 0 (--normuon_beta2 allows it) is NorMuon on each step's own mean squares, not NorMuon off."""
    schedule = Hyperparameters(num_iterations=3, muon_momentum_warmup_steps=2)  # momentum 0.85, 0.90, 0.95
    lrs = [0.05, 0.05, 0.05 * train_gpt.lr_multiplier(2, schedule)]
    params = make_params(MUON_SHAPES, 21)
    start = [p.detach().clone() for p in params]
    grads = make_grads(MUON_SHAPES, 3, 22)
    opt = run_muon(params, grads, schedule, ns_coefficients=ns_coefficients, normuon_beta2=beta2)
    reference = (start, grads, lrs, [0.85, 0.90, 0.95], 0.0)
    expected = reference_muon(*reference, ns_coefficients=ns_coefficients, normuon_beta2=beta2)
    plain = reference_muon(*reference, ns_coefficients=ns_coefficients)
    for p, e, m, s in zip(params, expected, plain, start):
        tolerance = 2e-3 * (e - s).abs().max()
        torch.testing.assert_close(p.detach(), e, rtol=0, atol=tolerance)
        assert (m - p.detach()).abs().max() > 10 * tolerance  # NorMuon really changed the step
    assert all(set(state) == {"momentum_buffer", "second_moment"} for state in opt.state.values())


def test_normuon_state_goes_through_the_warmup_state_dict_round_trip():
    """warmup() saves state_dict() before its steps and loads it back after them; a round trip later in a run
    must bring the second moments back too, so that the next step is the one without a round trip."""
    params = make_params(MUON_SHAPES, 23)
    start = [p.detach().clone() for p in params]
    grads = make_grads(MUON_SHAPES, 4, 24)
    opt = Muon(params, lr=0.05, momentum=0.95, weight_decay=0.0, comm=Comm(0, 1), normuon_beta2=0.95)
    initial_state = copy.deepcopy(opt.state_dict())
    first = step_on(opt, params, grads[0])
    step_on(opt, params, grads[1])
    saved_params, saved_state = [p.detach().clone() for p in params], copy.deepcopy(opt.state_dict())
    expected = step_on(opt, params, grads[2])
    step_on(opt, params, grads[3])  # moves the second moments on

    for restore_params, state, step_grads, result in [(saved_params, saved_state, grads[2], expected),
                                                      (start, initial_state, grads[0], first)]:
        with torch.no_grad():
            torch._foreach_copy_(params, restore_params)
        opt.load_state_dict(state)
        kept = {i: opt.state[p]["second_moment"] for i, p in enumerate(params) if p in opt.state}
        assert kept.keys() == state["state"].keys()  # all five after two steps, none before the first
        assert all(torch.equal(second_moment, state["state"][i]["second_moment"]) for i, second_moment in kept.items())
        assert all(torch.equal(got, want) for got, want in zip(step_on(opt, params, step_grads), result))


def test_muon_state_is_stacked_once_and_then_updated_in_place():
    """The second step updates the first step's stacks through the per-matrix views in the state dict: it neither
    copies them into a new stack nor allocates a fresh initial state."""
    params = make_params(MUON_SHAPES, 33)
    grads = make_grads(MUON_SHAPES, 2, 34)
    opt = Muon(params, lr=0.05, momentum=0.95, weight_decay=0.0, comm=Comm(0, 1), normuon_beta2=0.95)
    step_on(opt, params, grads[0])
    keys = ("momentum_buffer", "second_moment")
    bases = {key: [opt.state[p][key]._base for p in params] for key in keys}
    step_on(opt, params, grads[1])
    for key in keys:
        assert all(base is not None for base in bases[key])
        assert all(opt.state[p][key]._base is base for p, base in zip(params, bases[key])), key


def test_muon_updates_the_parameters_in_place_as_rows_of_one_stack_per_shape():
    """Each parameter is a view of its shape group's stack, so the step writes the parameters without stacking them
    and copying them back; restoring a model state (as the warmup does) copies into those rows and keeps them."""
    params = make_params(MUON_SHAPES, 35)
    module = torch.nn.ParameterList(params)
    initial = copy.deepcopy(module.state_dict())
    twins = [torch.nn.Parameter(p.detach().clone()) for p in params]
    opt = Muon(params, lr=0.05, momentum=0.95, weight_decay=0.1, comm=Comm(0, 1))
    grads = make_grads(MUON_SHAPES, 2, 36)
    step_on(opt, params, grads[0])
    module.load_state_dict(initial)
    assert all(torch.equal(p.detach(), twin.detach()) for p, twin in zip(params, twins))
    after = step_on(opt, params, grads[1])
    for group, stack in zip(opt.param_groups, opt.stacks):
        assert stack.shape == (len(group["params"]), *group["params"][0].shape)
        assert [p.data_ptr() for p in group["params"]] == [row.data_ptr() for row in stack]
    # the same two steps on separate tensors, one matrix a group, restored the same way
    reference = Muon(twins, lr=0.05, momentum=0.95, weight_decay=0.1, comm=Comm(0, 1))
    step_on(reference, twins, grads[0])
    torch.nn.ParameterList(twins).load_state_dict(initial)
    expected = step_on(reference, twins, grads[1])
    for p, value, twin_value, start in zip(params, after, expected, initial.values()):
        assert torch.equal(value, twin_value) and not torch.equal(value, start)


class OpCounter(torch.utils._python_dispatch.TorchDispatchMode):
    """Counts the aten ops dispatched while active (each is at least one kernel launch on the GPU)."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.count += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("normuon_beta2", [None, 0.95])
def test_muon_step_launches_as_many_ops_for_eight_matrices_of_a_shape_as_for_two(normuon_beta2):
    """Momentum, NorMuon and the step run once per same-shape group, not once per matrix: on one GPU a step of
    per-matrix ops was ~1,000 small kernel launches."""
    counts = []
    for matrices in (2, 8):
        shapes = [(16, 8)] * matrices
        params = make_params(shapes, 30)
        opt = Muon(params, lr=0.05, momentum=0.95, weight_decay=0.1, comm=Comm(0, 1), normuon_beta2=normuon_beta2)
        step_on(opt, params, make_grads(shapes, 1, 31)[0])  # the first step creates the state
        for p, g in zip(params, make_grads(shapes, 1, 32)[0]):
            p.grad = g
        counter = OpCounter()
        with counter:
            opt.step()
        counts.append(counter.count)
    assert counts[0] == counts[1]


def reference_adam(params, grads_per_step, lrs, betas, eps):
    beta1, beta2 = betas
    params = [p.detach().clone() for p in params]
    m = [torch.zeros_like(p) for p in params]
    v = [torch.zeros_like(p) for p in params]
    for t, grads in enumerate(grads_per_step, start=1):
        for i, g in enumerate(grads):
            m[i] = beta1 * m[i] + (1 - beta1) * g
            v[i] = beta2 * v[i] + (1 - beta2) * g * g
            m_hat, v_hat = m[i] / (1 - beta1 ** t), v[i] / (1 - beta2 ** t)
            params[i] = params[i] - lrs[i] * m_hat / (v_hat.sqrt() + eps)
    return params


def test_sharded_adam_matches_reference_and_torch_adam():
    betas, eps, lrs = (0.8, 0.95), 1e-10, [0.6, 0.04, 0.008]
    params = make_params(ADAM_SHAPES, 4)
    start = [p.detach().clone() for p in params]
    twins = [torch.nn.Parameter(p.detach().clone()) for p in params]
    grads = make_grads(ADAM_SHAPES, 3, 5)
    opt = ShardedAdam([dict(params=[p], lr=lr) for p, lr in zip(params, lrs)], betas, eps, Comm(0, 1))
    torch_opt = torch.optim.Adam([dict(params=[p], lr=lr) for p, lr in zip(twins, lrs)], betas=betas, eps=eps)
    for step_grads in grads:
        for p, twin, g in zip(params, twins, step_grads):
            p.grad, twin.grad = g.clone(), g.clone()
        opt.step()
        torch_opt.step()
    expected = reference_adam(start, grads, lrs, betas, eps)
    for p, twin, e in zip(params, twins, expected):
        torch.testing.assert_close(p.detach(), e, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(p.detach(), twin.detach(), rtol=1e-5, atol=1e-6)
    assert opt.state[params[0]]["step"] == 3


def test_sharded_adam_adds_eps_to_the_root_of_the_second_moment_as_torch_adam_does():
    """Gradients from 1e-9 to 1 a column (a rare token's embedding row gets tiny ones): eps = 1e-10 sits beside
    sqrt(v), as in torch's Adam; inside the root it would be sqrt(1e-10) = 1e-5, and updates of gradients below that
    would stall. The test above has gradients near 1, where either place gives the same steps."""
    weight = make_params([(16, 8)], 40)[0]
    reference = torch.nn.Parameter(weight.detach().clone())
    opt = ShardedAdam([dict(params=[weight], lr=0.01)], (0.8, 0.95), 1e-10, Comm(0, 1))
    torch_opt = torch.optim.Adam([reference], lr=0.01, betas=(0.8, 0.95), eps=1e-10)
    for (g,) in make_grads([(16, 8)], 3, 41):
        weight.grad = g * torch.logspace(-9, 0, 8)
        reference.grad = weight.grad.clone()
        opt.step()
        torch_opt.step()
    torch.testing.assert_close(weight.detach(), reference.detach())


def test_comm_with_one_process_is_the_identity():
    comm = Comm(0, 1)
    full = torch.arange(12.0).view(4, 3)
    shard, handle = comm.reduce_scatter_avg(full)
    assert shard is full and handle is None
    assert comm.all_gather(full, shard) is None
    assert comm.own(full).data_ptr() == full.data_ptr() and comm.own(full).shape == full.shape


def test_comm_own_slices_the_first_dimension():
    full = torch.arange(16.0).view(8, 2)
    assert torch.equal(Comm(1, 4).own(full), full[2:4])
    assert torch.equal(Comm(3, 4).own(full), full[6:8])


def test_comm_averages_the_ranks_gradients_into_this_ranks_rows(monkeypatch):
    """The reduce-scatter averages (the gradient of the global batch's mean loss, as one process's accumulation
    gives); a sum would scale every gradient by the world size, which Muon's scale-free orthogonalisation and Adam's
    tiny eps hide from the gloo runs below."""
    calls = []

    def reduce_scatter(shard, full, op, async_op):
        calls.append((tuple(shard.shape), op, async_op))
        return "handle"

    monkeypatch.setattr(train_gpt, "REDUCE_SCATTER", reduce_scatter)
    shard, handle = Comm(1, 4).reduce_scatter_avg(torch.arange(16.0).view(8, 2))
    assert handle == "handle" and shard.shape == (2, 2)
    assert calls == [((2, 2), train_gpt.dist.ReduceOp.AVG, True)]


class Handle:
    """An async collective's handle: the collective's writes happen at wait(), as a queued NCCL call's land only
    when the stream reaches them."""

    def __init__(self, finish):
        self.finish, self.waited = finish, False

    def wait(self):
        self.finish()
        self.waited = True


class HeldComm(Comm):
    """Rank `rank` of world_size processes that all hold the same gradients, with collectives that finish only when
    waited on: the reduce-scatter's shard is NaN until then, and the all-gather writes the other ranks' rows
    (GATHERED, as if they had stepped) only then."""

    def __init__(self, rank, world_size):
        super().__init__(rank, world_size)
        self.handles = []

    def held(self, finish):
        self.handles.append(Handle(finish))
        return self.handles[-1]

    def reduce_scatter_avg(self, full):
        shard = torch.full_like(self.own(full), float("nan"))
        return shard, self.held(lambda: shard.copy_(self.own(full)))

    def all_gather(self, full, shard):
        def gather():
            for rank in range(self.world_size):
                if rank != self.rank:
                    Comm(rank, self.world_size).own(full).fill_(GATHERED)
        return self.held(gather)


GATHERED = 7.0


def test_optimizers_wait_for_each_collective_before_using_or_leaving_its_result():
    """Rank 1 of 2: each step uses a reduce-scattered gradient only after waiting for it (unwaited, it is NaN here,
    and half written on a GPU) and returns only after waiting for every all-gather, so that the next forward reads
    the other ranks' rows. The gloo runs tell only by timing: Muon's all-gathers left unwaited passed them."""
    muon_shapes, adam_shapes = [(16, 8), (16, 8), (8, 24)], [(6, 4), (8,)]
    muon_params, adam_params = make_params(muon_shapes, 50), make_params(adam_shapes, 51)
    twins = [torch.nn.Parameter(p.detach().clone()) for p in muon_params + adam_params]
    comm = HeldComm(1, 2)
    muon = Muon(muon_params, lr=0.05, momentum=0.9, weight_decay=0.1, comm=comm)
    adam = ShardedAdam([dict(params=adam_params, lr=0.02)], (0.8, 0.95), 1e-10, comm)
    whole_muon = Muon(twins[:3], lr=0.05, momentum=0.9, weight_decay=0.1, comm=Comm(0, 1))
    whole_adam = ShardedAdam([dict(params=twins[3:], lr=0.02)], (0.8, 0.95), 1e-10, Comm(0, 1))
    for p, twin, g in zip(muon_params + adam_params, twins, make_grads(muon_shapes + adam_shapes, 1, 52)[0]):
        p.grad, twin.grad = g.clone(), g.clone()
    for opt in (muon, adam, whole_muon, whole_adam):
        opt.step()
    # a reduce-scatter and an all-gather for each of Muon's two groups and each of Adam's two parameters
    assert len(comm.handles) == 8 and all(handle.waited for handle in comm.handles)
    # Muon: rank 1 owns the second (16, 8) matrix and the (8, 24) group's padding row; rank 0's rows are gathered
    torch.testing.assert_close(muon_params[1].detach(), twins[1].detach())
    assert (muon_params[0] == GATHERED).all() and (muon_params[2] == GATHERED).all()
    # Adam: rank 1 owns the second half of each parameter's first dimension
    for p, twin in zip(adam_params, twins[3:]):
        half = p.size(0) // 2
        torch.testing.assert_close(p.detach()[half:], twin.detach()[half:])
        assert (p[:half] == GATHERED).all()


def test_lr_multiplier_is_flat_then_decays_linearly_to_final_frac():
    args = Hyperparameters(num_iterations=200, cooldown_frac=0.45, final_lr_frac=0.1)
    assert train_gpt.lr_multiplier(0, args) == 1.0
    assert train_gpt.lr_multiplier(109, args) == 1.0
    assert train_gpt.lr_multiplier(110, args) == pytest.approx(1.0)  # cooldown starts at 55%
    assert train_gpt.lr_multiplier(155, args) == pytest.approx(0.55)  # halfway between 1 and 0.1
    assert train_gpt.lr_multiplier(200, args) == pytest.approx(0.1)
    values = [train_gpt.lr_multiplier(s, args) for s in range(201)]
    assert all(a >= b for a, b in zip(values, values[1:]))


def test_lr_multiplier_past_the_schedule_holds_the_final_frac():
    """Warmup steps may outnumber training steps: they run at the schedule's end, not at negative rates or a
    division by a zero cooldown."""
    args = Hyperparameters(num_iterations=5, cooldown_frac=0.45, final_lr_frac=0.1)
    assert [train_gpt.lr_multiplier(s, args) for s in (5, 6, 9)] == pytest.approx([0.1, 0.1, 0.1])
    flat = Hyperparameters(num_iterations=5, cooldown_frac=0.0)
    assert [train_gpt.lr_multiplier(s, flat) for s in range(10)] == [1.0] * 10


def test_muon_momentum_warmup():
    args = Hyperparameters(muon_momentum_start=0.85, muon_momentum=0.95, muon_momentum_warmup_steps=300)
    assert train_gpt.muon_momentum(0, args) == pytest.approx(0.85)
    assert train_gpt.muon_momentum(150, args) == pytest.approx(0.90)
    assert train_gpt.muon_momentum(300, args) == pytest.approx(0.95)
    assert train_gpt.muon_momentum(1000, args) == pytest.approx(0.95)
    no_warmup = Hyperparameters(muon_momentum_warmup_steps=0)
    assert train_gpt.muon_momentum(0, no_warmup) == pytest.approx(0.95)


def test_window_schedule_is_the_records_next_multiple_of_128_of_1728_progress():
    args = Hyperparameters(num_iterations=1695)
    for step in range(args.num_iterations + 1):
        tokens = 1728 * step / args.num_iterations
        record = max(128, -(-tokens // 128) * 128)  # next multiple of 128 at or above, 128 at step 0
        assert train_gpt.window_blocks_at(step, args) == record // 128, step
    assert train_gpt.window_blocks_at(0, args) == 1 and train_gpt.window_blocks_at(1695, args) == 14


def test_train_step_applies_the_schedules_of_its_own_step():
    """Track 1's train_step with its own learning rates, through the check both tracks share."""
    check_train_step_applies_the_schedules_of_its_own_step(train_gpt, (0.6, 0.04), 0.05, takes_casts=True)


def test_build_optimizers_groups_and_learning_rates():
    args = Hyperparameters(model_dim=64, num_heads=2, head_dim=32, train_seq_len=128, val_seq_len=128)
    with torch.device("meta"):
        model = train_gpt.GPT(args)
    adam, muon = train_gpt.build_optimizers(model, args, Comm(0, 1))
    assert [g["lr"] for g in adam.param_groups] == pytest.approx([0.6, 0.6, 0.04, 0.008])
    assert adam.param_groups[0]["params"] == [model.embed.weight]
    assert adam.param_groups[3]["params"] == [model.lm_head_w]
    muon_params = {id(p) for g in muon.param_groups for p in g["params"]}
    adam_params = {id(p) for g in adam.param_groups for p in g["params"]}
    assert muon_params | adam_params == {id(p) for p in model.parameters()}
    assert not muon_params & adam_params
    assert all(p.ndim >= 2 for g in muon.param_groups for p in g["params"])
    assert all(g["initial_lr"] == g["lr"] for opt in (adam, muon) for g in opt.param_groups)


def test_build_optimizers_gives_each_adam_group_its_own_multiplier():
    """The record's embedding and value-embedding multipliers are equal (75) and the head's is 1, so the test above
    cannot tell a group that takes another's multiplier, or none: here every multiplier differs."""
    args = Hyperparameters(model_dim=64, num_heads=2, head_dim=32, train_seq_len=128, val_seq_len=128, adam_lr=0.01,
                           embed_lr_mult=2.0, value_embed_lr_mult=3.0, scalar_lr_mult=5.0, head_lr_mult=7.0)
    with torch.device("meta"):
        model = train_gpt.GPT(args)
    adam = train_gpt.build_optimizers(model, args, Comm(0, 1))[0]
    assert [g["lr"] for g in adam.param_groups] == pytest.approx([0.02, 0.03, 0.05, 0.07])
    assert adam.param_groups[1]["params"] == [e.weight for e in model.value_embeds]
    assert adam.param_groups[2]["params"] == [model.scalars]


def test_build_optimizers_passes_adams_betas_and_eps_and_muons_weight_decay():
    """Each setting off its default and unlike the others: Adam's betas in order, its eps, Muon's lr and weight decay
    (the record's decay is 0, so a Muon built without it passed every test)."""
    args = Hyperparameters(model_dim=64, num_heads=2, head_dim=32, train_seq_len=128, val_seq_len=128, adam_beta1=0.7,
                           adam_beta2=0.9, adam_eps=1e-9, muon_lr=0.02, muon_weight_decay=0.3)
    with torch.device("meta"):
        model = train_gpt.GPT(args)
    adam, muon = train_gpt.build_optimizers(model, args, Comm(0, 1))
    assert all(group["betas"] == (0.7, 0.9) and group["eps"] == 1e-9 for group in adam.param_groups)
    assert all((group["lr"], group["weight_decay"]) == (0.02, 0.3) for group in muon.param_groups)


def test_build_optimizers_passes_the_newton_schulz_coefficients():
    args = Hyperparameters(model_dim=64, num_heads=2, head_dim=32, train_seq_len=128, val_seq_len=128)
    with torch.device("meta"):
        model = train_gpt.GPT(args)
    muon = train_gpt.build_optimizers(model, args, Comm(0, 1))[1]
    assert (muon.coefficients, muon.norm_scale) == (train_gpt.JORDAN_COEFFICIENTS, 1.0)
    args.ns_coefficients = "polar_express"
    muon = train_gpt.build_optimizers(model, args, Comm(0, 1))[1]
    assert (muon.coefficients, muon.norm_scale) == (train_gpt.POLAR_EXPRESS_COEFFICIENTS, 1.02)


def test_build_optimizers_turns_normuon_on_only_for_its_variant():
    args = Hyperparameters(model_dim=64, num_heads=2, head_dim=32, train_seq_len=128, val_seq_len=128,
                           normuon_beta2=0.9, muon_variant="muon")
    with torch.device("meta"):
        model = train_gpt.GPT(args)
    muon = train_gpt.build_optimizers(model, args, Comm(0, 1))[1]
    assert [g["normuon_beta2"] for g in muon.param_groups] == [None] * len(muon.param_groups)
    args.muon_variant = "normuon"
    muon = train_gpt.build_optimizers(model, args, Comm(0, 1))[1]
    assert [g["normuon_beta2"] for g in muon.param_groups] == [0.9] * len(muon.param_groups)


# ----------------------------------------------------------------------------------------------
# Two (or four) gloo processes: each rank has its own gradients; the sharded step must equal one process stepping
# on their average. Three Muon groups hold a single matrix, so rank 1 owns only padding there (as ranks 6
# and 7 do for the 11 attention matrices of the 8-GPU record); five (8, 8) matrices give a rank some matrices and
# padding (rank 1 of 2 holds 2 of its 3 rows; rank 2 of 4, 1 of its 2; rank 3 of 4, none).

WORLD = 2
STEPS = 2
GLOO_MUON_SHAPES = MUON_SHAPES + [(8, 8)] * 5
GLOO_ADAM_SHAPES = [(8, 3), (8,), (4, 4)]  # first dimensions split over 4 ranks


def rendezvous(tmp_path) -> str:
    """A file rendezvous in the test's own folder: a free TCP port found by binding and closing a socket could be
    taken by another xdist worker before gloo binds it."""
    return f"file://{tmp_path}/rdzv"


def stepped_optimizers(rank, world_size, grads_of_rank, **muon_options):
    """Both optimizers after STEPS steps; grads_of_rank(step, rank) gives this rank's gradients.
    Returns the Muon parameters, the Adam ones and the Muon optimizer."""
    comm = Comm(rank, world_size)
    muon_params, adam_params = make_params(GLOO_MUON_SHAPES, 10), make_params(GLOO_ADAM_SHAPES, 11)
    muon = Muon(muon_params, lr=0.05, momentum=0.9, weight_decay=0.0, comm=comm, **muon_options)
    adam = ShardedAdam([dict(params=adam_params[:2], lr=0.02), dict(params=adam_params[2:], lr=0.1)],
                       (0.8, 0.95), 1e-10, comm)
    for step in range(STEPS):
        muon_grads, adam_grads = grads_of_rank(step, rank)
        for p, g in zip(muon_params + adam_params, muon_grads + adam_grads):
            p.grad = g.clone()
        muon.step()
        adam.step()
    return muon_params, adam_params, muon


def run_optimizers(rank, world_size, grads_of_rank, **muon_options):
    """The parameters after stepped_optimizers, Muon's first."""
    muon_params, adam_params, _ = stepped_optimizers(rank, world_size, grads_of_rank, **muon_options)
    return [p.detach().clone() for p in muon_params + adam_params]


def rank_grads(step, rank):
    gen = torch.Generator().manual_seed(100 * step + rank)
    return ([torch.randn(*s, generator=gen) for s in GLOO_MUON_SHAPES],
            [torch.randn(*s, generator=gen) for s in GLOO_ADAM_SHAPES])


def mean_grads(step, rank, world_size=WORLD):
    per_rank = [rank_grads(step, r) for r in range(world_size)]
    return tuple([sum(gs) / world_size for gs in zip(*(grads[k] for grads in per_rank))] for k in range(2))


def skip_interpreter_teardown():
    """End a spawned worker that has saved its results. With torch 2.13 CPU, gloo sometimes aborts the process
    (SIGABRT, "terminate called without an active exception") during interpreter teardown, after a clean
    destroy_process_group; the results are already on disk, so leave without that teardown."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def gloo_worker(rank, world_size, init_method, out_path):
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world_size)
    try:
        result = run_optimizers(rank, world_size, rank_grads)
        if rank == 0:
            torch.save(result, out_path)
    finally:
        dist.destroy_process_group()
    skip_interpreter_teardown()


@pytest.mark.parametrize("world_size", [2, 4])
def test_gloo_processes_match_one_process(tmp_path, world_size):
    """4 ranks: groups of 1 and 2 matrices leave ranks with only padding, and pad by 3 and 2 rows; a pad of
    len % world_size (the same as -len % 2 for every count, so 2 ranks cannot tell) gives 2 rows to 1 matrix,
    which no reduce-scatter over 4 splits."""
    out_path = tmp_path / "params.pt"
    mp.spawn(gloo_worker, args=(world_size, rendezvous(tmp_path), str(out_path)), nprocs=world_size, join=True)
    sharded = torch.load(out_path)
    single = run_optimizers(0, 1, lambda step, rank: mean_grads(step, rank, world_size))
    start = make_params(GLOO_MUON_SHAPES, 10) + make_params(GLOO_ADAM_SHAPES, 11)
    assert len(sharded) == len(single) == len(start)
    for got, expected, first in zip(sharded, single, start):
        scale = (expected - first.detach()).abs().max()
        assert scale > 0
        torch.testing.assert_close(got, expected, rtol=0, atol=1e-3 * scale)


NORMUON = dict(normuon_beta2=0.9)


def normuon_gloo_worker(rank, init_method, out_dir):
    """Each rank saves its parameters and the state keys of each Muon matrix it keeps state for."""
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=WORLD)
    try:
        muon_params, adam_params, muon = stepped_optimizers(rank, WORLD, rank_grads, **NORMUON)
        kept = {i: sorted(muon.state[p]) for i, p in enumerate(muon_params) if muon.state[p]}
        torch.save(dict(params=[p.detach().clone() for p in muon_params + adam_params], kept=kept),
                   f"{out_dir}/rank{rank}.pt")
    finally:
        dist.destroy_process_group()
    skip_interpreter_teardown()


def test_two_gloo_processes_match_one_process_with_normuon(tmp_path):
    """NorMuon's second moments are sharded like the momentum: each rank keeps them for its own matrices only."""
    mp.spawn(normuon_gloo_worker, args=(rendezvous(tmp_path), str(tmp_path)), nprocs=WORLD, join=True)
    ranks = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(WORLD)]
    single = run_optimizers(0, 1, mean_grads, **NORMUON)
    plain = run_optimizers(0, 1, mean_grads)
    start = make_params(GLOO_MUON_SHAPES, 10) + make_params(GLOO_ADAM_SHAPES, 11)
    for result in ranks:
        for got, expected, first in zip(result["params"], single, start):
            torch.testing.assert_close(got, expected, rtol=0, atol=1e-3 * (expected - first.detach()).abs().max())
    for expected, other, first in zip(single[:len(GLOO_MUON_SHAPES)], plain, start):
        assert (expected - other).abs().max() > 1e-2 * (expected - first.detach()).abs().max()
    keys = ["momentum_buffer", "second_moment"]
    # groups by shape: (16, 8) x2 split over both ranks; (8, 24), (24, 8), (3, 8, 12) x1 each, owned by rank 0;
    # (8, 8) x5 padded to 6: rank 0 owns 3, rank 1 the other 2 and the padding row
    assert ranks[0]["kept"] == {0: keys, 2: keys, 3: keys, 4: keys, 5: keys, 6: keys, 7: keys}
    assert ranks[1]["kept"] == {1: keys, 8: keys, 9: keys}


def test_compiled_adam_update_matches_eager_and_compiles_once_per_shape(counted_compile):
    """The update the GPU run compiles: same result as eager, and the step-dependent lr and bias
    corrections (0-d tensors) do not trigger a recompile as they change every step."""
    compile_fn, compilations = counted_compile
    compiled_update = compile_fn(train_gpt.adam_update)
    params = make_params(ADAM_SHAPES[:1] * 2, 7)
    twins = [torch.nn.Parameter(p.detach().clone()) for p in params]
    compiled = ShardedAdam([dict(params=params, lr=0.6)], (0.8, 0.95), 1e-10, Comm(0, 1), compiled_update)
    eager = ShardedAdam([dict(params=twins, lr=0.6)], (0.8, 0.95), 1e-10, Comm(0, 1))
    for step, step_grads in enumerate(make_grads(ADAM_SHAPES[:1] * 2, 4, 8)):
        for opt in (compiled, eager):
            opt.param_groups[0]["lr"] = 0.6 * (1 - 0.2 * step)  # as the schedule changes it
        for p, twin, g in zip(params, twins, step_grads):
            p.grad, twin.grad = g.clone(), g.clone()
        compiled.step()
        eager.step()
    for p, twin in zip(params, twins):
        torch.testing.assert_close(p.detach(), twin.detach(), rtol=1e-6, atol=1e-7)
    assert len(compilations) == 1


def test_compiled_newton_schulz_update_is_a_plain_bmm(inductor_source):
    """a * x + poly @ x is (a I + poly) @ x, a bmm, with a added to poly's diagonal by sym_matmul: no baddbmm (1.4-1.6x
    slower on the GPU). The other two products are calls of the sym_matmul op (the symmetric Triton kernel on the GPU),
    which inductor leaves opaque."""
    code = inductor_source(train_gpt.orthogonalize, torch.randn(3, 32, 64))
    assert "baddbmm" not in code
    assert code.count("extern_kernels.bmm(") == len(train_gpt.JORDAN_COEFFICIENTS) == 5
    assert code.count("torch.ops.nanogpt.sym_matmul.default(") == 10


@pytest.mark.parametrize("options", [{}, NORMUON], ids=["muon", "normuon"])
def test_compiled_muon_update_matches_eager_and_compiles_once_per_shape(counted_compile, options):
    """The update the GPU run compiles, one call per same-shape group: the same parameters as eager over steps whose
    lr and momentum change (as the schedules change them), and one graph per group, none recompiled."""
    compile_fn, compilations = counted_compile
    params = make_params(MUON_SHAPES, 12)
    twins = [torch.nn.Parameter(p.detach().clone()) for p in params]
    compiled = Muon(params, lr=0.05, momentum=0.9, weight_decay=0.1, comm=Comm(0, 1), **options,
                    update=compile_fn(train_gpt.muon_update))
    eager = Muon(twins, lr=0.05, momentum=0.9, weight_decay=0.1, comm=Comm(0, 1), **options)
    for step, step_grads in enumerate(make_grads(MUON_SHAPES, 3, 13)):
        for opt in (compiled, eager):
            for group in opt.param_groups:
                group["lr"], group["momentum"] = 0.05 * (1 - 0.2 * step), 0.9 + 0.02 * step
        for p, twin, g in zip(params, twins, step_grads):
            p.grad, twin.grad = g.clone(), g.clone()
        compiled.step()
        eager.step()
    for p, twin, first in zip(params, twins, make_params(MUON_SHAPES, 12)):
        assert not torch.equal(p.detach(), first.detach())
        torch.testing.assert_close(p.detach(), twin.detach(), rtol=1e-6, atol=1e-7)
    assert len(compilations) == len(compiled.param_groups) == 4
