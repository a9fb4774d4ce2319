"""minigrad.plan.revolve, the binomial schedule: counts on numbers, then executed by the engine."""
import math
from functools import lru_cache

import numpy as np
import pytest

from marks import fast_every

from minigrad import plan as ML  # the binomial schedule: minigrad/plan/binomial.py


@lru_cache(maxsize=None)
def _brute_t(l, s):
    """Fewest untaped steps to reverse l steps with s slots, by exhaustive recursion
    over the first snapshot position (the structure of every optimal schedule)."""
    if l == 1:
        return 0
    if s == 0:
        return math.inf
    return min(m + _brute_t(l - m, s - 1) + _brute_t(m, s) for m in range(1, l))


def test_beta_and_repetition_number():
    assert ML.beta(3, 2) == math.comb(5, 3) == 10
    assert ML.beta(2, -1) == 0
    for s in range(1, 9):
        for l in range(1, 200):
            r = ML.repetition_number(l, s)
            assert ML.beta(s, r - 1) < l <= ML.beta(s, r)


@pytest.mark.parametrize("s", range(1, 9))
def test_closed_form_equals_brute_force(s):
    for l in range(1, 121):
        assert ML.untaped_forward_steps(l, s) == _brute_t(l, s), (l, s)


def test_closed_form_special_cases():
    for l in range(1, 60):
        assert ML.untaped_forward_steps(l, 1) == l * (l - 1) // 2  # replay from the input
        assert ML.untaped_forward_steps(l, l) == l - 1              # enough slots: no replay


@pytest.mark.parametrize("s", range(1, 9))
def test_action_list_counts_and_slots(s):
    for l in range(1, 61):
        plan = ML.revolve(l, s)
        t = ML.untaped_forward_steps(l, s)
        adv = sum(a[2] - a[1] for a in plan.actions if a[0] == "advance")
        taped = [a[1] for a in plan.actions if a[0] == "taped"]
        assert adv == plan.n_untaped_forward_steps == t
        assert sorted(taped) == list(range(l)) and taped == sorted(taped, reverse=True)
        assert plan.n_layer_calls == t + l
        assert plan.max_snapshots <= s
        # every restore reads a held snapshot; every advance starts at the state reached
        held, pos = set(), 0
        for act in plan.actions:
            if act[0] == "snapshot":
                assert act[1] == pos
                held.add(act[1])
            elif act[0] == "free":
                held.remove(act[1])
            elif act[0] == "restore":
                assert act[1] in held
                pos = act[1]
            elif act[0] == "advance":
                assert act[1] == pos
                pos = act[2]
            elif act[0] == "taped":
                assert act[1] == pos
        assert not held


def test_split_is_optimal_and_in_range():
    for s in range(1, 9):
        for l in range(2, 150):
            m = ML.binomial_split(l, s)
            assert 1 <= m < l
            t_rest = 0 if l - m == 1 else (math.inf if s == 1 else ML.untaped_forward_steps(l - m, s - 1))
            assert m + t_rest + ML.untaped_forward_steps(m, s) == ML.untaped_forward_steps(l, s)


@pytest.mark.parametrize("n,slots,msg", [(10, 0, r"1 <= slots"), (0, 3, r"1 <= n"), (5, -2, r"1 <= slots")])
def test_bad_input(n, slots, msg):
    with pytest.raises(ValueError, match=msg):
        ML.revolve(n, slots)


# --- executed by the engine -----------------------------------------------------------

def _engine():
    import minigrad as mg
    from minigrad import nn
    from minigrad.checkpoint import checkpoint_sequential
    return mg, nn, checkpoint_sequential  # (imports kept local: numbers first)


class Counted:
    """Wrap a layer and count its calls."""

    def __init__(self, layer):
        self.layer, self.calls = layer, 0

    def __call__(self, x):
        self.calls += 1
        return self.layer(x)

    def parameters(self):
        return list(self.layer.parameters())


def _plain(layers, h):
    for layer in layers:
        h = layer(h)
    return h


