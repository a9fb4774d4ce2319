"""minigrad.remat.run: a graph schedule executed on the real step. The ledger's measured
peak equals the schedule's predicted activation peak and stays within the budget, the
recomputed FLOPs are the schedule's, and the gradients are bit-identical to the plain
step's, on a GPT-like block (residuals, attention fan-out), a small U-Net (skip
connections) and a block with dropout (random state replayed)."""
import numpy as np
import pytest

import minigrad
import minigrad.ops as F
from bookkit.graphs import gpt_stack, tiny_unet
from minigrad import memory, nn, plan, remat

pytest.importorskip("scipy")


def _plain(model):
    model.zero_grad()
    with memory.track() as m:
        model.step(model.x).backward()
    return m, [p.grad.copy() for p in model.parameters()]


def _check(model, schedule, grads):
    model.zero_grad()
    with memory.track() as m:
        loss = remat.run(schedule, model.step, model.x)
    assert isinstance(loss, minigrad.Tensor)
    for want, p in zip(grads, model.parameters()):
        assert np.array_equal(want, p.grad)  # bit for bit
    assert m.peak["activations"] == schedule.predicted_activation_bytes
    assert schedule.predicted_activation_bytes <= schedule.predicted_peak_bytes
    assert schedule.predicted_peak_bytes <= schedule.budget_bytes
    assert m.flops["recompute"] == schedule.recompute_flops
    return m


def _schedule_keeping(g, fraction):
    """A cheap valid schedule for executor tests (no solver): the LP relaxation's rounding."""
    sa = plan.store_all(g)
    budget = max(plan.lower_bound(g), int(fraction * sa.predicted_peak_bytes))
    return plan.remat(g, budget, relax=True)


@pytest.mark.parametrize("make, fraction", [(lambda: gpt_stack(1, d_model=8, seq_len=4), 0.93),
                                            (lambda: tiny_unet((16, 8, 4), batch=4), 0.97)])
def test_optimal_schedule_runs_within_budget_with_identical_gradients(make, fraction):
    model = make()
    m0, grads = _plain(model)
    g = plan.trace_graph(model.step, model.x)
    sa = plan.store_all(g)
    # store-all through the executor: the same gradients, no recomputation; the ledger
    # sees what the plain step saves, plus the outputs the executor keeps with private
    # arrays (an op whose backward reads only its private arrays)
    m = _check(model, plan.remat(g, sa.predicted_peak_bytes, time_limit_s=10), grads)
    assert m.flops["recompute"] == 0
    assert m.peak["activations"] >= m0.peak["activations"]
    budget = int(fraction * sa.predicted_peak_bytes)
    s = plan.remat(g, budget, time_limit_s=20)
    m = _check(model, s, grads)
    assert s.optimal and s.recompute_flops > 0
    # keeping nothing recomputable: the most recomputation, the least memory
    least = plan.keeping(g, [])
    least = type(least)(**{**least.__dict__, "budget_bytes": least.predicted_peak_bytes})
    m = _check(model, least, grads)
    assert least.recompute_flops >= s.recompute_flops
    assert m.peak["activations"] < m0.peak["activations"]


def test_rounded_schedules_run_too():
    model = gpt_stack(1, d_model=8, seq_len=4)
    _, grads = _plain(model)
    g = plan.trace_graph(model.step, model.x)
    ran = 0
    for fraction in (0.95, 0.9, 0.75):
        try:
            s = _schedule_keeping(g, fraction)
        except ValueError:
            continue
        _check(model, s, grads)
        ran += 1
    assert ran >= 1


def test_dropout_masks_are_replayed():
    minigrad.random.manual_seed(3)
    block = nn.TransformerBlock(8, 2, dropout=0.3)
    rng = np.random.default_rng(3)
    x = minigrad.Tensor(rng.standard_normal((1, 4, 8)).astype(np.float32))
    y = minigrad.Tensor(rng.standard_normal((1, 4, 8)).astype(np.float32))

    def step(x):
        return F.mse_loss(block(x), y)
    minigrad.random.manual_seed(5)
    step(x).backward()
    grads = [p.grad.copy() for p in block.parameters()]
    g = plan.trace_graph(step, x)
    assert "dropout" in g.names
    s = plan.keeping(g, [])  # keep nothing recomputable: every mask is drawn again
    assert any(g.names[i] == "dropout" for r in s.recompute for i in r)
    for p in block.parameters():
        p.grad = None
    minigrad.random.manual_seed(5)
    remat.run(s, step, x)
    for want, p in zip(grads, block.parameters()):
        assert np.array_equal(want, p.grad)


def test_a_different_step_is_refused():
    model = gpt_stack(1, d_model=8, seq_len=4)
    g = plan.trace_graph(model.step, model.x)
    s = plan.store_all(g)
    other = tiny_unet((8, 4), batch=4)
    with pytest.raises(RuntimeError, match="trace the same step"):
        remat.run(s, other.step, other.x)
    # the ledger is left clean: nothing stays held as an activation
    assert memory.live_bytes()["activations"] == 0


