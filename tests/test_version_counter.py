"""Tensor._version, as torch's version counter: every in-place update through the data
setter (and minigrad's own: optimizers, load_state_dict, BatchNorm's running statistics)
bumps it; a node that saved a tensor's array raises torch's "modified by an inplace
operation" error when backward reads it after an update; the executors that recompute
(checkpoint, checkpoint_sequential, run_schedule, remat.run, dtr.budget) raise too where
their result would otherwise differ, and nothing raises when nothing saved is edited."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import minigrad
import minigrad.ops as F
from minigrad import Tensor, dtr, nn, optim, plan, remat
from minigrad.autograd import increment_version
from minigrad.checkpoint import checkpoint, checkpoint_sequential, run_schedule
from minigrad.recompute import CheckpointError

MODIFIED = "modified by an inplace operation"


def _mlp(seed=0):
    minigrad.random.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3))


def _deep():
    """The dtr module's example: at 1536 B of 3072 the pool evicts and rebuilds."""
    minigrad.random.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 16), nn.GELU(), nn.Linear(16, 16), nn.GELU(),
                          nn.Linear(16, 16))
    return model, Tensor(np.ones((8, 16), np.float32))


def _x():
    return Tensor(np.linspace(-1, 1, 8 * 4, dtype=np.float32).reshape(8, 4))


# --- every in-place path bumps the version --------------------------------------------------
def test_the_data_setter_bumps_in_place_and_on_replacement():
    t = Tensor(np.ones(3, np.float32))
    assert t._version == 0
    t.data -= 1.0
    t.data *= 2.0
    assert t._version == 2
    t.data = np.zeros(3, np.float32)
    assert t._version == 3
    t.data[0] = 5.0  # NumPy's own write: not seen (documented, as torch's .data)
    assert t._version == 3
    increment_version(t)
    assert t._version == 4
    with pytest.raises(AttributeError):
        t._version = 0  # read-only, as torch's
    with pytest.raises(TypeError, match="expected a Tensor"):
        increment_version(np.ones(2))


def test_parameter_setter_bumps_in_place_and_on_replacement():
    p = nn.Parameter(np.ones((2, 2), np.float32))
    p.data -= 0.5
    p.data = np.zeros((2, 2), np.float32)
    assert p._version == 2


@pytest.mark.parametrize("make", [
    lambda ps: optim.SGD(ps, lr=0.1),
    lambda ps: optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.01),
    lambda ps: optim.AdamW(ps, lr=0.1),
    lambda ps: optim.AdamW(ps, lr=0.1, weight_decay=0.0),
])
def test_optimizer_steps_bump_every_updated_parameter(make):
    model = _mlp()
    opt = make(model.parameters())
    model(_x()).sum().backward()
    before = [p._version for p in model.parameters()]
    opt.step()
    assert all(p._version > v for p, v in zip(model.parameters(), before))


def test_load_state_dict_bumps_parameters_and_buffers():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    state = {k: np.asarray(v) for k, v in model.state_dict().items()}
    model.load_state_dict(state)
    tensors = list(model.parameters()) + [model[1].running_mean, model[1].running_var]
    assert all(t._version == 1 for t in tensors)


def test_batchnorm_running_statistics_bump_only_when_updated():
    bn = nn.BatchNorm1d(3)
    x = Tensor(np.arange(12, dtype=np.float32).reshape(4, 3))
    bn(x)
    assert bn.running_mean._version == bn.running_var._version == 1
    with minigrad.hooks.dry_run():
        bn(x)
    bn.eval()
    bn(x)
    assert bn.running_mean._version == bn.running_var._version == 1


# --- a plain step ---------------------------------------------------------------------------
def test_an_edited_saved_input_raises_naming_op_input_shape_and_versions():
    w = Tensor(np.ones((2, 3), np.float32), requires_grad=True)
    x = Tensor(np.full((2, 3), 2.0, np.float32), requires_grad=True)
    y = (x * w).sum()  # mul saves both inputs
    w.data *= 3.0
    with pytest.raises(RuntimeError, match=MODIFIED) as e:
        y.backward()
    msg = str(e.value)
    assert "mul saved as its input 1" in msg and "shape (2, 3)" in msg
    assert "is at version 1; expected version 0 instead" in msg and "Hint" in msg


def test_an_edited_saved_output_raises():
    x = Tensor(np.zeros(4, np.float32), requires_grad=True)
    y = x.exp()  # exp saves its output
    y.data *= 2.0
    with pytest.raises(RuntimeError, match="exp saved as its output is at version 1"):
        y.sum().backward()


def test_a_replaced_array_counts_as_an_update():
    w = Tensor(np.ones(3, np.float32), requires_grad=True)
    loss = (w * w).sum()
    w.data = np.zeros(3, np.float32)
    with pytest.raises(RuntimeError, match=MODIFIED):
        loss.backward()