def _grads(mg, layers, x, run):
    for layer in layers:
        for p in layer.parameters():
            p.grad = None
    x = mg.Tensor(x.copy(), requires_grad=True)
    y = run(x)
    y.sum().backward()
    return [x.grad.copy()] + [p.grad.copy() for layer in layers for p in layer.parameters()]


@pytest.mark.parametrize("s", fast_every(range(1, 9), 4))
def test_revolve_calls_and_gradients(s):
    mg, nn, checkpoint_sequential = _engine()
    rng = np.random.default_rng(s)
    for l in range(1, 61):
        layers = [Counted(nn.Linear(3, 3) if i % 2 == 0 else nn.Tanh()) for i in range(l)]
        x = rng.standard_normal((2, 3))
        plain = _grads(mg, layers, x, lambda h: _plain(layers, h))
        for c in layers:
            c.calls = 0
        plan = ML.revolve(l, s)
        ckpt = _grads(mg, layers, x, lambda h: checkpoint_sequential(layers, plan, h))
        calls = sum(c.calls for c in layers)
        assert calls == ML.untaped_forward_steps(l, s) + l, (l, s, calls)
        for a, b in zip(plain, ckpt):
            assert np.array_equal(a, b)


@pytest.mark.parametrize("s", [1, 2, 3, 5])
def test_revolve_memory_stays_within_its_slots(s):
    # A chain of Linear layers: each saves only its input (B bytes; the weight is a
    # parameter). Holding at most s snapshots plus the one taped layer's input
    # bounds the saved activations by (s + 1) * B, whatever the depth.
    mg, nn, checkpoint_sequential = _engine()
    from minigrad import memory
    n, width, batch = 40, 16, 8
    mg.random.manual_seed(0)
    layers = [nn.Linear(width, width) for _ in range(n)]
    x = mg.Tensor(np.ones((batch, width), np.float32), requires_grad=True)
    B = batch * width * 4

    def peak(plan):
        with memory.track(record_timeline=False) as m:
            y = checkpoint_sequential(layers, plan, x) if plan else _plain(layers, x)
            y.backward(np.ones(y.shape, np.float32))
        return m.peak["activations"]

    assert peak(None) == n * B
    got = peak(ML.revolve(n, s))
    assert got <= (s + 1) * B
    assert got >= min(s, 2) * B  # it does keep snapshots: more than one layer's worth


def test_run_schedule_rejects_a_plan_for_another_chain():
    mg, nn, checkpoint_sequential = _engine()
    from minigrad.checkpoint import run_schedule
    layers = [nn.Tanh() for _ in range(4)]
    x = mg.Tensor(np.ones((2, 3), np.float32), requires_grad=True)
    with pytest.raises(ValueError, match="n=5 layers but 4"):
        run_schedule(layers, ML.revolve(5, 2), x)
    with pytest.raises(ValueError, match="n=5 layers but 4"):
        checkpoint_sequential(layers, ML.revolve(5, 2), x)
    with pytest.raises(TypeError, match="must have n and actions"):
        run_schedule(layers, object(), x)


def test_revolve_thousand_layers_one_slot_is_iterative():
    # The recursion of the schedule is unrolled: no RecursionError however deep.
    plan = ML.revolve(1000, 1)
    assert plan.n_untaped_forward_steps == 1000 * 999 // 2
    assert plan.max_snapshots == 1
    # snapshot 0; advance + taped 999; (restore 0, advance, taped) for 998 .. 1;
    # restore 0 + taped 0; free 0
    assert len(plan.actions) == 1 + 2 + 998 * 3 + 2 + 1


@pytest.mark.slow
def test_six_hundred_layers_one_slot_run_is_iterative():
    mg, nn, checkpoint_sequential = _engine()
    layers = [nn.Tanh() for _ in range(600)]
    x = mg.Tensor(np.full((1, 2), 0.01), requires_grad=True)
    y = checkpoint_sequential(layers, ML.revolve(600, 1), x)
    y.sum().backward()
    got = x.grad.copy()
    x.grad = None
    h = x
    for layer in layers:
        h = layer(h)
    h.sum().backward()
    assert np.array_equal(got, x.grad)