def test_batchnorm_statistics_are_updated_once_and_leaf_inputs_get_their_gradient():
    minigrad.random.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 4))
    rng = np.random.default_rng(0)
    x = minigrad.Tensor(rng.standard_normal((16, 8)).astype(np.float32), requires_grad=True)
    y = minigrad.Tensor(rng.standard_normal((16, 4)).astype(np.float32))

    def step(x):
        return F.mse_loss(model(x), y)
    bn = model[1]
    before = bn.running_mean.data.copy()
    step(x).backward()
    after_plain = bn.running_mean.data.copy()
    grads = [p.grad.copy() for p in model.parameters()] + [x.grad.copy()]
    g = plan.trace_graph(step, x)  # a dry run: it updates the statistics too
    s = plan.keeping(g, [])
    assert any(g.names[i] == "batchnorm" for r in s.recompute for i in r)
    bn.running_mean.data[...] = before
    for p in model.parameters() + [x]:
        p.grad = None
    remat.run(s, step, x)
    assert np.array_equal(bn.running_mean.data, after_plain)
    for want, p in zip(grads, model.parameters() + [x]):
        assert np.array_equal(want, p.grad)


# --- never silently wrong: what differs from the plan is an error -------------------------
def _mlp(batch):
    minigrad.random.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 2))
    x = minigrad.Tensor(np.ones((batch, 4), np.float32))

    def step(x):
        return F.mse_loss(model(x), minigrad.Tensor(np.zeros((x.shape[0], 2), np.float32)))
    return step, x


def test_a_schedule_planned_at_batch_8_refuses_batch_64():
    step, x8 = _mlp(8)
    s = plan.keeping(plan.trace_graph(step, x8), [])
    remat.run(s, step, x8)  # the shapes it was planned for run
    _, x64 = _mlp(64)
    with pytest.raises(RuntimeError, match=r"\(64, 8\) float32 output.*planned for \(8, 8\)"):
        remat.run(s, step, x64)
    assert memory.live_bytes()["activations"] == 0


def test_an_op_with_its_own_generator_is_refused_not_replayed_wrong():
    gen = minigrad.random.Generator(1)
    lin = nn.Linear(4, 4)
    x = minigrad.Tensor(np.ones((3, 4), np.float32))

    def step(x):
        return F.dropout(lin(x).tanh(), 0.5, generator=gen).sum()
    s = plan.keeping(plan.trace_graph(step, x), [])
    with pytest.raises(RuntimeError, match="own minigrad.random.Generator"):
        remat.run(s, step, x)
    # with the default generator the same step runs and is replayed (no error)
    s2 = plan.keeping(plan.trace_graph(lambda x: F.dropout(lin(x).tanh(), 0.5).sum(), x), [])
    remat.run(s2, lambda x: F.dropout(lin(x).tanh(), 0.5).sum(), x)


class _NumpyNoise(minigrad.Function):
    """Adds noise from NumPy's global generator: a stream remat.run cannot replay."""

    @staticmethod
    def forward(ctx, a):
        return a + np.random.standard_normal(a.shape).astype(a.dtype)

    @staticmethod
    def backward(ctx, grad):
        return grad

    flops = staticmethod(lambda ctx, out, a: int(a.size))


def test_a_recomputation_that_differs_is_an_error_not_other_gradients():
    lin = nn.Linear(4, 4)
    x = minigrad.Tensor(np.ones((3, 4), np.float32))

    def noisy(x):
        return (_NumpyNoise.apply(lin(x)).tanh() * 2.0).sum()
    state = np.random.get_state()
    g = plan.trace_graph(noisy, x)
    assert np.array_equal(np.random.get_state()[1], state[1])  # tracing left it as found
    s = plan.keeping(g, [])
    assert any(g.names[i] == "_numpynoise" for i, _ in s.recomputed_nodes)
    with pytest.raises(RuntimeError, match="other values than its first forward"):
        remat.run(s, noisy, x)
    # an argument edited in place after the op ran: its recomputation differs too
    w = minigrad.Tensor(np.ones((3, 4), np.float32))

    def edits(x):
        h = lin(x).tanh() * w
        w.data[...] = 3.0
        return (h.tanh() * 2.0).sum()
    s = plan.keeping(plan.trace_graph(edits, x), [])
    w.data[...] = 1.0
    with pytest.raises(RuntimeError, match="edited in place"):
        remat.run(s, edits, x)


class _Unpriced(minigrad.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 1.0

    @staticmethod
    def backward(ctx, grad):
        return grad


def test_trace_refuses_a_backward_inside_the_step_and_an_op_without_flops():
    step, x = _mlp(4)

    def trains_itself(x):
        loss = step(x)
        loss.backward()
        return step(x)
    with pytest.raises(ValueError, match="ran a backward pass itself"):
        plan.trace_graph(trains_itself, x)
    lin = nn.Linear(4, 4)
    with pytest.raises(ValueError, match=r"_unpriced .*no FLOP count.*free_ops"):
        plan.trace_graph(lambda x: _Unpriced.apply(lin(x)).sum(), x)
    g = plan.trace_graph(lambda x: _Unpriced.apply(lin(x)).sum(), x, free_ops={"_unpriced"})
    assert g.flops[g.names.index("_unpriced")] == 0