def test_a_direct_view_of_a_saved_parameter_is_checked():
    """BatchNorm saves a reshaped view of its weight: the view's base is the weight's array."""
    bn = nn.BatchNorm1d(3)
    loss = bn(Tensor(np.random.default_rng(0).random((5, 3), np.float32))).sum()
    bn.weight.data -= 0.1
    with pytest.raises(RuntimeError, match="batchnorm saved as its input 1"):
        loss.backward()


def test_no_false_alarm_after_backward_or_on_an_unsaved_tensor():
    model, x = _mlp(), _x()
    opt = optim.SGD(model.parameters(), lr=0.1)
    for _ in range(3):  # edits after backward (the optimizer's step) are fine
        opt.zero_grad()
        model(x).sum().backward()
        opt.step()
    b = Tensor(np.ones(4, np.float32), requires_grad=True)
    h = Tensor(np.zeros(4, np.float32), requires_grad=True)
    loss = (h + b).tanh().sum()  # add saves nothing; tanh saves its own output
    b.data += 1.0
    loss.backward()  # the values backward reads are unchanged: no error
    np.testing.assert_allclose(h.grad, 1 - np.tanh(1.0) ** 2, rtol=1e-6)
    w = Tensor(np.ones(2, np.float32), requires_grad=True)
    w.data *= 2.0  # before the forward: the op saves version 1
    (w * w).sum().backward()
    np.testing.assert_array_equal(w.grad, [4.0, 4.0])


def test_retain_graph_then_an_optimizer_step_then_backward_again_raises():
    model, x = _mlp(), _x()
    loss = model(x).sum()
    loss.backward(retain_graph=True)
    optim.SGD(model.parameters(), lr=0.1).step()
    with pytest.raises(RuntimeError, match=MODIFIED):
        loss.backward()


@settings(max_examples=40, deadline=None)
@given(edit_w=st.booleans(), edit_b=st.booleans(), after=st.booleans())
def test_raises_exactly_when_a_saved_tensor_changed_before_backward(edit_w, edit_b, after):
    """``(x @ w + b).tanh()``: matmul saves x and w (both require grad), add nothing. An
    update of w between forward and backward raises; any other order gives the plain
    step's gradients."""
    rng = np.random.default_rng(1)
    x = Tensor(rng.random((3, 4), np.float32), requires_grad=True)
    w0, b0 = rng.random((4, 2), np.float32), rng.random(2, np.float32)
    w, b = Tensor(w0.copy(), requires_grad=True), Tensor(b0.copy(), requires_grad=True)
    loss = (x @ w + b).tanh().sum()
    if edit_w and not after:
        w.data *= 2.0
    if edit_b and not after:
        b.data *= 2.0
    if edit_w and not after:
        with pytest.raises(RuntimeError, match="matmul saved as its input 1"):
            loss.backward()
        return
    loss.backward()
    ref_w = Tensor(w0.copy(), requires_grad=True)
    (x @ ref_w + Tensor(b0.copy())).tanh().sum().backward()
    np.testing.assert_array_equal(w.grad, ref_w.grad)


# --- checkpoints ----------------------------------------------------------------------------
@pytest.mark.parametrize("use_reentrant", [False, True])
def test_a_checkpoints_input_edited_before_backward_raises(use_reentrant):
    x = Tensor(np.linspace(0, 1, 6, dtype=np.float32), requires_grad=True)
    y = checkpoint(lambda h: (h * h).tanh(), x, use_reentrant=use_reentrant)
    x.data += 1.0
    with pytest.raises(RuntimeError, match=MODIFIED + ".*checkpoint saved as its input 0"):
        y.sum().backward()


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_a_parameter_read_inside_a_checkpoint_and_updated_before_backward_raises(use_reentrant):
    """b is read by an add, which saves nothing: only the recomputation would see the
    update (the plain step would not), so the checkpoint says so."""
    b = Tensor(np.ones(6, np.float32), requires_grad=True)
    x = Tensor(np.linspace(0, 1, 6, dtype=np.float32), requires_grad=True)
    y = checkpoint(lambda h: (h + b).tanh(), x, use_reentrant=use_reentrant)
    b.data -= 0.5
    with pytest.raises(CheckpointError, match="argument 1 of op 'add'.*version 0 and is at "
                                              "version 1"):
        y.sum().backward()


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoint_sequential_and_an_optimizer_step_before_backward(use_reentrant):
    model, x = _mlp(), _x()
    x.requires_grad = True
    y = checkpoint_sequential(list(model), 2, x, use_reentrant=use_reentrant)
    for p in model.parameters():
        p.data *= 0.5
    with pytest.raises(RuntimeError, match="version"):
        y.sum().backward()


@pytest.mark.parametrize("use_reentrant", [False, True])
def test_checkpoints_give_the_same_gradients_when_edits_come_after_backward(use_reentrant):
    model, x = _mlp(), _x()
    x.requires_grad = True
    grads = []
    for _ in range(2):
        model.zero_grad()
        checkpoint_sequential(list(model), 2, x, use_reentrant=use_reentrant).sum().backward()
        grads.append([p.grad.copy() for p in model.parameters()])
        for p in model.parameters():  # an update after backward (undone): no alarm
            p.data *= 2.0
            p.data /= 2.0
    assert all(np.array_equal(a, b) for a, b in zip(*grads))


def test_run_schedule_input_or_parameter_updated_before_backward_raises():
    model = _mlp()
    layers = list(model)
    x = _x()
    x.requires_grad = True
    y = run_schedule(layers, plan.revolve(len(layers), 1), x)
    x.data *= 2.0
    with pytest.raises(RuntimeError, match=MODIFIED):
        y.sum().backward()
    y = run_schedule(layers, plan.revolve(len(layers), 1), x)
    layers[0].weight.data *= 2.0
    with pytest.raises(CheckpointError, match="run_schedule"):
        y.sum().backward()


# --- remat.run and dtr.budget ------------------------------------------------------------
def _step(model, y):
    return lambda x: F.mse_loss(model(x), y)


def _schedules(g):
    return [plan.store_all(g), plan.keeping(g, [])]


@pytest.mark.parametrize("which", [0, 1])
def test_remat_run_a_parameter_updated_after_it_was_saved_raises(which):
    model, x = _mlp(), _x()
    y = Tensor(np.zeros((8, 3), np.float32))
    step = _step(model, y)
    schedule = _schedules(plan.trace_graph(step, x))[which]
    w = model[2].weight

    def edited(x):
        loss = step(x)
        w.data *= 2.0  # after linear saved w, before backward
        return loss
    # (keeping nothing, the recomputation that precedes the read differs first)
    with pytest.raises(RuntimeError, match=MODIFIED if which == 0 else "edited in place"):
        remat.run(schedule, edited, x)


@pytest.mark.parametrize("which", [0, 1])
def test_remat_run_an_intermediate_updated_inside_the_step_raises(which):
    model, x = _mlp(), _x()
    step = lambda x: model(x).sum()  # noqa: E731
    schedule = _schedules(plan.trace_graph(step, x))[which]

    def edited(x):
        h = model[0](x)
        h.data *= 2.0  # the schedule would rebuild h from linear: the value before this
        return model[2](model[1](h)).sum()
    with pytest.raises(RuntimeError, match="remat.run: op 1 .*updated in place since"):
        remat.run(schedule, edited, x)


def test_remat_run_and_dtr_give_plain_gradients_with_updates_between_steps():
    model, x = _deep()
    step = _step(model, x)
    schedule = plan.keeping(plan.trace_graph(step, x), [])
    opt = optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        model.zero_grad()
        step(x).backward()
        want = [p.grad.copy() for p in model.parameters()]
        model.zero_grad()
        remat.run(schedule, step, x)
        assert all(np.array_equal(a, p.grad) for a, p in zip(want, model.parameters()))
        model.zero_grad()
        with dtr.budget(1536) as pool:
            step(x).backward()
        assert pool.evictions > 0
        assert all(np.array_equal(a, p.grad) for a, p in zip(want, model.parameters()))
        opt.step()


def test_dtr_a_parameter_updated_before_backward_raises():
    model, x = _deep()
    with dtr.budget(1536):
        loss = model(x).sum()
        model[4].weight.data -= 0.1  # saved by the last linear (its input requires grad)
        with pytest.raises(RuntimeError, match=MODIFIED):
            loss.backward()


def test_dtr_an_intermediate_updated_inside_the_step_raises():
    model, x = _deep()
    with dtr.budget(1536):
        h = model[0](x)
        h.data *= 2.0
        with pytest.raises(RuntimeError, match="dtr.budget: op gelu reads, as its argument 0"):
            model[1](h)


def test_saved_tensors_hooks_do_not_hide_an_update():
    """Unlike torch (which cannot see through hooks), the engine checks the tensors whose
    arrays a pack hook received: the executors that recompute rely on it."""
    w = Tensor(np.ones(3, np.float32), requires_grad=True)
    x = Tensor(np.full(3, 2.0, np.float32), requires_grad=True)
    with minigrad.saved_tensors_hooks(lambda a: a.copy(), lambda a: a):
        y = (x * w).sum()
    w.data -= 1.0
    with pytest.raises(RuntimeError, match="mul saved as its input 1"):
        y.backward()
